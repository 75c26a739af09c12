package kube

import (
	"io"
	"log/slog"
	"testing"

	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/runstate/statetest"
)

// Two manager replicas on one PostgreSQL database and one cluster: one
// reconciles, the other stands by (and serves the API); when the holder
// stops, the standby takes over and finishes what the holder started.
func TestLeaderFailover(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	h := newHarness(t, dsn)
	standby, d2, _ := statetest.New(t, dbtest.Migrated(t, dsn), statetest.Options{BlobDir: h.blobDir}, func(s *runstate.Service) *Driver {
		return New(s, h.cluster.Config, h.d.cfg, t.TempDir(), func() string { return "127.0.0.1:1" }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	})
	h.start(d2, false)
	if d2.lease.Fence() != 0 {
		t.Fatal("the second replica took a held lease")
	}

	// Submitted through the standby, run by the holder.
	h.terminal(h.runOn(standby, "rfail1", succeed, taskOpts{}), phase.Succeeded)

	// A run starts under the holder, which then stops (a graceful stop
	// releases the lease: the standby takes over at once).
	long := h.run("rfail2", `sleep 3; `+succeed, taskOpts{})
	h.running(long, 1)
	h.stop()
	h.eventually("the standby to take the lease", func() bool { return d2.lease.Fence() != 0 })
	h.terminal(long, phase.Succeeded)
	if a := h.action(long); a.Attempts != 1 {
		t.Errorf("the takeover started attempt %d; the running Pod should have been followed to its end", a.Attempts)
	}
	h.terminal(h.runOn(standby, "rfail3", succeed, taskOpts{}), phase.Succeeded)
}
