// Package e2e drives a real flyte-manager process with real clients: the
// official flyteidl2 Python clients and the flyte SDK from the project's
// virtualenv, generated Go clients, and plain HTTP.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/sdktest"
)

var managerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fm-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	managerBin = filepath.Join(dir, "flyte-manager")
	build := exec.Command("go", "build", "-o", managerBin, "fmgr.dev/manager")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building flyte-manager:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	pgtest.Main(m)
}

// backend names a database the manager can run on.
type backend struct {
	name string
	dsn  func(t *testing.T) string
}

// backends are the two databases every end-to-end scenario runs on.
var backends = []backend{
	{"sqlite", func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "fm.db") }},
	{"postgres", func(t *testing.T) string { return pgtest.NewDatabase(t) }},
}

// manager is one running flyte-manager process.
type manager struct {
	URL  string // http://127.0.0.1:<port>
	Home string
	DSN  string

	t      *testing.T
	cmd    *exec.Cmd
	output *syncBuffer
	done   chan struct{}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var servingLine = regexp.MustCompile(`serving on (http://\S+)`)

// startManager runs `flyte-manager start` on a fresh home and dsn, waits
// until it is ready, and stops it when the test ends.
func startManager(t *testing.T, dsn string, env ...string) *manager {
	t.Helper()
	m := &manager{Home: t.TempDir(), DSN: dsn, t: t}
	m.start(env...)
	t.Cleanup(m.Stop)
	return m
}

func (m *manager) start(env ...string) {
	t := m.t
	t.Helper()
	m.output = &syncBuffer{}
	m.cmd = exec.Command(managerBin, "start", "--home", m.Home, "--db", m.DSN, "--port", "0")
	m.cmd.Env = append(os.Environ(), env...)
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	m.cmd.Stderr = m.output
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("starting flyte-manager: %v", err)
	}
	m.done = make(chan struct{})
	urls := make(chan string, 1)
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			m.output.Write([]byte(line + "\n"))
			if match := servingLine.FindStringSubmatch(line); match != nil {
				select {
				case urls <- match[1]:
				default:
				}
			}
		}
		_ = m.cmd.Wait()
	}()
	select {
	case m.URL = <-urls:
	case <-m.done:
		t.Fatalf("flyte-manager exited before serving:\n%s", m.output)
	case <-time.After(60 * time.Second):
		t.Fatalf("flyte-manager did not report its address within 60s:\n%s", m.output)
	}
	m.waitReady()
}

func (m *manager) waitReady() {
	m.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(m.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	m.t.Fatalf("flyte-manager never became ready:\n%s", m.output)
}

// Stop asks the manager to shut down gracefully and waits for it.
func (m *manager) Stop() {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	_ = m.cmd.Process.Signal(os.Interrupt)
	select {
	case <-m.done:
	case <-time.After(60 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
	if m.t.Failed() {
		m.t.Logf("flyte-manager output:\n%s", m.output)
	}
	m.cmd = nil
}

// Kill ends the manager with SIGKILL, as a crash would.
func (m *manager) Kill() {
	_ = m.cmd.Process.Kill()
	<-m.done
	m.cmd = nil
}

// Restart starts the manager again on the same home and database.
func (m *manager) Restart(env ...string) { m.start(env...) }

// Endpoint is the host:port form the SDK is configured with.
func (m *manager) Endpoint() string { return strings.TrimPrefix(m.URL, "http://") }

// metrics returns the manager's Prometheus exposition text.
func (m *manager) metrics() string {
	m.t.Helper()
	resp, err := http.Get(m.URL + "/metrics")
	if err != nil {
		m.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// venv is the project's virtualenv with the pinned flyte SDK (sdktest.Venv).
func venv(t *testing.T) string { return sdktest.Venv(t) }

// python runs a script from testdata with the virtualenv's interpreter and
// returns its stdout; a non-zero exit fails the test with its output.
func python(t *testing.T, ctx context.Context, env []string, script string, args ...string) string {
	t.Helper()
	dir := venv(t)
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "bin", "python"), append([]string{filepath.Join("testdata", script)}, args...)...)
	cmd.Env = append(append(os.Environ(), "PATH="+filepath.Join(dir, "bin")+":"+os.Getenv("PATH"), "FLYTE_DISABLE_SENTRY=true"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("python %s %v: %v\nstdout:\n%s\nstderr:\n%s", script, args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}
