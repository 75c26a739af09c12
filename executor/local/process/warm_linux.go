package process

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// startWarm has one of the warm server's spare children become the
// attempt's process (see warm.go).
// It reports false, with nothing of the attempt running and a line in its
// log, when the attempt must start plainly instead.
func (p *Process) startWarm(w *warmPool, path string, spec Spec, confine confinePlan, env []string, outW, errW *os.File) (Identity, bool) {
	srv, why := w.serverFor(path, env)
	if srv == nil {
		p.log.system("not warm-started: %s", why)
		w.note("attempt started plainly", "reason", why)
		return Identity{}, false
	}
	var plan *confinePlan
	if spec.User.Other() && !confine.empty() {
		plan = &confine
	}
	sp, exitCh, err := srv.handover(spec.Args, env, spec.Dir, spec.User, plan, outW, errW)
	if err != nil {
		p.log.system("warm start failed (%v): starting the process plainly", err)
		return Identity{}, false
	}
	pid := sp.pid
	// The child waits for the go: nothing of the task has run yet.
	id, err := ReadIdentity(pid)
	if err != nil {
		id = Identity{PID: pid, PGID: pid, BootID: bootID}
	}
	if err := p.cg.addProc(pid); err != nil {
		p.log.system("warm start failed (moving the child into the attempt's cgroup: %v): starting the process plainly", err)
		sp.close()
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		srv.collect(pid, exitCh, nil, nil)
		return Identity{}, false
	}
	reaper.mu.RLock()
	trackLocked(pid, pid) // the child leads its own group
	reaper.mu.RUnlock()
	if err := sp.goAhead(); err != nil {
		// The child died (with the server, maybe): its exit is
		// collected below like any other.
		p.log.system("lost the warm child before the go: %v", err)
	}
	go func() { p.waitCh <- srv.collect(pid, exitCh, p.exited, p.reap) }()
	return id, true
}

// collect waits for the exit of the server's child pid, closes exited (if
// not nil), waits for reap (if not nil), has the zombie reaped and returns
// how the child ended. If the server dies first, its children die too
// (Pdeathsig) and are re-parented to the manager, a subreaper: collect then
// reaps pid itself.
func (s *warmServer) collect(pid int, exitCh <-chan warmMsg, exited chan struct{}, reap chan struct{}) leaderExit {
	var m warmMsg
	got := false
	select {
	case m = <-exitCh:
		got = true
	case <-s.dead:
		select {
		case m = <-exitCh:
			got = true
		default:
		}
	}
	if !got || s.isDead() {
		return adoptAndReap(pid, exited, reap, got, m)
	}
	if exited != nil {
		close(exited)
	}
	if reap != nil {
		<-reap
	}
	if err := s.send(warmMsg{Op: "reap", PID: pid}); err != nil {
		return adoptAndReap(pid, nil, nil, true, m)
	}
	return m.exit()
}

func (m warmMsg) exit() leaderExit {
	if m.Signal != 0 {
		return leaderExit{signal: syscall.Signal(m.Signal)}
	}
	return leaderExit{code: m.Code}
}

// adoptAndReap reaps pid after its warm server died: it waits for the
// kernel to re-parent it to the manager and reaps it then. Without the
// subreaper (or if init got it) the exit can only be inferred: the server's
// death killed it.
func adoptAndReap(pid int, exited, reap chan struct{}, reported bool, m warmMsg) leaderExit {
	ours := false
	deadline := time.Now().Add(leftoverKillTimeout)
	for time.Now().Before(deadline) {
		st, err := readStat(pid)
		if err != nil {
			break
		}
		if st.ppid == os.Getpid() {
			ours = true
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if ours {
		_ = waitExitedNoReap(pid)
	}
	if exited != nil {
		close(exited)
	}
	if reap != nil {
		<-reap
	}
	if ours {
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err == nil {
			if ws.Signaled() {
				return leaderExit{signal: ws.Signal()}
			}
			return leaderExit{code: ws.ExitStatus()}
		}
	}
	if reported {
		return m.exit()
	}
	return leaderExit{signal: syscall.SIGKILL}
}

// addProc moves pid (all its threads) into the cgroup; nil cgroup: no-op.
func (cg *cgroup) addProc(pid int) error {
	if cg == nil {
		return nil
	}
	b := []byte(strconv.Itoa(pid))
	for _, d := range cg.dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), b, 0); err != nil {
			return err
		}
	}
	return nil
}
