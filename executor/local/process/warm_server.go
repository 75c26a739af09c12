package process

// One warm server process: its protocol (see warm_server.py), its start,
// its reader and the handover of an attempt to a forked child.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// warmMsg is one message of the protocol (see warm_server.py).
type warmMsg struct {
	Op     string   `json:"op"`
	ID     int      `json:"id,omitempty"`
	PID    int      `json:"pid,omitempty"`
	Argv   []string `json:"argv,omitempty"`
	Env    []string `json:"env,omitempty"`
	Dir    string   `json:"dir,omitempty"`
	Names  []string `json:"names,omitempty"`
	Mode   string   `json:"mode,omitempty"` // ready: what it pre-imported (see warmModeSDK)
	Why    string   `json:"why,omitempty"`
	Code   int      `json:"code,omitempty"`
	Signal int      `json:"signal,omitempty"`
}

// warmServer is one running server process.
type warmServer struct {
	pool *warmPool
	env  []string // its environment: the key variables of the attempt that started it
	// trigger is that attempt's whole environment, until the server is
	// ready (see learn).
	trigger []string
	conn    *net.UnixConn
	cmd     *exec.Cmd

	ready     chan struct{} // closed once it announced itself ready
	dead      chan struct{} // closed once its connection ended
	deadOnce  sync.Once
	mu        sync.Mutex
	names     []string // variables its imports read
	nextID    int
	replies   map[int]chan warmReply // handovers waiting for started/failed
	exits     map[int]chan warmMsg   // pid → its exit report
	served    bool
	relearn   bool // it ended to be replaced by one started with more variables
	shutCalls atomic.Bool
}

func (s *warmServer) isReady() bool {
	select {
	case <-s.ready:
		return !s.isDead()
	default:
		return false
	}
}

func (s *warmServer) isDead() bool {
	select {
	case <-s.dead:
		return true
	default:
		return false
	}
}

func (s *warmServer) markDead() { s.deadOnce.Do(func() { close(s.dead) }) }

// mismatch names a variable in which env differs from the server's
// environment and that can change what the imports did, "" if none.
func (s *warmServer) mismatch(env []string) string {
	s.mu.Lock()
	names := s.names
	s.mu.Unlock()
	mine, theirs := envMap(s.env), envMap(keyEnv(env, names))
	for k, v := range theirs {
		if mv, ok := mine[k]; !ok || mv != v {
			return k
		}
	}
	for k := range mine {
		if _, ok := theirs[k]; !ok && (matchName(k, warmFixedNames) || slices.Contains(names, k)) {
			return k
		}
	}
	return ""
}

func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// launch starts the server process and its reader.
func (s *warmServer) launch() error {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socketpair: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "warm-server"), os.NewFile(uintptr(fds[1]), "warm-server-child")
	defer theirs.Close()
	fc, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	s.conn = fc.(*net.UnixConn)
	logR, logW, err := os.Pipe()
	if err != nil {
		s.conn.Close()
		return err
	}
	defer logW.Close()
	s.cmd = &exec.Cmd{
		Path:        s.pool.python,
		Args:        []string{s.pool.python, "-c", warmServerSource, "3", s.pool.a0, strconv.Itoa(warmSpares)},
		Env:         s.env,
		Dir:         "/",
		Stdout:      logW,
		Stderr:      logW,
		ExtraFiles:  []*os.File{theirs},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	started := make(chan error, 1)
	go func() {
		// Locked for the server's life and never unlocked: Pdeathsig is
		// tied to the forking thread (see the package comment).
		runtime.LockOSThread()
		if err := s.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = s.cmd.Wait()
		s.markDead()
	}()
	if err := <-started; err != nil {
		s.conn.Close()
		logR.Close()
		return err
	}
	go func() {
		sc := bufio.NewScanner(logR)
		for sc.Scan() {
			s.pool.log.Info("warm server", "pid", s.cmd.Process.Pid, "line", sc.Text())
		}
		logR.Close()
	}()
	go s.read()
	return nil
}

