package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"fmgr.dev/internal/mgrproc"
	"fmgr.dev/internal/testkit"
)

// isolate keeps the machine's configuration out: no FLYTE_MANAGER_
// variables, a temporary HOME. It returns a fresh data dir.
func isolate(t *testing.T) string {
	t.Helper()
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "FLYTE_MANAGER_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	t.Setenv("HOME", t.TempDir())
	return filepath.Join(t.TempDir(), "home")
}

// inProcess is `flyte-manager start --home <home> --port 0` run by this
// test process; it is stopped when the test ends, if not before.
type inProcess struct {
	stdout, stderr *testkit.Buffer
	code           chan int // run's exit code, once it returns
	cancel         context.CancelFunc
	exit           *int
}

// launch starts the manager on home and returns at once.
func launch(t *testing.T, home string) *inProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	m := &inProcess{stdout: &testkit.Buffer{}, stderr: &testkit.Buffer{}, code: make(chan int, 1), cancel: cancel}
	go func() { m.code <- run(ctx, []string{"start", "--home", home, "--port", "0"}, m.stdout, m.stderr) }()
	t.Cleanup(func() { m.stop(t) })
	return m
}

// addr returns the host:port the manager printed in its banner, or fails
// when it exits or does not start in time.
func (m *inProcess) addr(t *testing.T) string {
	t.Helper()
	select {
	case <-m.stdout.Await(mgrproc.ServingURL):
		return strings.TrimPrefix(mgrproc.ServingURL(m.stdout.String()), "http://")
	case c := <-m.code:
		m.exit = &c
		t.Fatalf("manager exited (%d) before serving:\n%s\n%s", c, m.stdout, m.stderr)
	case <-time.After(mgrproc.DefaultStartTimeout):
		t.Fatalf("manager did not start:\n%s", m.stdout)
	}
	return ""
}

// stop cancels the manager and returns its exit code, failing the test when
// it does not return within 30 s.
func (m *inProcess) stop(t *testing.T) int {
	t.Helper()
	m.cancel()
	if m.exit == nil {
		select {
		case c := <-m.code:
			m.exit = &c
		case <-time.After(30 * time.Second):
			t.Error("start did not stop")
			return -1
		}
	}
	return *m.exit
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := mgrproc.HTTPClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// waitReady polls /readyz until it answers 200 or the start deadline
// passes, and returns the last answer. Ready follows serving: the executor's first scan of
// unfinished work may still run when the banner appears.
func waitReady(t *testing.T, addr string) (int, string) {
	t.Helper()
	var status int
	var body string
	testkit.Poll(mgrproc.DefaultStartTimeout, 50*time.Millisecond, func() string {
		if status, body = get(t, "http://"+addr+"/readyz"); status != http.StatusOK {
			return "not ready"
		}
		return ""
	})
	return status, body
}

func TestStartServesHealthAndReady(t *testing.T) {
	home := isolate(t)
	m := launch(t, home)
	addr := m.addr(t)

	if status, body := get(t, "http://"+addr+"/healthz"); status != http.StatusOK {
		t.Errorf("/healthz = %d %q", status, body)
	}
	if status, body := waitReady(t, addr); status != http.StatusOK || !strings.Contains(body, "database: ok") || !strings.Contains(body, "executor: ok") {
		t.Errorf("/readyz = %d %q", status, body)
	}
	if status, _ := get(t, "http://"+addr+"/metrics"); status != http.StatusOK {
		t.Errorf("/metrics = %d", status)
	}

	banner := m.stdout.String()
	port := addr[strings.LastIndex(addr, ":")+1:]
	for _, want := range []string{
		"data:     " + home,
		"sqlite://" + home + "/flyte-manager.db",
		"flyte create config --endpoint localhost:" + port + " --insecure --project flytesnacks --domain development",
	} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner lacks %q:\n%s", want, banner)
		}
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("listening on %s, want 127.0.0.1", addr)
	}
	if _, err := os.Stat(filepath.Join(home, "flyte-manager.db")); err != nil {
		t.Error(err)
	}
	if info, err := os.Stat(filepath.Join(home, "signing.key")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("signing.key: %v %v", info, err)
	}

	if c := m.stop(t); c != 0 {
		t.Errorf("exit code %d; stderr:\n%s", c, m.stderr)
	}
	if !strings.Contains(m.stderr.String(), "shutting down") {
		t.Errorf("no shutdown log:\n%s", m.stderr)
	}
}

