package process

// One warm server process: its protocol (see warm_server.py), its start,
// its reader and the handover of an attempt to one of its spare children,
// over that spare's own channel (the server never sees the attempt).

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
)

// warmMsg is one message of the protocol (see warm_server.py).
type warmMsg struct {
	Op   string   `json:"op"`
	PID  int      `json:"pid,omitempty"`
	N    int      `json:"n,omitempty"` // want: attempts waiting for a spare (absent: 0)
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	// start: the user to run as (absent: the manager's; see runas.go).
	UID uint32 `json:"uid,omitempty"`
	GID uint32 `json:"gid,omitempty"`
	// start: the mount namespace to make (see confine_linux.go).
	Confine *confinePlan `json:"confine,omitempty"`
	Names   []string     `json:"names,omitempty"`
	Mode    string       `json:"mode,omitempty"` // ready: what it pre-imported (see warmModeSDK)
	Why     string       `json:"why,omitempty"`
	Code    int          `json:"code,omitempty"`
	Signal  int          `json:"signal,omitempty"`
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
	idle      []*warmSpare
	spareNews chan struct{}        // closed (and replaced) when a spare is announced
	exits     map[int]chan warmMsg // pid of a taken spare → its exit report
	served    bool
	relearn   bool // it ended to be replaced by one started with more variables
	shutCalls atomic.Bool

	wantMu  sync.Mutex // orders want messages (never held with mu)
	waiting int        // handovers waiting for a spare
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
	oob := make([]byte, syscall.CmsgSpace(4*4))
	for {
		n, oobn, flags, _, err := s.conn.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			if err != nil {
				why = err.Error()
			}
			break
		}
		fds, err := unixRights(oob[:oobn], flags)
		if err != nil {
			closeFDs(fds)
			why = err.Error()
			break
		}
		var m warmMsg
		if err := json.Unmarshal(buf[:n], &m); err != nil {
			closeFDs(fds)
			why = "bad message: " + err.Error()
			break
		}
		if stop := s.handle(m, fds); stop != "" {
			why = stop
			break
		}
	}
	s.conn.Close()
	s.markDead()
	s.mu.Lock()
	idle := s.idle
	s.idle = nil
	served, relearn := s.served, s.relearn
	s.mu.Unlock()
	for _, sp := range idle {
		sp.close() // it dies with the server (Pdeathsig), or at its channel's end
	}
	if !s.shutCalls.Load() {
		s.pool.serverEnded(s, why, served, relearn)
	}
}

// handle takes one message of the server and the descriptors that came
// with it (only a spare's channel does).
func (s *warmServer) handle(m warmMsg, fds []int) (stop string) {
	if m.Op == "spare" {
		return s.addSpare(m.PID, fds)
	}
	closeFDs(fds)
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
	case "exited":
		s.mu.Lock()
		ch := s.exits[m.PID]
		delete(s.exits, m.PID)
		var idle *warmSpare
		if ch == nil {
			if i := slices.IndexFunc(s.idle, func(sp *warmSpare) bool { return sp.pid == m.PID }); i >= 0 {
				idle = s.idle[i]
				s.idle = slices.Delete(s.idle, i, i+1)
			}
		}
		s.mu.Unlock()
		if ch != nil {
			ch <- m // its attempt's collect has it reaped
			break
		}
		// A spare died before it was given an attempt: no one else
		// reaps it.
		if idle != nil {
			idle.close()
		}
		_ = s.send(warmMsg{Op: "reap", PID: m.PID})
	}
	return ""
}

// addSpare makes a spare the server announced available to handovers.
func (s *warmServer) addSpare(pid int, fds []int) (stop string) {
	if len(fds) != 1 || pid <= 0 {
		closeFDs(fds)
		return fmt.Sprintf("a spare message with %d descriptors and pid %d", len(fds), pid)
	}
	sp, err := newWarmSpare(pid, fds[0])
	if err != nil {
		return "a spare's channel: " + err.Error()
	}
	s.mu.Lock()
	s.idle = append(s.idle, sp)
	close(s.spareNews)
	s.spareNews = make(chan struct{})
	s.mu.Unlock()
	return ""
}

func (s *warmServer) send(m warmMsg) error { return sendWarmMsg(s.conn, m) }

// sendWarmMsg sends one message of the protocol, files by SCM_RIGHTS.
func sendWarmMsg(conn *net.UnixConn, m warmMsg, files ...*os.File) error {
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
	_, _, err = conn.WriteMsgUnix(b, oob, nil)
	runtime.KeepAlive(files)
	return err
}

// unixRights returns the descriptors a message carried (received close
// on exec: see net.UnixConn.ReadMsgUnix).
func unixRights(oob []byte, flags int) ([]int, error) {
	var fds []int
	cmsgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("control message: %w", err)
	}
	for _, c := range cmsgs {
		got, err := syscall.ParseUnixRights(&c)
		if err == nil {
			fds = append(fds, got...)
		}
	}
	if flags&syscall.MSG_CTRUNC != 0 {
		return fds, fmt.Errorf("a message carried more descriptors than expected")
	}
	return fds, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		_ = syscall.Close(fd)
	}
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
