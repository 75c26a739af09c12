package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"fmgr.dev/executor/local/process"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/store"
)

// logBatch and logBatchBytes bound what is passed to emit at once (one
// TailLogs message): the log is read and sent a bounded chunk at a time,
// so serving a log of any size costs the manager about one chunk.
const (
	logBatch      = 500
	logBatchBytes = 1 << 20
)

// Logs serves the log of one attempt of key (TailLogs). attempt 0 means the
// current one. A finished attempt's whole log is emitted; with follow, an
// attempt this driver is running is followed until it ends. Either way the
// log is streamed, never read whole. An attempt
// whose process has not started yet has no log: errs.ErrNotFound (the SDK
// asks again).
func (d *Driver) Logs(ctx context.Context, key store.ActionKey, attempt int32, follow bool, emit func([]*dataplane.LogLine) error) error {
	if attempt <= 0 {
		a, err := d.state.Get(ctx, key)
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
			k, size := 0, 0
			for k < len(lines) && k < logBatch && (k == 0 || size+len(lines[k].Message) <= logBatchBytes) {
				size += len(lines[k].Message)
				k++
			}
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
	// Not followed: the log is complete, read to its end.
	done := func() bool { return true }
	if follow {
		d.mu.Lock()
		if e := d.running[key]; e != nil && e.n == attempt && e.proc != nil {
			done = e.proc.Finished
		}
		d.mu.Unlock()
	}
	return process.FollowLog(ctx, path, done, send)
}

// LogContext says where attempt n of key logs (GetActionLogContext): there
// is no Pod, so the "pod" is the attempt's directory under the work dir
// (where attempt.log is) and its one container the log TailLogs serves.
func (d *Driver) LogContext(key store.ActionKey, n int32) (*core.LogContext, error) {
	dir, err := attemptDir(d.cfg.WorkDir, key, n)
	if err != nil {
		return nil, err
	}
	rel, err := filepath.Rel(d.cfg.WorkDir, dir)
	if err != nil {
		return nil, err
	}
	pod := filepath.ToSlash(rel)
	return &core.LogContext{
		PrimaryPodName: pod,
		Pods: []*core.PodLogContext{{
			Namespace:            localNamespace,
			PodName:              pod,
			PrimaryContainerName: logContainer,
			Containers:           []*core.ContainerContext{{ContainerName: logContainer}},
		}},
	}, nil
}

// localNamespace and logContainer name the local executor's attempts in a
// LogContext: the host and the attempt's one log ("logs", as its TaskLog).
const (
	localNamespace = "local"
	logContainer   = "logs"
)
