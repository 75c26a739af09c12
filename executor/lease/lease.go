// Package lease is executor ownership: several managers may share one
// database, and only the one holding the executor lease (a row in the
// database) starts and records attempts, whichever driver it runs. The
// others keep their executor on standby: they serve the API, and the runs
// they accept are executed by the holder.
//
//   - A standby takes the lease when it is free (released by a graceful
//     stop), when its row has not moved for the TTL on the standby's own
//     clock (no holder clocks are compared), or at once when the holder
//     recorded this host and this directory: this manager holds that
//     directory's flock (LockDir), so that holder has died (a restart).
//   - The holder renews the lease every TTL/5. When another manager took it
//     over, it gives it up (Events.Lost). When it merely cannot renew it for
//     TTL/2 (the database is unreachable: down for everyone, or only for
//     this manager, which it cannot tell apart) it pauses (Events.Paused)
//     while it keeps trying; a standby waits a whole TTL, so the holder has
//     paused by then. A renewal that succeeds again proves nobody took over
//     (Events.Resumed). A renewal refused for the token ends the tenure.
//   - Every executor write carries the lease token (store.Update.Fence) and
//     commits only while the lease row still has it: a manager that paused
//     past its lease and wakes up cannot record anything.
//   - Every takeover increments the token, and each attempt records the
//     token of the manager that started it (store.Attempt.OwnerToken).
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"fmgr.dev/internal/store"
)

// Events are what a driver does when its tenure changes. They are called
// from the keeper's goroutine, one at a time.
type Events interface {
	// Taken: this manager holds the lease with token; prev is the row it
	// took it from (Holder "" when it was free).
	Taken(token int64, prev store.Lease)
	// Lost: the lease held with token was taken over; nothing may be
	// written with it any more.
	Lost(token int64, why string)
	// Paused: the lease held with token could not be renewed for TTL/2.
	Paused(token int64, why string)
	// Resumed: a renewal succeeded again after Paused.
	Resumed(token int64)
}

// Keeper takes, renews and gives up the executor lease for one driver.
type Keeper struct {
	leases *store.Leases
	me     store.Claimant
	ttl    time.Duration
	log    *slog.Logger
	events Events

	mu         sync.Mutex
	token      int64       // the held token, 0 on standby
	renewedAt  time.Time   // when the last successful renewal (or the acquisition) started
	seen       store.Lease // the row as last read on standby
	seenAt     time.Time   // when seen last changed
	everHolder bool        // the lease was held at least once
	paused     bool        // held, but not renewed for ttl/2
}

// New builds a keeper. dir is the directory this manager locked (LockDir):
// a holder recorded with this host and dir is this manager's dead
// predecessor.
func New(leases *store.Leases, dir string, ttl time.Duration, log *slog.Logger, events Events) *Keeper {
	host, _ := os.Hostname()
	var id [6]byte
	_, _ = rand.Read(id[:])
	return &Keeper{
		leases: leases,
		me:     store.Claimant{Holder: fmt.Sprintf("%s/pid %d/%s", host, os.Getpid(), hex.EncodeToString(id[:])), Host: host, WorkDir: dir},
		ttl:    ttl,
		log:    log,
		events: events,
	}
}

// Holder is this manager's holder id.
func (k *Keeper) Holder() string { return k.me.Holder }

// Fence is the token executor writes carry, 0 on standby.
func (k *Keeper) Fence() int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.token
}

// Paused reports whether the holder paused.
func (k *Keeper) Paused() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.paused
}

// Describe says who holds the lease, for /readyz and logs.
func (k *Keeper) Describe() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.token != 0 && k.paused {
		return fmt.Sprintf("lease holder (token %d), paused: the lease could not be renewed since %s", k.token, k.renewedAt.UTC().Format(time.RFC3339))
	}
	if k.token != 0 {
		return fmt.Sprintf("lease holder (token %d)", k.token)
	}
	if k.seen.Holder == "" {
		return "standby: waiting for the executor lease"
	}
	return "standby: the executor lease is held by " + k.seen.Holder
}

// expired decides, for a standby that just read the row, whether the lease
// may be taken now.
func (k *Keeper) expired(row store.Lease, now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if row.Holder == "" || (row.Host == k.me.Host && row.WorkDir == k.me.WorkDir && k.me.WorkDir != "") {
		k.seen = row
		return true
	}
	if row.Holder != k.seen.Holder || row.Token != k.seen.Token || row.Renewals != k.seen.Renewals || k.seenAt.IsZero() {
		k.seen, k.seenAt = row, now
		return false
	}
	return now.Sub(k.seenAt) >= k.ttl
}

