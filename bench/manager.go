package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"fmgr.dev/internal/mgrproc"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/testkit"
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
	return mgrproc.Build(ctx, filepath.Join(dir, "flyte-manager-bench"), "-C", root, "-tags", "bench")
}

// manager is one running `flyte-manager start` whose output goes to
// LogPath.
type manager struct {
	*mgrproc.Process
	LogPath string
	Pprof   string // host:port of the bench build's pprof server, "" if off

	log *os.File
}

// startManager starts bin on a fresh home and dsn with the given extra
// environment and configuration files and waits until it is ready.
func startManager(ctx context.Context, bin, home, dsn string, env, configs []string, pprof bool) (*manager, error) {
	m := &manager{LogPath: filepath.Join(home, "manager.log")}
	if pprof {
		port, err := testkit.FreePort()
		if err != nil {
			return nil, err
		}
		m.Pprof = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		env = append(env, "FLYTE_MANAGER_BENCH_PPROF="+m.Pprof)
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	var err error
	if m.log, err = os.Create(m.LogPath); err != nil {
		return nil, err
	}
	m.Process, err = mgrproc.Start(ctx, mgrproc.Options{Bin: bin, Home: home, DSN: dsn, Env: env, Config: configs, Log: m.log})
	if err != nil {
		m.log.Close()
		return nil, fmt.Errorf("%w\n(manager log: %s)", err, m.LogPath)
	}
	return m, nil
}

// Stop shuts the manager down gracefully and closes its log.
func (m *manager) Stop() {
	if err := m.Process.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: flyte-manager stopped with %v (log: %s)\n", err, m.LogPath)
	}
	m.log.Close()
}

// fetch GETs path from the manager's pprof server into file.
func (m *manager) fetch(ctx context.Context, path, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.Pprof+path, nil)
	if err != nil {
		return err
	}
	resp, err := mgrproc.HTTPClient.Do(req)
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
