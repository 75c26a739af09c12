package local

import (
	"errors"
	"time"

	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// Executor ownership (package lease): only the holder of the executor
// lease starts and records attempts. What the local driver adds is what it
// does when its tenure changes: on losing the lease it stops the processes
// of its running attempts (the next holder runs them again); while the
// lease cannot be renewed it pauses them with SIGSTOP and starts nothing,
// and continues them when a renewal proves that nobody took over, so no
// work is lost to a database outage.

// errPaused: the lease could not be renewed lately, so the driver neither
// starts nor records anything until it is.
var errPaused = errors.New("executor: the executor lease could not be renewed; attempts are paused")

// leaseEvents is the driver's side of the lease (lease.Events).
type leaseEvents struct{ d *Driver }

// Taken makes the driver the holder: it recovers everything unfinished
// (the resync scan, at once) and then takes work.
func (ev leaseEvents) Taken(token int64, prev store.Lease) {
	d := ev.d
	d.life.Lock()
	if d.status == lifeStandby {
		d.status = lifeRecovering
	}
	d.life.Unlock()
	if prev.Holder != "" {
		d.metrics.takeovers.Inc()
		d.log.Warn("took the executor lease over from a manager that stopped renewing it",
			"previous", prev.Holder, "token", token, "holder", d.lease.Holder())
	} else {
		d.log.Info("took the executor lease", "token", token, "holder", d.lease.Holder())
	}
	select {
	case d.rescan <- struct{}{}:
	default:
	}
}

// Lost puts the driver on standby after it lost the lease held with tok:
// nothing more is started or recorded, and the processes of its running
// attempts are stopped (unrecorded: the next holder, which may be this
// driver again, recovers them as orphans, or records the result they left).
func (ev leaseEvents) Lost(tok int64, why string) {
	d := ev.d
	d.life.Lock()
	if d.status == lifeRecovering || d.status == lifeReady {
		d.status = lifeStandby
	}
	d.life.Unlock()
	procs := d.startedAttempts()
	d.log.Error("lost the executor lease: the executor is on standby and stops its attempts", "why", why,
		"token", tok, "attempts", len(procs))
	d.slots.DropAllWaiting()
	d.mu.Lock()
	clear(d.waitingSince)
	clear(d.waitRows)
	clear(d.changedTo)
	d.mu.Unlock()
	d.resources.dropAllWaiting()
	for _, e := range procs {
		e.proc.Abort("this manager lost the executor lease")
	}
}

// Paused stops the processes of the attempts of the lease held with tok
// (SIGSTOP) while it cannot be renewed; nothing new starts meanwhile.
func (ev leaseEvents) Paused(tok int64, why string) {
	d := ev.d
	procs := d.startedAttempts()
	d.log.Error("the executor lease cannot be renewed: the executor pauses its attempts until it can", "why", why,
		"token", tok, "attempts", len(procs))
	for _, e := range procs {
		e.proc.Pause()
	}
}

// Resumed continues the paused attempts once a renewal proved the lease
// still ours, and looks at everything again (an attempt may have ended just
// before the pause; actions may have arrived meanwhile).
func (ev leaseEvents) Resumed(tok int64) {
	d := ev.d
	procs := d.startedAttempts()
	d.log.Warn("the executor lease is renewed again: the executor resumes its attempts", "token", tok, "attempts", len(procs))
	for _, e := range procs {
		e.proc.Resume()
		d.q.add(e.key)
	}
	select {
	case d.rescan <- struct{}{}:
	default:
	}
}

// startedAttempts are the attempts of ours whose process runs.
func (d *Driver) startedAttempts() []*ownAttempt {
	d.mu.Lock()
	defer d.mu.Unlock()
	var procs []*ownAttempt
	for _, e := range d.running {
		if e.proc != nil {
			procs = append(procs, e)
		}
	}
	return procs
}

// LeaseStatus says whether this manager's executor holds the lease or waits
// on standby (for /readyz details).
func (d *Driver) LeaseStatus() string { return d.lease.Describe() }

// LeaseHeld reports whether this manager holds the executor lease and is
// not paused: the one manager that also fires triggers.
func (d *Driver) LeaseHeld() bool { return d.lease.Fence() != 0 && !d.lease.Paused() }

// followChanges queues the actions other managers create (and changes to
// attempts this driver runs, such as an abort requested through another
// manager) as the change log reports them, so the lease holder runs the
// runs every manager accepts without waiting for the resync scan. On
// standby the queued keys are dropped by reconcile.
func (d *Driver) followChanges() {
	defer d.wg.Done()
	for {
		sub := d.state.Hub().Subscribe(runstate.Matching(func(c store.Change) bool {
			// An action created terminal (a trace, a cache hit) has nothing
			// to run: the row the change came with says so without a read.
			created := c.Op == store.ChangeAdded && (c.Action == nil || !c.Action.Phase.Terminal())
			return c.Kind == store.KindAction && (created || c.Op == store.ChangeModified)
		}))
		stopped := d.followSub(sub)
		sub.Close()
		if stopped {
			return
		}
		// The hub closed the subscription (it fell behind, or the hub
		// stopped): the scan finds whatever was missed.
		select {
		case d.rescan <- struct{}{}:
		default:
		}
		select {
		case <-d.stopCh:
			return
		case <-time.After(time.Second):
		}
	}
}

// followSub queues what sub reports until the driver stops (true) or the
// subscription closes (false).
func (d *Driver) followSub(sub *runstate.Subscription) bool {
	for {
		select {
		case <-d.stopCh:
			return true
		case c, ok := <-sub.C:
			if !ok {
				return false
			}
			waits, woken := d.slots.InLine(c.Key)
			d.mu.Lock()
			_, mine := d.running[c.Key]
			held := d.waitRows[c.Key]
			seen := held != nil && c.ObjectResourceVersion <= held.ResourceVersion
			switch {
			case held != nil && !seen:
				delete(d.waitRows, c.Key) // it changed since: the next look reads it
			case held == nil && (waits || woken):
				// A look may be using the row it held (woken meanwhile,
				// perhaps): it must not hold it again (holdWaitRow).
				d.changedTo[c.Key] = max(d.changedTo[c.Key], c.ObjectResourceVersion)
			}
			d.mu.Unlock()
			if c.Op == store.ChangeModified && !mine && (seen || !waits) {
				continue // not ours, or no newer than the row held for its wait: nothing new
			}
			d.q.add(c.Key)
		}
	}
}
