package main

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"fmgr.dev/internal/mgrproc"
)

// auth.mode through a real started manager (docs/auth.md, Modes): the
// embedded default says nothing; explicit off with a listener beyond
// loopback warns in the log, in the banner and in /readyz (which stays
// ready); auto with a listener beyond loopback requires auth, and with no
// API key yet says how to mint the first admin key, which `apikey create`
// does on the manager's home, after which the hint is gone; a bootstrap
// key from the configuration is stored once and never printed.
func TestAuthModeNoticesAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "flyte-manager")
	if _, err := mgrproc.Build(context.Background(), bin); err != nil {
		t.Fatal(err)
	}
	isolate(t)
	ctx := context.Background()
	readyz := func(p *mgrproc.Process) string {
		t.Helper()
		status, body := get(t, p.URL+"/readyz")
		if status != http.StatusOK {
			t.Errorf("/readyz = %d %s\n%s", status, body, p.Output())
		}
		return body
	}
	const warning = "AUTHENTICATION IS OFF"
	const hint = "flyte-manager apikey create --role admin"

	t.Run("loopback default", func(t *testing.T) {
		p, err := mgrproc.Start(ctx, mgrproc.Options{Bin: bin, Home: filepath.Join(t.TempDir(), "home")})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Kill()
		if body := readyz(p); strings.Contains(body, "auth") {
			t.Errorf("/readyz mentions auth on loopback: %s", body)
		}
		if out := p.Output(); strings.Contains(out, warning) || strings.Contains(out, "WITHOUT AUTHENTICATION") || strings.Contains(out, "Authentication is required") {
			t.Errorf("the loopback default warns:\n%s", out)
		}
	})

	t.Run("explicit off beyond loopback", func(t *testing.T) {
		p, err := mgrproc.Start(ctx, mgrproc.Options{Bin: bin, Home: filepath.Join(t.TempDir(), "home"),
			Env: []string{"FLYTE_MANAGER_AUTH_MODE=off", "FLYTE_MANAGER_APPS_LISTEN=0.0.0.0:0"}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Kill()
		if body := readyz(p); !strings.Contains(body, "auth: ok (auth.mode off while listening beyond loopback on 0.0.0.0:0") {
			t.Errorf("/readyz lacks the auth detail: %s", body)
		}
		out := p.Output()
		if !strings.Contains(out, "WARNING: "+warning) || !strings.Contains(out, "level=WARN msg=\"SERVING WITHOUT AUTHENTICATION") {
			t.Errorf("no loud warning at start:\n%s", out)
		}
	})

	t.Run("auto beyond loopback", func(t *testing.T) {
		home := filepath.Join(t.TempDir(), "home")
		env := []string{"FLYTE_MANAGER_APPS_LISTEN=0.0.0.0:0"}
		p, err := mgrproc.Start(ctx, mgrproc.Options{Bin: bin, Home: home, Env: env})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Kill()
		out := p.Output()
		if !strings.Contains(out, "Authentication is required (auth.mode auto") || !strings.Contains(out, hint) || strings.Contains(out, warning) {
			t.Errorf("the banner does not say auth is on and how to get in:\n%s", out)
		}
		// Auth is on: an anonymous call is refused.
		resp, err := mgrproc.HTTPClient.Post(p.URL+"/flyteidl2.project.ProjectService/ListProjects", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("an anonymous ListProjects answered %d, want 401", resp.StatusCode)
		}
		key, err := exec.Command(bin, "apikey", "create", "--home", home, "--role", "admin", "--name", "admin").Output()
		if err != nil || len(strings.TrimSpace(string(key))) < 20 {
			t.Fatalf("apikey create: %v %q", err, key)
		}
		if err := p.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		if out := p.Output(); strings.Contains(out, hint) || !strings.Contains(out, "Authentication is required") {
			t.Errorf("after the first key, the banner:\n%s", out)
		}
		// A deployment's bootstrap key (the chart's) is stored at start, once.
		const boot = "fmk0123456789abcdef:abcdefghijklmnopqrstuvwxyz0123456789"
		for range 2 {
			if err := p.Restart(ctx, "FLYTE_MANAGER_AUTH_BOOTSTRAPKEY="+boot); err != nil {
				t.Fatal(err)
			}
		}
		if strings.Contains(p.Output(), "abcdefghijklmnop") {
			t.Errorf("the manager printed the bootstrap key's secret:\n%s", p.Output())
		}
		// It authenticates, as the SDK's token exchange would present it.
		req, _ := http.NewRequest(http.MethodPost, p.URL+"/flyteidl2.project.ProjectService/ListProjects", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+boot)
		resp, err = mgrproc.HTTPClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("ListProjects with the bootstrap key answered %d, want 200", resp.StatusCode)
		}
		list, err := exec.Command(bin, "apikey", "list", "--home", home).Output()
		if err != nil || strings.Count(string(list), "fmk0123456789abcdef") != 1 || !strings.Contains(string(list), "bootstrap-admin") {
			t.Errorf("apikey list after two starts with a bootstrap key: %v\n%s", err, list)
		}
	})
}
