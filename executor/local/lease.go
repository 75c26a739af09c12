package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// Executor ownership. Several managers may share one database; only the one
// holding the executor lease (a row in the database) starts and records
// attempts. The others keep their executor on standby: they serve the API,
// and the runs they accept are executed by the holder, which picks up
// actions written by other managers from the change log.
//
//   - A standby takes the lease when it is free (released by a graceful
//     stop), when its row has not moved for leaseTTL on the standby's own
//     clock (no holder clocks are compared), or at once when the holder
//     recorded this host and this work directory: this driver holds that
//     directory's flock, so that holder has died (a restart).
//   - The holder renews the lease every leaseTTL/5. When another manager
//     took it over, it gives it up: it stops starting and recording
//     attempts, and stops the processes of its running attempts, which the
//     next holder runs again. When it merely cannot renew it for leaseTTL/2
//     (the database is unreachable: down for everyone, or only for this
//     manager, which it cannot tell apart) it pauses instead: its attempts'
//     processes are stopped with SIGSTOP and nothing new starts, while it
//     keeps trying to renew. A standby waits a whole leaseTTL, so nothing
//     of the holder runs by then. A renewal that succeeds again proves that
//     nobody took over: the attempts continue where they were, and no work
//     is lost to a database outage. A renewal refused for the token ends
//     them.
//   - Every executor write carries the lease token (store.Update.Fence) and
//     commits only while the lease row still has it: a manager that paused
//     past its lease and wakes up cannot record anything.
//   - Every takeover increments the token, and each attempt records the
//     token of the manager that started it (store.Attempt.OwnerToken). As
//     there is one lease, every active attempt that the new holder did not
//     start belongs to an expired holder: it is recovered as an orphan.
type lease struct {
	me  store.Claimant
	ttl time.Duration

	mu         sync.Mutex
	token      int64       // the held token, 0 on standby
	renewedAt  time.Time   // when the last successful renewal (or the acquisition) started
	seen       store.Lease // the row as last read on standby
	seenAt     time.Time   // when seen last changed
	everHolder bool        // the lease was held at least once
	paused     bool        // held, but not renewed for ttl/2: attempts are paused
}

// isPaused reports whether the holder paused its attempts.
func (l *lease) isPaused() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.paused
}

// errPaused: the lease could not be renewed lately, so the driver neither
// starts nor records anything until it is.
var errPaused = errors.New("executor: the executor lease could not be renewed; attempts are paused")

func newLease(workDir string, ttl time.Duration) *lease {
	host, _ := os.Hostname()
	var id [6]byte
	_, _ = rand.Read(id[:])
	return &lease{
		me:  store.Claimant{Holder: fmt.Sprintf("%s/pid %d/%s", host, os.Getpid(), hex.EncodeToString(id[:])), Host: host, WorkDir: workDir},
		ttl: ttl,
	}
}

// fence is the token executor writes carry, 0 on standby.
func (l *lease) fence() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.token
}

// describe says who holds the lease, for /readyz and logs.
func (l *lease) describe() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.token != 0 && l.paused {
		return fmt.Sprintf("lease holder (token %d), paused: the lease could not be renewed since %s", l.token, l.renewedAt.UTC().Format(time.RFC3339))
	}
	if l.token != 0 {
		return fmt.Sprintf("lease holder (token %d)", l.token)
	}
	if l.seen.Holder == "" {
		return "standby: waiting for the executor lease"
	}
	return "standby: the executor lease is held by " + l.seen.Holder
}

// expired decides, for a standby that just read the row, whether the lease
// may be taken now.
func (l *lease) expired(row store.Lease, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if row.Holder == "" || (row.Host == l.me.Host && row.WorkDir == l.me.WorkDir) {
		l.seen = row
		return true
	}
	if row.Holder != l.seen.Holder || row.Token != l.seen.Token || row.Renewals != l.seen.Renewals || l.seenAt.IsZero() {
		l.seen, l.seenAt = row, now
		return false
	}
	return now.Sub(l.seenAt) >= l.ttl
}

// keepLease takes, renews and gives up the lease until shutdown stops it.
func (d *Driver) keepLease() {
	defer close(d.leaseDone)
	wait := d.lease.ttl / 5
	for {
		select {
		case <-d.leaseStop:
			return
		case <-time.After(wait):
		}
		wait = d.leaseStep(d.workCtx)
	}
}