// Run takes and renews the lease every TTL/5 until stop is closed.
func (k *Keeper) Run(ctx context.Context, stop <-chan struct{}) {
	wait := k.ttl / 5
	for {
		select {
		case <-stop:
			return
		case <-time.After(wait):
		}
		wait = k.Step(ctx)
	}
}

// Step is one round: renew the held lease, or try to take it on standby.
// It returns the wait before the next round.
func (k *Keeper) Step(ctx context.Context) time.Duration {
	period := k.ttl / 5
	if tok := k.Fence(); tok != 0 {
		// A renewal that hangs must not hold the holder past the moment
		// it has to give the lease up: the call ends by then.
		k.mu.Lock()
		giveUp, paused := k.renewedAt.Add(k.ttl/2), k.paused
		k.mu.Unlock()
		deadline := time.Now().Add(period)
		if !paused && giveUp.Before(deadline) {
			deadline = giveUp
		}
		cctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		start := time.Now()
		err := k.leases.Renew(cctx, store.LocalExecutorLease, k.me.Holder, tok, k.ttl)
		switch {
		case err == nil:
			k.mu.Lock()
			if k.token == tok {
				k.renewedAt = start
			}
			resume := k.token == tok && k.paused
			k.paused = k.paused && !resume
			k.mu.Unlock()
			if resume {
				k.events.Resumed(tok)
			}
		case errors.Is(err, store.ErrFenced):
			k.lose(tok, "another manager took it over")
		case paused:
			return period
		case !time.Now().Before(giveUp):
			k.mu.Lock()
			pause := k.token == tok && !k.paused
			k.paused = k.paused || pause
			k.mu.Unlock()
			if pause {
				k.events.Paused(tok, fmt.Sprintf("it could not be renewed for %s: %v", (k.ttl/2).Round(time.Millisecond), err))
			}
			return period
		default:
			if ctx.Err() == nil {
				k.log.Warn("renewing the executor lease (will retry)", "err", err)
			}
			return max(0, min(period, time.Until(giveUp)))
		}
		return period
	}
	cctx, cancel := context.WithTimeout(ctx, period)
	defer cancel()
	row, err := k.leases.Get(cctx, store.LocalExecutorLease)
	if err != nil {
		if ctx.Err() == nil {
			k.log.Warn("reading the executor lease", "err", err)
		}
		return period
	}
	if !k.expired(*row, time.Now()) {
		return period
	}
	start := time.Now()
	got, err := k.leases.Acquire(cctx, *row, k.me, k.ttl)
	if err != nil {
		if !errors.Is(err, store.ErrLeaseTaken) && ctx.Err() == nil {
			k.log.Warn("taking the executor lease", "err", err)
		}
		return period
	}
	k.mu.Lock()
	k.token, k.renewedAt = got.Token, start
	k.everHolder = true
	k.mu.Unlock()
	k.events.Taken(got.Token, *row)
	return period
}

// lose ends the tenure held with tok.
func (k *Keeper) lose(tok int64, why string) {
	k.mu.Lock()
	if k.token != tok {
		k.mu.Unlock()
		return
	}
	k.token, k.paused = 0, false
	k.seen, k.seenAt = store.Lease{}, time.Time{}
	k.mu.Unlock()
	k.events.Lost(tok, why)
}

// Release gives the lease up at a graceful stop, so that a standby takes it
// at once.
func (k *Keeper) Release(ctx context.Context) {
	k.mu.Lock()
	tok := k.token
	k.token = 0
	k.mu.Unlock()
	if tok == 0 {
		return
	}
	if err := k.leases.Release(ctx, store.LocalExecutorLease, k.me.Holder, tok); err != nil {
		k.log.Warn("releasing the executor lease (a standby takes it when it expires)", "err", err)
		return
	}
	k.log.Info("released the executor lease", "token", tok)
}

// LockDir creates dir and takes an exclusive lock on it for the life of the
// executor: two managers executing out of one directory would each take the
// other's attempts for orphans. The lock is an flock on a close-on-exec
// descriptor, so task processes do not inherit it and the kernel drops it
// when the manager dies. Close the file to release it.
func LockDir(dir, name string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("executor: work dir: %w", err)
	}
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("executor: work dir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("executor: work dir %s is in use by another flyte-manager (one manager per work dir)", dir)
		}
		return nil, fmt.Errorf("executor: lock %s: %w", path, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}