// read handles the server's messages until its connection ends.
func (s *warmServer) read() {
	why := "its connection closed"
	buf := make([]byte, 1<<20)
	for {
		n, _, _, _, err := s.conn.ReadMsgUnix(buf, nil)
		if err != nil || n == 0 {
			if err != nil {
				why = err.Error()
			}
			break
		}
		var m warmMsg
		if err := json.Unmarshal(buf[:n], &m); err != nil {
			why = "bad message: " + err.Error()
			break
		}
		if stop := s.handle(m); stop != "" {
			why = stop
			break
		}
	}
	s.conn.Close()
	s.markDead()
	s.mu.Lock()
	for id, ch := range s.replies {
		ch <- warmReply{m: warmMsg{Op: "failed", Why: "the warm server ended: " + why}}
		delete(s.replies, id)
	}
	served, relearn := s.served, s.relearn
	s.mu.Unlock()
	if !s.shutCalls.Load() {
		s.pool.serverEnded(s, why, served, relearn)
	}
}

func (s *warmServer) handle(m warmMsg) (stop string) {
	switch m.Op {
	case "ready":
		if s.pool.learn(s, m.Names) {
			// It started without a variable its imports read: it would
			// turn away the very attempts that started it. The next one
			// starts with them.
			s.relearn = true
			return "it read variables it was not started with; starting another with them"
		}
		s.mu.Lock()
		s.names = m.Names
		s.trigger = nil
		s.mu.Unlock()
		s.pool.mode.Store(&m.Mode)
		close(s.ready)
		s.pool.log.Info("warm server ready", "pid", m.PID, "preimports", m.Mode, "comparedVariables", m.Names)
		if m.Mode != warmModeSDK {
			s.pool.log.Warn("the warm server could not import the SDK: it imported the SDK's dependencies, and each attempt imports the SDK itself",
				"pid", m.PID, "preimports", m.Mode, "reason", m.Why)
		}
	case "names":
		s.pool.learn(s, m.Names)
		s.mu.Lock()
		s.names = m.Names
		s.mu.Unlock()
	case "refuse":
		return "it refused to serve: " + m.Why
	case "started", "failed":
		s.mu.Lock()
		ch := s.replies[m.ID]
		delete(s.replies, m.ID)
		var exit chan warmMsg
		if m.Op == "started" {
			exit = make(chan warmMsg, 1)
			s.exits[m.PID] = exit
			s.served = true
		}
		s.mu.Unlock()
		switch {
		case ch != nil:
			ch <- warmReply{m: m, exit: exit}
		case exit != nil:
			// Its attempt gave up waiting and started plainly: the child
			// never got the go, so nothing of the task ran.
			pid := m.PID
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			go s.collect(pid, exit, nil, nil)
		}
	case "exited":
		s.mu.Lock()
		ch := s.exits[m.PID]
		delete(s.exits, m.PID)
		s.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
	return ""
}

func (s *warmServer) send(m warmMsg, files ...*os.File) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = syscall.UnixRights(fds...)
	}
	_, _, err = s.conn.WriteMsgUnix(b, oob, nil)
	runtime.KeepAlive(files)
	return err
}

// handover asks the server for a child running argv and waits for its pid.
func (s *warmServer) handover(argv, env []string, dir string, stdout, stderr *os.File) (int, <-chan warmMsg, error) {
	ch := make(chan warmReply, 1)
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	s.replies[id] = ch
	s.mu.Unlock()
	if err := s.send(warmMsg{Op: "start", ID: id, Argv: argv, Env: env, Dir: dir}, stdout, stderr); err != nil {
		s.mu.Lock()
		delete(s.replies, id)
		s.mu.Unlock()
		return 0, nil, fmt.Errorf("sending the attempt to the warm server: %w", err)
	}
	select {
	case m := <-ch:
		return s.answer(m)
	case <-time.After(warmStartTimeout):
		s.mu.Lock()
		_, waiting := s.replies[id]
		delete(s.replies, id)
		s.mu.Unlock()
		if !waiting {
			// The answer came meanwhile: take it.
			return s.answer(<-ch)
		}
		return 0, nil, fmt.Errorf("the warm server did not answer in %s", warmStartTimeout)
	}
}

// warmReply answers a handover: started (with the channel its exit
// report arrives on) or failed.
type warmReply struct {
	m    warmMsg
	exit chan warmMsg
}

func (s *warmServer) answer(r warmReply) (int, <-chan warmMsg, error) {
	if r.m.Op != "started" {
		return 0, nil, fmt.Errorf("the warm server could not start it: %s", r.m.Why)
	}
	return r.m.PID, r.exit, nil
}

// shutdown ends the server (its children die with it: Pdeathsig).
func (s *warmServer) shutdown() {
	s.shutCalls.Store(true)
	s.conn.Close()
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
	}
	s.markDead()
}