// leaseStep is one round of keepLease: renew the held lease, or try to take
// it on standby. It returns the wait before the next round.
func (d *Driver) leaseStep(ctx context.Context) time.Duration {
	l := d.lease
	period := l.ttl / 5
	leases := d.state.Store().Leases
	if tok := l.fence(); tok != 0 {
		// A renewal that hangs must not hold the holder past the moment
		// it has to give the lease up: the call ends by then.
		l.mu.Lock()
		giveUp, paused := l.renewedAt.Add(l.ttl/2), l.paused
		l.mu.Unlock()
		deadline := time.Now().Add(period)
		if !paused {
			deadline = minTime(deadline, giveUp)
		}
		cctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		start := time.Now()
		err := leases.Renew(cctx, store.LocalExecutorLease, l.me.Holder, tok, l.ttl)
		switch {
		case err == nil:
			l.mu.Lock()
			if l.token == tok {
				l.renewedAt = start
			}
			l.mu.Unlock()
			if paused {
				d.resumeAttempts(tok)
			}
		case errors.Is(err, store.ErrFenced):
			d.loseLease(tok, "another manager took it over")
		case paused:
			return period
		case !time.Now().Before(giveUp):
			d.pauseAttempts(tok, fmt.Sprintf("it could not be renewed for %s: %v", (l.ttl/2).Round(time.Millisecond), err))
			return period
		default:
			if d.workCtx.Err() == nil {
				d.log.Warn("renewing the executor lease (will retry)", "err", err)
			}
			return max(0, min(period, time.Until(giveUp)))
		}
		return period
	}
	ctx, cancel := context.WithTimeout(ctx, period)
	defer cancel()
	row, err := leases.Get(ctx, store.LocalExecutorLease)
	if err != nil {
		if d.workCtx.Err() == nil {
			d.log.Warn("reading the executor lease", "err", err)
		}
		return period
	}
	if !l.expired(*row, time.Now()) {
		return period
	}
	start := time.Now()
	got, err := leases.Acquire(ctx, *row, l.me, l.ttl)
	if err != nil {
		if !errors.Is(err, store.ErrLeaseTaken) && d.workCtx.Err() == nil {
			d.log.Warn("taking the executor lease", "err", err)
		}
		return period
	}
	d.takeLease(got, row, start)
	return period
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// takeLease makes the driver the holder: it recovers everything unfinished
// (the resync scan, at once) and then takes work.
func (d *Driver) takeLease(got, prev *store.Lease, start time.Time) {
	l := d.lease
	l.mu.Lock()
	l.token, l.renewedAt = got.Token, start
	wasHolder := l.everHolder
	l.everHolder = true
	l.mu.Unlock()
	d.life.Lock()
	if d.status == lifeStandby {
		d.status = lifeRecovering
	}
	d.life.Unlock()
	if prev.Holder != "" {
		d.metrics.takeovers.Inc()
		d.log.Warn("took the executor lease over from a manager that stopped renewing it",
			"previous", prev.Holder, "token", got.Token, "holder", l.me.Holder)
	} else {
		d.log.Info("took the executor lease", "token", got.Token, "holder", l.me.Holder, "again", wasHolder)
	}
	select {
	case d.rescan <- struct{}{}:
	default:
	}
}

// loseLease puts the driver on standby after it lost the lease held with
// tok: nothing more is started or recorded, and the processes of its
// running attempts are stopped (unrecorded: the next holder, which may be
// this driver again, recovers them as orphans, or records the result they
// left).
func (d *Driver) loseLease(tok int64, why string) {
	l := d.lease
	l.mu.Lock()
	if l.token != tok {
		l.mu.Unlock()
		return
	}
	l.token, l.paused = 0, false
	l.seen, l.seenAt = store.Lease{}, time.Time{}
	l.mu.Unlock()
	d.life.Lock()
	if d.status == lifeRecovering || d.status == lifeReady {
		d.status = lifeStandby
	}
	d.life.Unlock()
	procs := d.startedAttempts()
	d.log.Error("lost the executor lease: the executor is on standby and stops its attempts", "why", why,
		"token", tok, "attempts", len(procs))
	d.slots.dropAllWaiting()
	for _, e := range procs {
		e.proc.Abort("this manager lost the executor lease")
	}
}

// pauseAttempts stops the processes of the attempts of the lease held with
// tok (SIGSTOP) while it cannot be renewed; nothing new starts meanwhile.
func (d *Driver) pauseAttempts(tok int64, why string) {
	l := d.lease
	l.mu.Lock()
	if l.token != tok || l.paused {
		l.mu.Unlock()
		return
	}
	l.paused = true
	l.mu.Unlock()
	procs := d.startedAttempts()
	d.log.Error("the executor lease cannot be renewed: the executor pauses its attempts until it can", "why", why,
		"token", tok, "attempts", len(procs))
	for _, e := range procs {
		e.proc.Pause()
	}
}

// resumeAttempts continues the paused attempts once a renewal proved the
// lease still ours, and looks at everything again (an attempt may have
// ended just before the pause; actions may have arrived meanwhile).
func (d *Driver) resumeAttempts(tok int64) {
	l := d.lease
	l.mu.Lock()
	if l.token != tok || !l.paused {
		l.mu.Unlock()
		return
	}
	l.paused = false
	l.mu.Unlock()
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

// releaseLease gives the lease up at a graceful stop, so that a standby
// takes it at once.
func (d *Driver) releaseLease(ctx context.Context) {
	l := d.lease
	l.mu.Lock()
	tok := l.token
	l.token = 0
	l.mu.Unlock()
	if tok == 0 {
		return
	}
	if err := d.state.Store().Leases.Release(ctx, store.LocalExecutorLease, l.me.Holder, tok); err != nil {
		d.log.Warn("releasing the executor lease (a standby takes it when it expires)", "err", err)
		return
	}
	d.log.Info("released the executor lease", "token", tok)
}

// LeaseStatus says whether this manager's executor holds the lease or waits
// on standby (for /readyz details).
func (d *Driver) LeaseStatus() string { return d.lease.describe() }

// followChanges queues the actions other managers create (and changes to
// attempts this driver runs, such as an abort requested through another
// manager) as the change log reports them, so the lease holder runs the
// runs every manager accepts without waiting for the resync scan. On
// standby the queued keys are dropped by reconcile.
func (d *Driver) followChanges() {
	defer d.wg.Done()
	for {
		sub := d.state.Hub().Subscribe(func(c store.Change) bool {
			return c.Kind == store.KindAction && (c.Op == store.ChangeAdded || c.Op == store.ChangeModified)
		})
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
			if c.Op == store.ChangeModified {
				d.mu.Lock()
				_, mine := d.running[c.Key]
				d.mu.Unlock()
				if !mine && !d.slots.waits(c.Key) {
					continue
				}
			}
			d.q.add(c.Key)
		}
	}
}
