package local

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/runstate/statetest"
	"fmgr.dev/internal/store"
	"fmgr.dev/internal/testkit"
)

// testLeaseTTL is short enough for quick takeovers and long enough that a
// loaded machine renews within half of it.
const testLeaseTTL = 4 * time.Second

func shortLease(c *config.LocalExecutor) { c.LeaseTTL = testLeaseTTL }

// peer is a second manager on h's database and storage: its own run state
// (and change hub) and its own work directory, as another process would have.
func (h *harness) peer() *harness {
	h.t.Helper()
	p := *h
	p.hub = statetest.Hub(h.t, h.st, h.log)
	p.state, _ = newState(&p, runstate.NoExecutor)
	p.workDir = filepath.Join(h.t.TempDir(), "work")
	return &p
}

// A second manager's executor stays on standby (ready, saying so) while the
// first holds the lease; runs submitted through either are executed by the
// holder; when the holder dies the standby takes over after the lease TTL,
// recovers the dead holder's attempt and runs it again under its own token.
func TestLeaseStandbyAndTakeover(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		// No periodic scan: the holder must learn of the runs another
		// manager accepts from the change log.
		d1 := h.driverWith(func(d *Driver) { d.resyncInterval = time.Hour }, shortLease)
		p := h.peer()
		d2 := p.driver(shortLease)
		if err := d2.Ready(); err != nil {
			t.Fatalf("a standby must be ready for the API: %v", err)
		}
		if s := d2.LeaseStatus(); !strings.Contains(s, "standby") || !strings.Contains(s, d1.lease.Holder()) {
			t.Fatalf("standby status %q", s)
		}
		if !strings.Contains(d1.LeaseStatus(), "lease holder") {
			t.Fatalf("holder status %q", d1.LeaseStatus())
		}
		tok1 := d1.lease.Fence()

		// Submitted to the standby, run by the holder.
		quick := p.run("lquick", succeed, taskOpts{})
		h.terminal(quick, phase.Succeeded, 30*time.Second)
		if atts := h.attempts(quick); len(atts) != 1 || atts[0].OwnerToken != tok1 {
			t.Fatalf("attempts %+v, want one owned by token %d", atts, tok1)
		}

		key := p.run("llong", longFirstAttempt, taskOpts{})
		h.wait(key, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == phase.Running })
		pids := h.firstAttemptPids()
		// The holder dies; its task processes die with it (Pdeathsig does
		// that for a real manager).
		d1.abandon()
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		testkit.Eventually(t, "the standby to take the lease", 4*testLeaseTTL, func() bool { return d2.lease.Fence() != 0 })
		a := h.terminal(key, phase.Succeeded, 30*time.Second)
		tok2 := d2.lease.Fence()
		atts := h.attempts(key)
		if a.Attempts != 2 || len(atts) != 2 || atts[0].OwnerToken != tok1 || atts[1].OwnerToken != tok2 || tok2 <= tok1 {
			t.Fatalf("attempts %+v (tokens %d then %d)", atts, tok1, tok2)
		}
		if o := h.readShared("overlap"); o != "" {
			t.Errorf("attempts overlapped: %s", o)
		}
		if n := testutil.ToFloat64(d2.metrics.takeovers); n != 1 {
			t.Errorf("takeovers %v", n)
		}
	})
}

// A holder whose lease was taken over (it paused, or lost the database for
// too long) stops its attempts and records nothing more; when it gets the
// lease back it recovers them like any orphan.
func TestLeaseLostStopsAttemptsUnrecorded(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		d := h.driver(shortLease)
		key := h.run("llost", longFirstAttempt, taskOpts{})
		h.wait(key, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == phase.Running })
		pids := h.firstAttemptPids()
		before, err := h.st.Actions.Get(h.ctx, key)
		if err != nil {
			t.Fatal(err)
		}

		row, err := h.st.Leases.Get(h.ctx, store.LocalExecutorLease)
		if err != nil {
			t.Fatal(err)
		}
		thief := store.Claimant{Holder: "thief", Host: "elsewhere", WorkDir: "/nowhere"}
		stolen, err := h.st.Leases.Acquire(h.ctx, *row, thief, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		// The thief is alive: it renews, so the driver cannot take the
		// lease back before the thief lets it go.
		thiefDone, thiefGone := make(chan struct{}), make(chan struct{})
		var stopThief sync.Once
		t.Cleanup(func() { stopThief.Do(func() { close(thiefDone) }); <-thiefGone })
		go func() {
			defer close(thiefGone)
			for {
				select {
				case <-thiefDone:
					return
				case <-time.After(testLeaseTTL / 8):
				}
				_ = h.st.Leases.Renew(h.ctx, store.LocalExecutorLease, thief.Holder, stolen.Token, time.Hour)
			}
		}()
		testkit.Eventually(t, "the driver to go on standby", 4*testLeaseTTL, func() bool { return d.lease.Fence() == 0 })
		testkit.Eventually(t, "its attempt's processes to stop", 30*time.Second, func() bool {
			for _, pid := range pids {
				if alive(pid) {
					return false
				}
			}
			return true
		})
		testkit.Eventually(t, "the driver to forget the attempt", 30*time.Second, func() bool {
			d.mu.Lock()
			defer d.mu.Unlock()
			return len(d.running) == 0
		})
		if s := d.LeaseStatus(); !strings.Contains(s, "standby") {
			t.Errorf("status after losing the lease: %q", s)
		}
		after, err := h.st.Actions.Get(h.ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if after.ResourceVersion != before.ResourceVersion || after.Phase != phase.Running {
			t.Fatalf("a manager without the lease recorded something: %s attempt %d (version %d, was %d)",
				after.Phase.String(), after.Attempts, after.ResourceVersion, before.ResourceVersion)
		}

		// The thief goes away: the driver takes the lease back and recovers
		// the attempt it had to stop.
		stopThief.Do(func() { close(thiefDone) })
		<-thiefGone
		if err := h.st.Leases.Release(h.ctx, store.LocalExecutorLease, thief.Holder, stolen.Token); err != nil {
			t.Fatal(err)
		}
		a := h.terminal(key, phase.Succeeded, 30*time.Second)
		if a.Attempts != 2 {
			t.Errorf("%d attempts", a.Attempts)
		}
		if o := h.readShared("overlap"); o != "" {
			t.Errorf("attempts overlapped: %s", o)
		}
	})
}

// A graceful stop records the holder's attempts under its lease and then
// releases it: the standby takes a free lease (not an expired one) and runs
// what was interrupted.
func TestLeaseReleasedAtGracefulStop(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		d1 := h.driver(shortLease)
		p := h.peer()
		d2 := p.driver(shortLease)
		key := h.run("lstop", longFirstAttempt, taskOpts{})
		h.wait(key, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == phase.Running })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := d1.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if a, _ := h.st.Actions.Get(h.ctx, key); a.Attempts != 2 {
			t.Fatalf("the stopping holder did not record its attempt: %s attempt %d", a.Phase.String(), a.Attempts)
		}
		row, err := h.st.Leases.Get(h.ctx, store.LocalExecutorLease)
		if err != nil || row.Holder != "" && row.Holder != d2.lease.Holder() {
			t.Fatalf("after a graceful stop the lease is %+v (%v)", row, err)
		}
		h.terminal(key, phase.Succeeded, 30*time.Second)
		if d2.lease.Fence() == 0 || testutil.ToFloat64(d2.metrics.takeovers) != 0 {
			t.Errorf("the standby should hold a released lease, not one taken over: token %d, takeovers %v",
				d2.lease.Fence(), testutil.ToFloat64(d2.metrics.takeovers))
		}
	})
}
