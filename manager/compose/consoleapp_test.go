package compose

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"fmgr.dev/app"
	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/server"
)

// fakeAppProxy answers with the path the apps proxy was asked for.
type fakeAppProxy struct{}

func (fakeAppProxy) Pattern() string { return "/apps/" }
func (fakeAppProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.WriteString(w, "proxied "+r.Method+" "+r.URL.RequestURI())
}

// console.app sends /v2 and everything under it to the app through the
// apps proxy, path kept; a missing or stopped app is a 503 naming it.
func TestConsoleApp(t *testing.T) {
	ctx := context.Background()
	svc := app.NewService(app.NewStore(dbtest.Migrated(t, dbtest.SQLiteDSN(t))), app.Options{NoRuntime: "tests run no apps"})
	cfg := config.Default()
	cfg.Console.App = "flytesnacks/development/ui"
	scfg := cfg.Server
	scfg.Port = 0
	srv := server.New(scfg, slog.New(slog.DiscardHandler))
	if err := setupConsoleApp(srv, appsFront{svc: svc, proxy: fakeAppProxy{}}, &cfg, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	get := func(method, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, hs.URL+path, nil)
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	if code, body := get("GET", "/v2/projects"); code != http.StatusServiceUnavailable || !strings.Contains(body, "app ui in project flytesnacks") || !strings.Contains(body, "not deployed") {
		t.Errorf("before the app exists: %d %q", code, body)
	}
	id := &pb.Identifier{Project: "flytesnacks", Domain: "development", Name: "ui"}
	created, err := svc.Create(ctx, connect.NewRequest(&pb.CreateRequest{App: &pb.App{Metadata: &pb.Meta{Id: id}, Spec: &pb.Spec{
		DesiredState: pb.Spec_DESIRED_STATE_ACTIVE,
		AppPayload:   &pb.Spec_Container{Container: &core.Container{Image: "img"}},
	}}}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/v2", "proxied GET /apps/flytesnacks/development/ui/v2"},
		{"GET", "/v2/domain/development/project/flytesnacks/runs?phase=x", "proxied GET /apps/flytesnacks/development/ui/v2/domain/development/project/flytesnacks/runs?phase=x"},
		{"POST", "/v2/api/action", "proxied POST /apps/flytesnacks/development/ui/v2/api/action"},
	} {
		if code, body := get(c.method, c.path); code != http.StatusOK || body != c.want {
			t.Errorf("%s %s: %d %q, want %q", c.method, c.path, code, body, c.want)
		}
	}

	a := created.Msg.GetApp()
	a.Spec.DesiredState = pb.Spec_DESIRED_STATE_STOPPED
	if _, err := svc.Update(ctx, connect.NewRequest(&pb.UpdateRequest{App: a})); err != nil {
		t.Fatal(err)
	}
	if code, body := get("GET", "/v2/"); code != http.StatusServiceUnavailable || !strings.Contains(body, "app ui") || !strings.Contains(body, "is stopped") {
		t.Errorf("while the app is stopped: %d %q", code, body)
	}

	// Without a proxy (an executor whose apps the manager does not serve)
	// the manager refuses to start.
	if err := setupConsoleApp(server.New(scfg, nil), appsFront{svc: svc}, &cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "console.app") {
		t.Errorf("console.app without an apps proxy: %v", err)
	}
}
