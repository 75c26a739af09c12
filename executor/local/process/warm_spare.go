package process

// The manager's side of a warm server's spare children (see
// warm_server.py): each has its own channel, over which the manager hands
// it an attempt's argv, environment, directory and stdout/stderr. The
// server, from whose heap every later spare is forked, only ever learns
// the spare's pid; it never receives an attempt's environment.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"fmgr.dev/executor/local/runas"
)

// warmSpare is a forked child of the server waiting for an attempt, and
// the manager's end of its channel.
type warmSpare struct {
	pid  int
	conn *net.UnixConn
}

func newWarmSpare(pid, fd int) (*warmSpare, error) {
	f := os.NewFile(uintptr(fd), "warm-spare")
	c, err := net.FileConn(f) // a duplicate: f is closed either way
	f.Close()
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("a %T, not a unix socket", c)
	}
	return &warmSpare{pid: pid, conn: uc}, nil
}

// close ends the manager's end: a spare that has not got its go exits.
func (sp *warmSpare) close() { _ = sp.conn.Close() }

// start gives the spare the attempt and waits (until deadline) until it
// took it on; it runs none of the task's code before goAhead.
func (sp *warmSpare) start(argv, env []string, dir string, u runas.User, confine *confinePlan, stdout, stderr *os.File, deadline time.Time) error {
	_ = sp.conn.SetDeadline(deadline)
	start := warmMsg{Op: "start", Argv: argv, Env: env, Dir: dir, UID: u.UID, GID: u.GID, Confine: confine}
	if err := sendWarmMsg(sp.conn, start, stdout, stderr); err != nil {
		return fmt.Errorf("sending the attempt to the warm child: %w", err)
	}
	buf := make([]byte, 64<<10)
	n, _, _, _, err := sp.conn.ReadMsgUnix(buf, nil)
	switch {
	case err != nil:
		return fmt.Errorf("waiting for the warm child: %w", err)
	case n == 0:
		return errors.New("the warm child ended before it took the attempt on")
	}
	var m warmMsg
	if err := json.Unmarshal(buf[:n], &m); err != nil {
		return fmt.Errorf("the warm child's answer: %w", err)
	}
	switch m.Op {
	case "prepared":
		return nil
	case "error":
		return fmt.Errorf("the warm child could not take it on: %s", m.Why)
	}
	return fmt.Errorf("the warm child answered %q", m.Op)
}

// goAhead lets the spare run the task and closes the channel.
func (sp *warmSpare) goAhead() error {
	_ = sp.conn.SetDeadline(time.Time{})
	err := sendWarmMsg(sp.conn, warmMsg{Op: "go"})
	sp.close()
	return err
}

// handover gives the attempt to a spare and returns it once the spare
// took it on, with the channel its exit report arrives on.
func (s *warmServer) handover(argv, env []string, dir string, u runas.User, confine *confinePlan, stdout, stderr *os.File) (*warmSpare, <-chan warmMsg, error) {
	deadline := time.Now().Add(warmStartTimeout)
	sp, exit, err := s.take(deadline)
	if err != nil {
		return nil, nil, err
	}
	if err := sp.start(argv, env, dir, u, confine, stdout, stderr, deadline); err != nil {
		// It never got the go, so nothing of the task ran.
		sp.close()
		_ = syscall.Kill(-sp.pid, syscall.SIGKILL)
		_ = syscall.Kill(sp.pid, syscall.SIGKILL)
		go s.collect(sp.pid, exit, nil, nil)
		return nil, nil, err
	}
	s.mu.Lock()
	s.served = true
	s.mu.Unlock()
	return sp, exit, nil
}

// take waits until deadline for an idle spare and tells the server it is
// taken (it forks the next). The spare's exit report arrives on the
// channel returned.
func (s *warmServer) take(deadline time.Time) (*warmSpare, chan warmMsg, error) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	waiting := false
	defer func() {
		if waiting {
			s.want(-1)
		}
	}()
	for {
		s.mu.Lock()
		if len(s.idle) > 0 {
			sp := s.idle[0]
			s.idle = s.idle[1:]
			exit := make(chan warmMsg, 1)
			s.exits[sp.pid] = exit
			s.mu.Unlock()
			// Unsent only if the server is gone: then the spare dies with
			// it, and the handover finds out.
			_ = s.send(warmMsg{Op: "take", PID: sp.pid})
			return sp, exit, nil
		}
		news := s.spareNews
		s.mu.Unlock()
		if !waiting {
			// The server forks a spare for each handover waiting.
			waiting = true
			s.want(+1)
		}
		select {
		case <-news:
		case <-s.dead:
			return nil, nil, errors.New("the warm server ended")
		case <-timer.C:
			return nil, nil, fmt.Errorf("no warm child was ready in %s", warmStartTimeout)
		}
	}
}

// want tells the server how many handovers wait for a spare.
func (s *warmServer) want(delta int) {
	s.wantMu.Lock()
	defer s.wantMu.Unlock()
	s.waiting += delta
	_ = s.send(warmMsg{Op: "want", N: s.waiting})
}
