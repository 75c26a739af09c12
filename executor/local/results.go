package local

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/local/process"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// How the end of an attempt is read from what its process left behind: for
// an attempt this driver watched end (classify, from outcome), and for one
// found active after a restart or a takeover (recoverOrphan).

// classify reads what the attempt left in its output directory and
// classifies its end (attempt.Core.Classify). A warning in the result (the
// outputs or error file were complete when the process, or its manager,
// died) goes to the manager's log and to the attempt's log, where the user
// sees it.
func (d *Driver) classify(ctx context.Context, key store.ActionKey, n int32, spec *task.TaskSpec, outDir string, exit contract.Exit) (contract.Result, error) {
	res, err := d.core.Classify(ctx, spec, outDir, exit)
	if err != nil {
		return res, err
	}
	if res.Warning != "" {
		d.log.Warn("attempt ended abnormally after writing its result", "action", key.String(), "attempt", n, "warning", res.Warning)
		if dir, err := attemptDir(d.cfg.WorkDir, key, n); err == nil {
			if err := process.AppendSystemLine(filepath.Join(dir, logFile), "warning: "+res.Warning); err != nil {
				d.log.Warn("writing a warning to the attempt's log", "action", key.String(), "attempt", n, "err", err)
			}
		}
	}
	return res, nil
}

// recoverOrphan handles an attempt found active that this driver did not
// start: a previous manager (or the previous lease holder) ran it. Whatever
// is left of it is stopped first. An attempt that had completely written its
// outputs or its error file has ended, and is recorded from that file (not
// run again, which would repeat its side effects); any other is recorded as
// orphaned, a system retry, or ABORTED when an abort was requested.
func (d *Driver) recoverOrphan(ctx context.Context, a *store.Action) error {
	what, err := d.stopLeftovers(a)
	if err != nil {
		return err
	}
	spec, err := d.core.Spec(ctx, a)
	if err != nil {
		var bad attempt.BadSpecError
		if !errors.As(err, &bad) {
			return err
		}
		spec = nil // the default policy still retries system failures
	}
	n := a.Attempts
	outDir := runstate.OutputDir(a, n)
	res, err := d.classify(ctx, a.ActionKey, n, spec, outDir, contract.Exit{Unobserved: true})
	if err != nil {
		return err
	}
	var ev machine.Event = machine.Orphaned{Attempt: uint32(n), Message: fmt.Sprintf(
		"the manager restarted while attempt %d was %s; %s",
		n, strings.ToLower(a.Phase.String()), what)}
	rec := attempt.Record{}
	switch {
	case res.Outcome != contract.Succeeded && a.AbortRequestedAt != nil:
		// An abort wins over everything but a success, as for attempts
		// of ours (see outcome).
		ev = machine.AbortRequested{Reason: attempt.AbortReason(a)}
	case res.Outcome != contract.Lost:
		ev, rec.OutDir = res.Event(uint32(n)), outDir
		if res.Document != nil {
			rec.ErrorURI = runlayout.JoinURI(outDir, runlayout.ErrorFile)
		}
	}
	updated, dec, err := d.core.Apply(ctx, a, spec, ev, rec)
	if err != nil {
		return err
	}
	d.metrics.orphans.Inc()
	d.metrics.countEnd(dec)
	d.log.Warn("recovered an orphaned attempt", "action", a.ActionKey.String(), "attempt", n,
		"found", res.Outcome.String(), "decision", decisionString(dec))
	if dir, err := attemptDir(d.cfg.WorkDir, a.ActionKey, n); err == nil {
		removeSecrets(dir) // its working directory stays (see layout.go)
	}
	d.core.AfterRecord(ctx, updated, dec)
	// What its shipper stored before the restart, and what is left of its
	// log here, become its final log.
	d.shipLog(a, n, func() bool { return true })
	return nil
}
