package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"fmgr.dev/executor/local/process"
	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/store"
)

// logBatch bounds the lines passed to emit at once.
const logBatch = 500

// Logs serves the log of one attempt of key (TailLogs). attempt 0 means the
// current one. A finished attempt's whole log is emitted; with follow, an
// attempt this driver is running is followed until it ends. An attempt
// whose process has not started yet has no log: errs.ErrNotFound (the SDK
// asks again).
func (d *Driver) Logs(ctx context.Context, key store.ActionKey, attempt int32, follow bool, emit func([]*dataplane.LogLine) error) error {
	if attempt <= 0 {
		a, err := d.state.Store().Actions.Get(ctx, key)
		if err != nil {
			return err
		}
		attempt = a.Attempts
	}
	dir, err := attemptDir(d.cfg.WorkDir, key, attempt)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, logFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return errs.NotFoundf("logs of attempt %d of action %s (not started yet?)", attempt, key.Name)
	} else if err != nil {
		return fmt.Errorf("logs of attempt %d of action %s: %w", attempt, key.Name, err)
	}
	send := func(lines []process.Line) error {
		for len(lines) > 0 {
			k := min(len(lines), logBatch)
			out := make([]*dataplane.LogLine, k)
			for i, l := range lines[:k] {
				out[i] = l.Proto()
			}
			if err := emit(out); err != nil {
				return err
			}
			lines = lines[k:]
		}
		return nil
	}
	var done func() bool
	if follow {
		d.mu.Lock()
		if e := d.running[key]; e != nil && e.n == attempt && e.proc != nil {
			done = e.proc.Finished
		}
		d.mu.Unlock()
	}
	if done == nil {
		lines, err := process.ReadLog(path)
		if err != nil {
			return fmt.Errorf("logs of attempt %d of action %s: %w", attempt, key.Name, err)
		}
		return send(lines)
	}
	return process.FollowLog(ctx, path, done, send)
}
