package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"fmgr.dev/console"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/server"
)

func serve(t *testing.T) *httptest.Server {
	t.Helper()
	srv := server.New(config.Server{Port: 8090}, nil)
	if err := console.Setup(srv); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

func get(t *testing.T, ts *httptest.Server, path string) (*http.Response, string) {
	t.Helper()
	c := ts.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func TestEveryViewPathAnswersTheApplication(t *testing.T) {
	ts := serve(t)
	for _, path := range []string{
		"/v2/", "/v2/projects",
		"/v2/domain/development/project/flytesnacks/runs",
		"/v2/domain/development/project/flytesnacks/runs/r1abc",
		"/v2/domain/development/project/flytesnacks/triggers",
		// Task names have dots: they must not be taken for asset files.
		"/v2/domain/development/project/flytesnacks/tasks/hello.say_hello",
	} {
		resp, body := get(t, ts, path)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `src="/v2/assets/app.js"`) {
			t.Errorf("GET %s: %d, want the application's index", path, resp.StatusCode)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
	}
}

func TestAssetsAndRedirects(t *testing.T) {
	ts := serve(t)
	resp, body := get(t, ts, "/v2/assets/app.js")
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), "javascript") || !strings.Contains(body, "import") {
		t.Errorf("app.js: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp, _ := get(t, ts, "/v2/assets/missing.js"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a missing asset answered %d, want 404", resp.StatusCode)
	}
	for path, want := range map[string]string{"/": "/v2/", "/v2": "/v2/"} {
		resp, _ := get(t, ts, path)
		if resp.StatusCode/100 != 3 || resp.Header.Get("Location") != want {
			t.Errorf("GET %s: %d Location %q, want a redirect to %s", path, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
}