func TestStartRejectsBadConfig(t *testing.T) {
	isolate(t)
	f := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(f, []byte("server:\n  prot: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if c := run(context.Background(), []string{"start", "--config", f}, &stdout, &stderr); c == 0 {
		t.Fatal("start accepted an unknown key")
	}
	if !strings.Contains(stderr.String(), `unknown key "server.prot"`) {
		t.Errorf("stderr = %q", stderr.String())
	}
}

func TestConfigRedactsSecrets(t *testing.T) {
	home := isolate(t)
	t.Setenv("FLYTE_MANAGER_STORAGE_SIGNINGKEY", "top-secret-signing-key")
	t.Setenv("FLYTE_MANAGER_SERVER_PORT", "9999")
	var stdout, stderr bytes.Buffer
	c := run(context.Background(), []string{"config", "--home", home, "--db", "postgres://fm:hunter2@db.example:5432/fm"}, &stdout, &stderr)
	if c != 0 {
		t.Fatalf("exit %d: %s", c, stderr.String())
	}
	out := stdout.String()
	for _, secret := range []string{"top-secret-signing-key", "hunter2"} {
		if strings.Contains(out, secret) {
			t.Errorf("config printed secret %q:\n%s", secret, out)
		}
	}
	var printed struct {
		Home     string
		Server   struct{ Port int }
		Database struct {
			DSN string `yaml:"dsn"`
		}
		Storage struct {
			SigningKey string `yaml:"signingKey"`
		}
	}
	if err := yaml.Unmarshal(stdout.Bytes(), &printed); err != nil {
		t.Fatalf("output is not YAML: %v\n%s", err, out)
	}
	if printed.Home != home || printed.Server.Port != 9999 ||
		printed.Database.DSN != "postgres://fm:REDACTED@db.example:5432/fm" || printed.Storage.SigningKey != "REDACTED" {
		t.Errorf("printed %+v", printed)
	}
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Errorf("config created the data dir (err=%v)", err)
	}
}

func TestMigrate(t *testing.T) {
	home := isolate(t)
	for range 2 { // idempotent
		var stdout, stderr bytes.Buffer
		if c := run(context.Background(), []string{"migrate", "--home", home}, &stdout, &stderr); c != 0 {
			t.Fatalf("exit %d: %s", c, stderr.String())
		}
		if !regexp.MustCompile(`database sqlite://\S+ is at schema version [1-9]\d*`).MatchString(stdout.String()) {
			t.Errorf("migrate printed %q", stdout.String())
		}
	}
	if _, err := os.Stat(filepath.Join(home, "flyte-manager.db")); err != nil {
		t.Error(err)
	}

	// --db wins over home.
	other := filepath.Join(t.TempDir(), "other.db")
	var stdout, stderr bytes.Buffer
	if c := run(context.Background(), []string{"migrate", "--db", "sqlite://" + other}, &stdout, &stderr); c != 0 {
		t.Fatalf("exit %d: %s", c, stderr.String())
	}
	if _, err := os.Stat(other); err != nil {
		t.Error(err)
	}
}

func TestVersion(t *testing.T) {
	var stdout bytes.Buffer
	if c := run(context.Background(), []string{"version"}, &stdout, io.Discard); c != 0 {
		t.Fatal(c)
	}
	if !strings.HasPrefix(stdout.String(), "flyte-manager dev (commit unknown, go") {
		t.Errorf("version = %q", stdout.String())
	}
}

// TestBinary builds the real binary with an injected version and stops it
// with SIGTERM.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	// Build before isolate changes HOME, which would also move Go's caches.
	bin := filepath.Join(t.TempDir(), "flyte-manager")
	if _, err := mgrproc.Build(context.Background(), bin, "-ldflags", "-X main.version=v9.8.7 -X main.commit=abc123"); err != nil {
		t.Fatal(err)
	}
	home := isolate(t)

	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "flyte-manager v9.8.7 (commit abc123,") {
		t.Errorf("version = %q, %v", out, err)
	}

	// Started as an operator would, stopped with SIGTERM: a clean exit.
	p, err := mgrproc.Start(context.Background(), mgrproc.Options{Bin: bin, Home: home})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	if err := p.Stop(); err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, p.Output())
	}
	if !strings.Contains(p.Output(), "shutting down") {
		t.Errorf("no shutdown log after SIGTERM:\n%s", p.Output())
	}
}
