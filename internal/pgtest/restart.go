package pgtest

import (
	"fmt"
	"os"
	"path/filepath"
)

// An outage for tests: Halt stops a Server as a crash of the database host
// would look to its clients (every session is cut, nothing answers), keeping
// its data; Resume starts it again on the same data, address and options.
//
// Both go through pg_ctl on the server's data directory, which finds the
// running postmaster by its pid file and restarts it with the options it
// recorded in postmaster.opts, so they work however the server was started.
// A resumed server is pg_ctl's, not the process Stop waits for: call Halt
// before Stop when the server may be running after a Resume.

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }

// Halt stops the server (fast shutdown: every session is cut at once) and
// waits until it is gone. Halting a stopped server is a no-op. Not an
// immediate shutdown: the test server runs with synchronous_commit=off, so
// a crash would lose the last commits, which no real outage of a durable
// server does.
func (s *Server) Halt() error {
	if _, err := os.Stat(filepath.Join(s.dataDir(), "postmaster.pid")); os.IsNotExist(err) {
		return nil
	}
	return s.pgCtl("stop", "-m", "fast")
}

// Resume starts a halted server again with the options it last ran with and
// waits until it accepts connections.
func (s *Server) Resume() error {
	// restart on a stopped server starts it from postmaster.opts (start alone
	// would use the defaults: another port, no socket directory).
	return s.pgCtl("restart", "-l", filepath.Join(s.dir, "postgres-resumed.log"))
}

func (s *Server) pgCtl(args ...string) error {
	bin, err := binDir()
	if err != nil {
		return err
	}
	args = append([]string{"-D", s.dataDir(), "-w", "-t", "120"}, args...)
	out, err := command(os.Geteuid() == 0, filepath.Join(bin, "pg_ctl"), args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl %v: %v\n%s", args, err, out)
	}
	return nil
}
