package mgrproc

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"fmgr.dev/internal/testkit"
)

// A binary that exits before serving is reported at once with what it
// printed, not after the start deadline.
func TestStartReportsEarlyExit(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fake-manager")
	script := "#!/bin/sh\necho 'cannot open the database: boom' >&2\nexit 3\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Options{Bin: bin, Home: t.TempDir(), StartTimeout: time.Hour})
	if err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Start of a binary that exits = %v, want an error naming the exit and its output", err)
	}
}

// Args replaces the `start` command line.
func TestStartArgs(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fake-manager")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"args: $*\" >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Options{Bin: bin, Home: "h", Args: []string{"--home", "dev", "--port", "0"}, StartTimeout: time.Hour})
	if err == nil || !strings.Contains(err.Error(), "args: --home dev --port 0\n") {
		t.Fatalf("Start = %v, want the output of a run with Args alone", err)
	}
}

func TestBufferAwait(t *testing.T) {
	var b testkit.Buffer
	seen := b.Await(ServingURL)
	b.Write([]byte("starting\n"))
	select {
	case <-seen:
		t.Fatal("Await fired before the banner")
	default:
	}
	b.Write([]byte("flyte-manager dev is serving on http://127.0.0.1:4242 (Connect)\n"))
	select {
	case <-seen:
	default:
		t.Fatal("Await did not fire on the banner")
	}
	if got := ServingURL(b.String()); got != "http://127.0.0.1:4242" {
		t.Errorf("ServingURL = %q", got)
	}
	select {
	case <-b.Await(ServingURL): // already there: closed at once
	default:
		t.Error("Await of text already written did not fire")
	}
}

// fakeManager is a stand-in for flyte-manager: it prints the banner for a
// port of its own, answers /readyz with 200 once the file ready exists
// beside it (so the test controls readiness), and exits 0 on SIGTERM.
const fakeManager = `#!/usr/bin/env python3
import http.server, os, signal, sys
here = os.path.dirname(os.path.abspath(__file__))
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.path == "/readyz" and os.path.exists(os.path.join(here, "ready"))
        self.send_response(200 if ok else 503)
        self.end_headers()
    def log_message(self, *a):
        pass
srv = http.server.HTTPServer(("127.0.0.1", 0), H)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
print("fake is serving on http://127.0.0.1:%d (test)" % srv.server_port, flush=True)
srv.serve_forever()
`

func TestStartKillRestartStop(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "fake-manager")
	if err := os.WriteFile(bin, []byte(fakeManager), 0o755); err != nil {
		t.Fatal(err)
	}
	// Not ready: Start waits for /readyz and gives up at its deadline.
	if _, err := Start(context.Background(), Options{Bin: bin, Home: dir, StartTimeout: 3 * time.Second}); err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("Start of a manager that never gets ready = %v, want a not-ready error", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ready"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Start(context.Background(), Options{Bin: bin, Home: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	first := p.URL
	if !strings.HasPrefix(first, "http://127.0.0.1:") || p.Endpoint() != strings.TrimPrefix(first, "http://") {
		t.Fatalf("URL %q, Endpoint %q", first, p.Endpoint())
	}

	if p.PID() <= 0 {
		t.Fatalf("PID = %d", p.PID())
	}
	p.Kill()
	if p.Running() {
		t.Fatal("still running after Kill")
	}
	if err := p.Signal(syscall.SIGTERM); err == nil {
		t.Error("Signal to a killed manager did not fail")
	}
	if _, err := HTTPClient.Get(first + "/readyz"); err == nil {
		t.Error("the killed manager still answers")
	}
	if err := p.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, err := HTTPClient.Get(p.URL + "/readyz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after Restart, /readyz: %v %v", resp, err)
	}
	resp.Body.Close()
	if err := p.Stop(); err != nil {
		t.Errorf("Stop (SIGTERM) = %v, want a clean exit", err)
	}
	if p.Running() {
		t.Error("still running after Stop")
	}
}
