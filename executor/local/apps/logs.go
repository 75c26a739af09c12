package apps

import (
	"context"
	"sync"

	"fmgr.dev/executor/local/process"
	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	"fmgr.dev/internal/appruntime"
	"fmgr.dev/internal/errs"
)

// Replicas lists the app's replicas: the ones that ended (their logs are
// kept) first, then the running ones.
func (r *Runtime) Replicas(k appruntime.Key) []appruntime.Replica {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.apps[k]
	if a == nil {
		return nil
	}
	var out []appruntime.Replica
	for _, rep := range a.ended {
		out = append(out, appruntime.Replica{Name: rep.name, Status: "ended"})
	}
	for _, rep := range a.replicas {
		st := "starting"
		switch {
		case rep.stopping:
			st = "stopping"
		case rep.ready:
			st = "running"
		}
		out = append(out, appruntime.Replica{Name: rep.name, Status: st})
	}
	return out
}

// TailLogs streams the logs of the app's replicas (or one of them): what
// each printed, then what the running ones print next, until ctx ends.
func (r *Runtime) TailLogs(ctx context.Context, k appruntime.Key, name string, emit func(string, []*dataplane.LogLine) error) error {
	r.mu.Lock()
	var reps []*replica
	if a := r.apps[k]; a != nil {
		for _, rep := range append(append([]*replica(nil), a.ended...), a.replicas...) {
			if name == "" || rep.name == name {
				reps = append(reps, rep)
			}
		}
	}
	r.mu.Unlock()
	if len(reps) == 0 {
		if name != "" {
			return errs.NotFoundf("app %s has no replica %q", k, name)
		}
		return errs.NotFoundf("app %s has no replica logs yet", k)
	}
	var mu sync.Mutex // one emit at a time
	var wg sync.WaitGroup
	errc := make(chan error, len(reps))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, rep := range reps {
		wg.Go(func() {
			err := process.FollowLog(ctx, rep.logPath, rep.proc.Finished, func(lines []process.Line) error {
				out := make([]*dataplane.LogLine, len(lines))
				for i, l := range lines {
					out[i] = l.Proto()
				}
				mu.Lock()
				defer mu.Unlock()
				return emit(rep.name, out)
			})
			if err != nil && ctx.Err() == nil {
				errc <- err
				cancel()
			}
		})
	}
	wg.Wait()
	close(errc)
	return <-errc
}
