package local

import (
	"context"
	"fmt"
)

// Stopping the driver: gracefully (Stop), or abandoning the lease when
// it is lost.

// Stop stops the driver gracefully: it stops taking work, lets the workers
// finish what they are doing, then stops every running attempt (SIGTERM,
// SIGKILL after the grace period) and records each as interrupted, which
// the machine turns into a new attempt (a system retry) that the next start
// runs. An attempt whose process has not ended when ctx does is left as it
// is: the next start finds it INITIALIZING/RUNNING, stops what is left of
// it and retries it the same way. Stopping rather than abandoning running
// attempts is what keeps a restart correct: the processes would die with
// the manager anyway (Pdeathsig), without a chance to clean up and without
// a record of why.
func (d *Driver) Stop(ctx context.Context) error {
	d.stopOnce.Do(func() {
		d.life.Lock()
		started := d.status != lifeNew
		d.status = lifeStopping
		d.life.Unlock()
		if started {
			d.stopErr = d.shutdown(ctx, true)
		}
		d.life.Lock()
		d.status = lifeStopped
		d.life.Unlock()
		close(d.done)
	})
	select {
	case <-d.done:
		return d.stopErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// abandon stops the driver the way a crash would: no more work and no more
// writes, running processes left alone. For tests of restart recovery.
func (d *Driver) abandon() {
	d.stopOnce.Do(func() {
		d.life.Lock()
		d.status = lifeStopping
		d.life.Unlock()
		_ = d.shutdown(context.Background(), false)
		d.life.Lock()
		d.status = lifeStopped
		d.life.Unlock()
		close(d.done)
	})
}

// shutdown stops the queue and the workers, then (graceful) stops and
// records the running attempts, and releases the work directory.
func (d *Driver) shutdown(ctx context.Context, graceful bool) error {
	close(d.stopCh)
	d.q.shutdown()
	workersDone := make(chan struct{})
	go func() { d.wg.Wait(); close(workersDone) }()
	select {
	case <-workersDone:
	case <-ctx.Done():
		d.stopWork()
		<-workersDone
	}
	var err error
	if graceful {
		// The lease is still renewed here, so the attempts' ends are
		// recorded under it; then it is released for a standby.
		err = d.stopAttempts(ctx)
		if err == nil && d.runner != nil {
			d.runner.Close() // the warm server: its attempts have ended
		}
		d.stopLease()
		d.lease.Release(ctx)
	} else {
		d.stopLease()
	}
	d.stopShipping(ctx, graceful)
	if d.lockF != nil {
		_ = d.lockF.Close() // releases the flock
		d.lockF = nil
	}
	d.log.Info("executor stopped", "graceful", graceful)
	return err
}

// stopLease stops keepLease (started with the work directory's lock).
func (d *Driver) stopLease() {
	if d.lockF == nil {
		return
	}
	close(d.leaseStop)
	<-d.leaseDone
}

// stopAttempts ends every running attempt and records how it ended.
func (d *Driver) stopAttempts(ctx context.Context) error {
	d.mu.Lock()
	var all []*ownAttempt
	for _, e := range d.running {
		if e.proc != nil {
			all = append(all, e)
		}
	}
	d.mu.Unlock()
	for _, e := range all {
		e.proc.Abort("the manager is shutting down")
	}
	var left int
	for _, e := range all {
		select {
		case <-e.proc.Done():
		case <-ctx.Done():
			left++
			continue
		}
		st := e.proc.Wait()
		d.handBack(e)
		if err := d.finish(ctx, e, st, true); err != nil {
			d.log.Warn("recording an attempt stopped at shutdown", "action", e.key.String(), "attempt", e.n, "err", err)
			left++
		}
	}
	if left > 0 {
		return fmt.Errorf("executor: %d attempt(s) were not recorded before the deadline; the next start recovers them", left)
	}
	return nil
}
