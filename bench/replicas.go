package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/pgtest"
)

// The replicas scenario (-runners replicas) measures cross-replica fan-out:
// two managers on one throwaway PostgreSQL database; a WatchRuns stream of
// the bench project is open on replica B while the bench creates runs, one
// at a time, through replica A. Each sample is the time from sending
// CreateRun to A until B's stream carries the new run: the commit on A,
// its notification to B's hub, B's read of the change log and the send to
// the watcher (an upper bound of commit → update, since it includes A's
// handling of the request before its commit). Without notifications B
// would see the run at its next poll (about half a second on average).

// replicaLatencyTarget is the target for the p50.
const replicaLatencyTarget = 20 * time.Millisecond

// replicaFigures is what the scenario measured.
type replicaFigures struct {
	samples  int
	p50, p99 time.Duration
	// The same of CreateRun's own round trip to A (its commit included):
	// the part of the figure that is not fan-out.
	createP50, createP99 time.Duration
}

// runReplicas runs the scenario with o.runs samples (after o.warmup
// unmeasured ones) and returns its report.
func runReplicas(ctx context.Context, o options, tmp string, pg *pgtest.Server) (func(io.Writer), error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	dsn, err := createDatabase(ctx, pg, "bench_replicas")
	if err != nil {
		return nil, err
	}
	env := []string{"FLYTE_MANAGER_BENCH_RUNNER=noop", fmt.Sprintf("FLYTE_MANAGER_EXECUTOR_LOCAL_MAXPARALLELISM=%d", noopParallelism)}
	var replicas [2]*manager
	for i, name := range []string{"a", "b"} {
		if replicas[i], err = startManager(ctx, o.managerBin, filepath.Join(tmp, "replica-"+name), dsn, env, nil, false); err != nil {
			return nil, fmt.Errorf("replica %s: %w", name, err)
		}
		defer replicas[i].Stop()
	}
	fig, err := measureReplicas(ctx, newClient(replicas[0].URL), newClient(replicas[1].URL), o.warmup, o.runs)
	if err != nil {
		return nil, fmt.Errorf("%w (manager logs: %s, %s)", err, replicas[0].LogPath, replicas[1].LogPath)
	}
	return func(out io.Writer) {
		fmt.Fprintf(out, "\ncross-replica fan-out (PostgreSQL, 2 managers): CreateRun on A → the run on B's WatchRuns, %d samples\n", fig.samples)
		fmt.Fprintf(out, "  p50 %s (target ≤ %s)  p99 %s;  of which CreateRun's own round trip to A: p50 %s  p99 %s\n",
			round(fig.p50), replicaLatencyTarget, round(fig.p99), round(fig.createP50), round(fig.createP99))
	}, nil
}

// measureReplicas creates runs through a and times their arrival on b's
// WatchRuns stream.
func measureReplicas(ctx context.Context, a, b *client, warmup, samples int) (replicaFigures, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := b.runs.WatchRuns(ctx, connect.NewRequest(&workflow.WatchRunsRequest{
		Target: &workflow.WatchRunsRequest_ProjectId{ProjectId: &common.ProjectIdentifier{Name: benchProject, Domain: benchDomain}},
	}))
	if err != nil {
		return replicaFigures{}, fmt.Errorf("WatchRuns on B: %w", err)
	}
	defer stream.Close()
	if !stream.Receive() { // the scope's runs so far
		return replicaFigures{}, fmt.Errorf("WatchRuns on B: %w", stream.Err())
	}
	type arrival struct {
		name string
		at   time.Time
	}
	arrivals := make(chan arrival, 1024)
	streamErr := make(chan error, 1)
	go func() {
		for stream.Receive() {
			at := time.Now()
			for _, r := range stream.Msg().GetRuns() {
				select {
				case arrivals <- arrival{r.GetAction().GetId().GetRun().GetName(), at}:
				case <-ctx.Done():
					return
				}
			}
		}
		streamErr <- fmt.Errorf("WatchRuns on B ended: %w", stream.Err())
	}()

	w := noopWorkload(0)
	var lat, create []time.Duration
	for i := range warmup + samples {
		name := fmt.Sprintf("replica-%d", i)
		start := time.Now()
		if _, err := a.runs.CreateRun(ctx, connect.NewRequest(&workflow.CreateRunRequest{
			Id:           &workflow.CreateRunRequest_RunId{RunId: runID(name)},
			Task:         &workflow.CreateRunRequest_TaskSpec{TaskSpec: w.spec},
			InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: w.inputs},
		})); err != nil {
			return replicaFigures{}, fmt.Errorf("CreateRun %s on A: %w", name, err)
		}
		if i >= warmup {
			create = append(create, time.Since(start))
		}
		for seen := false; !seen; {
			select {
			case r := <-arrivals:
				// Later phases of earlier runs arrive too; the first
				// update naming this run is its creation.
				if r.name == name {
					seen = true
					if i >= warmup {
						lat = append(lat, r.at.Sub(start))
					}
				}
			case err := <-streamErr:
				return replicaFigures{}, err
			case <-ctx.Done():
				return replicaFigures{}, fmt.Errorf("run %s never reached B's WatchRuns: %w", name, ctx.Err())
			}
		}
	}
	slices.Sort(lat)
	slices.Sort(create)
	return replicaFigures{samples: len(lat), p50: percentile(lat, 0.50), p99: percentile(lat, 0.99),
		createP50: percentile(create, 0.50), createP99: percentile(create, 0.99)}, nil
}
