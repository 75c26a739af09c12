package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"fmgr.dev/internal/pgtest"
)

// repoRoot finds the fmgr.dev module's directory from the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for ; ; dir = filepath.Dir(dir) {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(b), "module fmgr.dev\n") {
			return dir, nil
		}
		if dir == filepath.Dir(dir) {
			return "", errors.New("run the bench from inside the flyte-manager repository (module fmgr.dev)")
		}
	}
}

// buildManager builds flyte-manager with the bench tag (the no-op runner)
// into dir.
func buildManager(ctx context.Context, root, dir string) (string, error) {
	out := filepath.Join(dir, "flyte-manager-bench")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "bench", "-o", out, "./manager")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build -tags bench ./manager: %w", err)
	}
	return out, nil
}

// manager is one running `flyte-manager start`.
type manager struct {
	URL     string // http://127.0.0.1:<port>
	Home    string
	LogPath string
	Pprof   string // host:port of the bench build's pprof server, "" if off

	cmd  *exec.Cmd
	done chan struct{}
}

var servingLine = regexp.MustCompile(`serving on (http://\S+)`)

// startManager starts bin on a fresh home and dsn with the given extra
// environment and waits until /readyz answers 200.
func startManager(ctx context.Context, bin, home, dsn string, env []string, pprof bool) (*manager, error) {
	m := &manager{Home: home, LogPath: filepath.Join(home, "manager.log")}
	if pprof {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		m.Pprof = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		env = append(env, "FLYTE_MANAGER_BENCH_PPROF="+m.Pprof)
	}
	logFile, err := os.Create(m.LogPath)
	if err != nil {
		return nil, err
	}
	m.cmd = exec.Command(bin, "start", "--home", home, "--db", dsn, "--port", "0")
	m.cmd.Env = append(os.Environ(), env...)
	m.cmd.Stderr = logFile
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	if err := m.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	m.done = make(chan struct{})
	urls := make(chan string, 1)
	go func() {
		defer close(m.done)
		defer logFile.Close()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(logFile, sc.Text())
			if match := servingLine.FindStringSubmatch(sc.Text()); match != nil {
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
		return nil, fmt.Errorf("flyte-manager exited before serving; see %s:\n%s", m.LogPath, tailFile(m.LogPath))
	case <-time.After(60 * time.Second):
		m.Stop()
		return nil, fmt.Errorf("flyte-manager did not report its address within 60s; see %s", m.LogPath)
	case <-ctx.Done():
		m.Stop()
		return nil, ctx.Err()
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		resp, err := http.Get(m.URL + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return m, nil
			}
		}
		if time.Now().After(deadline) {
			m.Stop()
			return nil, fmt.Errorf("flyte-manager never became ready; see %s", m.LogPath)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	m.cmd = nil
}

// fetch GETs path from the manager's pprof server into file.
func (m *manager) fetch(ctx context.Context, path, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.Pprof+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, b)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// createDatabase creates a fresh database on the throwaway PostgreSQL server
// and returns its DSN.
func createDatabase(ctx context.Context, pg *pgtest.Server, name string) (string, error) {
	conn, err := pgx.Connect(ctx, pg.DSN("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("creating database %s: %w", name, err)
	}
	return pg.DSN(name), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tailFile(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}
