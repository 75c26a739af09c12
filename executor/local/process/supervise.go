// An attempt's supervision: its timeout, an abort, and the signals that end
// its whole process tree.

package process

import (
	"syscall"
	"time"
)

// Abort stops the whole process tree: SIGTERM, then SIGKILL after the grace
// period. Later calls, and calls after the process ended, do nothing.
func (p *Process) Abort(reason string) {
	select {
	case p.abortCh <- reason:
	default:
	}
}

func (p *Process) supervise(timeout time.Duration) {
	var (
		timer <-chan time.Time
		grace <-chan time.Time
		tree  []Identity
	)
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	stopping, paused := false, false
	stop := func() {
		stopping = true
		tree = descendants(p.id.PID)
		p.signalAll(tree, syscall.SIGTERM)
		if paused {
			// A stopped process handles SIGTERM only once it continues.
			p.signalPaused(syscall.SIGCONT)
		}
		grace = time.After(p.cfg.KillGrace)
	}
wait:
	for {
		select {
		case <-p.exited:
			break wait
		case <-timer:
			timer = nil
			if !stopping {
				p.status.TimedOut = true
				p.log.system("timeout of %s reached: stopping the process tree", timeout)
				stop()
			}
		case reason := <-p.abortCh:
			if !stopping {
				p.status.Aborted = true
				p.status.AbortReason = reason
				p.log.system("abort requested (%s): stopping the process tree", reason)
				stop()
			}
		case <-grace:
			grace = nil
			p.log.system("still running %s after SIGTERM: sending SIGKILL", p.cfg.KillGrace)
			p.signalAll(tree, syscall.SIGKILL)
		case pause := <-p.pauseCh:
			if pause != paused && !stopping {
				paused = pause
				p.pauseOrResume(pause)
			}
		}
	}
	close(p.watched)
	p.status.Ended = time.Now()
	p.killLeftovers(tree)
	untrack(p.id.PID, p.id.PGID)
	close(p.reap)
	exit := <-p.waitCh

	drained := make(chan struct{})
	go func() { p.pumps.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(p.cfg.DrainTimeout):
		p.log.system("output still open %s after exit (a process outside the group holds it): closing", p.cfg.DrainTimeout)
		for _, f := range p.pipes {
			f.Close()
		}
		<-drained
	}
	for _, f := range p.pipes {
		f.Close()
	}

	p.status.Code = -1
	switch {
	case exit.err != nil:
		p.status.Err = exit.err
	case exit.signal != 0:
		p.status.Signal = exit.signal.String()
	default:
		p.status.Code = exit.code
	}
	p.status.StdoutTail = p.outTail.get()
	p.status.StderrTail = p.errTail.get()
	p.noteOOM()
	p.releaseCgroup()
	switch {
	case p.status.OOMKilled:
		p.log.system("the attempt went over its memory limit of %s and was killed (OOM)", FormatBytes(p.status.MemoryLimit))
	case p.status.Err != nil:
		p.log.system("lost the process: %v", p.status.Err)
	case p.status.Signal != "":
		p.log.system("process killed by signal %s after %s", p.status.Signal, p.status.Ended.Sub(p.status.Started).Round(time.Millisecond))
	default:
		p.log.system("process exited with code %d after %s", p.status.Code, p.status.Ended.Sub(p.status.Started).Round(time.Millisecond))
	}
	p.log.close()
	close(p.done)
}

// signalAll signals the process group and every recorded descendant that is
// still the same process.
func (p *Process) signalAll(tree []Identity, sig syscall.Signal) {
	_ = signalGroup(p.id, sig)
	for _, d := range tree {
		signalIfSame(d, sig)
	}
}
