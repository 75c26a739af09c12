package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// installHint is what a developer sees when the server cannot be found.
const installHint = "PostgreSQL 15 server binaries are required for these tests: " +
	"install them with `apt-get install postgresql-15` (or point FM_TEST_POSTGRES_DSN at a running server)"

// Server is a PostgreSQL started for tests in a temporary directory. It
// listens only on a unix socket inside that directory, never on TCP: a port
// probed free and then bound could be taken meanwhile by another test
// binary's server, and this one's tests would then use (and drop databases
// on) a server they do not own. A socket in a private directory cannot be
// confused with anyone else's.
type Server struct {
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited

	statStatements bool // started with shared_preload_libraries=pg_stat_statements
}

// Options are what StartWith can change about a server.
type Options struct {
	// StatStatements preloads pg_stat_statements (the bench counts the
	// manager's statements with it) when the server's library directory has
	// it; StatStatements on the Server says whether it did.
	StatStatements bool
}

// socketPort only names the socket file (.s.PGSQL.5432) inside the
// server's own directory; no TCP port is opened.
const socketPort = 5432

// Start initializes a data directory and starts a server on it.
func Start() (*Server, error) { return StartWith(Options{}) }

// StartWith is Start with options.
func StartWith(o Options) (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	asPostgres := os.Geteuid() == 0
	dir, err := os.MkdirTemp(tempBase(asPostgres), "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, statStatements: o.StatStatements && hasStatStatements(bin)}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	if asPostgres {
		// initdb and postgres refuse to run as root.
		if err := chownToPostgres(dir); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := command(asPostgres, filepath.Join(bin, "initdb"),
		"-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if err := s.start(bin, data, asPostgres); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

func (s *Server) start(bin, data string, asPostgres bool) error {
	logPath := filepath.Join(s.dir, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := command(asPostgres, filepath.Join(bin, "postgres"),
		"-D", data, "-p", strconv.Itoa(socketPort),
		"-c", "listen_addresses=",
		"-c", "unix_socket_directories="+s.dir,
		// Throwaway data: durability only costs time.
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200")
	if s.statStatements {
		cmd.Args = append(cmd.Args, "-c", "shared_preload_libraries=pg_stat_statements")
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// If the test binary dies without stopping us, the server goes too
	// (runuser passes the signal on to postgres).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	// Pdeathsig fires when the *thread* that forked exits, so fork from a
	// goroutine that keeps its thread until the server is gone.
	started := make(chan error, 1)
	s.done = make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer close(s.done)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	s.cmd = cmd

	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, s.DSN("postgres"))
		cancel()
		if err == nil {
			_ = conn.Close(context.Background())
			return nil
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(logPath)
			s.cmd = nil
			return fmt.Errorf("postgres exited during startup:\n%s", tail(log, 2000))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("postgres did not accept connections within a minute:\n%s", tail(log, 2000))
		}
	}
}

// DSN is a superuser DSN for database on this server, over its socket.
func (s *Server) DSN(database string) string {
	q := url.Values{"host": {s.dir}, "port": {strconv.Itoa(socketPort)}, "sslmode": {"disable"}}
	return (&url.URL{Scheme: "postgres", User: url.User("postgres"), Host: "", Path: "/" + database, RawQuery: q.Encode()}).String()
}

// StatStatements reports whether the server preloads pg_stat_statements
// (asked for with Options.StatStatements, and installed): a database then
// gets the view with CREATE EXTENSION pg_stat_statements.
func (s *Server) StatStatements() bool { return s.statStatements }

// hasStatStatements reports whether the server binaries in bin come with
// the pg_stat_statements library (Debian: /usr/lib/postgresql/15/lib,
// beside bin; else pg_config's pkglibdir).
func hasStatStatements(bin string) bool {
	dirs := []string{filepath.Join(filepath.Dir(bin), "lib")}
	if out, err := exec.Command(filepath.Join(bin, "pg_config"), "--pkglibdir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_stat_statements.so")); err == nil {
			return true
		}
	}
	return false
}

// PostmasterPID is the pid of the server's postmaster, from its
// postmaster.pid file (its backends are its children), for a caller that
// measures their CPU; 0 when it cannot be read.
func (s *Server) PostmasterPID() int {
	b, err := os.ReadFile(filepath.Join(s.dataDir(), "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(first))
	return pid
}

// SocketDir is the directory holding the server's unix socket.
func (s *Server) SocketDir() string { return s.dir }

// Stop shuts the server down (fast shutdown: sessions are disconnected) and
// removes its directory.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		// SIGINT to the group reaches postgres directly, with or without runuser.
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-s.done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
		}
		s.cmd = nil
	}
	_ = os.RemoveAll(s.dir)
}

// BinDir is the directory of the PostgreSQL binaries the tests use (for
// tools such as pg_dump).
func BinDir() (string, error) { return binDir() }

// binDir finds the server binaries: $FM_TEST_POSTGRES_BINDIR if set, else
// PostgreSQL 15's usual place on Debian, else whatever pg_config reports.
func binDir() (string, error) {
	candidates := []string{"/usr/lib/postgresql/15/bin"}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	if dir := os.Getenv(EnvBinDir); dir != "" {
		candidates = []string{dir}
	}
	for _, dir := range candidates {
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	return "", errors.New(installHint)
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// command runs name as user postgres when we are root.
func command(asPostgres bool, name string, args ...string) *exec.Cmd {
	if asPostgres {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

func chownToPostgres(dir string) error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("running as root, but there is no user postgres to run the server as: %w (%s)", err, installHint)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(dir, uid, gid)
}

// tempBase picks where the server's directory goes: the usual temp dir,
// unless user postgres could not reach it or the unix socket path inside
// it would exceed the kernel's ~100 byte limit; then /tmp.
func tempBase(asPostgres bool) string {
	base := os.TempDir()
	if len(base) > 60 {
		return "/tmp"
	}
	if asPostgres {
		for d := base; ; d = filepath.Dir(d) {
			fi, err := os.Stat(d)
			if err != nil || fi.Mode().Perm()&0o001 == 0 {
				return "/tmp"
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	return base
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
