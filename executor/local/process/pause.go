package process

import (
	"syscall"
)

// Pause stops (SIGSTOP) every process of the attempt: its process tree and
// whatever is in its cgroup. The executor pauses its attempts when it can no
// longer prove that it holds the executor lease (the database is
// unreachable): a paused attempt does nothing, so it cannot overlap with a
// copy another manager might start, and, unlike a killed one, it loses no
// work when the database comes back and the lease turns out to be still
// ours. An Abort of a paused attempt still ends it. Pause does nothing once
// the process ended.
func (p *Process) Pause() { p.setPaused(true) }

// Resume continues (SIGCONT) what Pause stopped.
func (p *Process) Resume() { p.setPaused(false) }

func (p *Process) setPaused(pause bool) {
	select {
	case p.pauseCh <- pause:
	case <-p.watched:
	}
}

// pauseOrResume runs in supervise, which owns the cgroup.
func (p *Process) pauseOrResume(pause bool) {
	if pause {
		p.signalPaused(syscall.SIGSTOP)
		p.log.system("paused (SIGSTOP): the manager cannot reach its database to confirm it still owns this attempt")
		return
	}
	p.signalPaused(syscall.SIGCONT)
	p.log.system("resumed (SIGCONT): the manager reached its database again")
}

// signalPaused signals the process group, the process tree and everything
// in the attempt's cgroup.
func (p *Process) signalPaused(sig syscall.Signal) {
	p.signalAll(descendants(p.id.PID), sig)
	if p.cg != nil {
		for _, pid := range p.cg.procs() {
			_ = syscall.Kill(pid, sig)
		}
	}
}
