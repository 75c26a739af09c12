package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
)

// Where the bench's runs go: the project the manager seeds by default.
const (
	benchProject = "flytesnacks"
	benchDomain  = "development"
	rootAction   = "a0"
)

// workload is what one scenario submits: a fan-out parent's TaskSpec and
// its inputs, sent inline with every CreateRun.
type workload struct {
	spec   *task.TaskSpec
	inputs *task.Inputs
	fanout int
}

// noopWorkload is the no-op runner's parent: a container task the no-op
// runner recognises by TaskTemplate.custom.bench_fanout (its children are
// the same task without the marker). The command is never run.
func noopWorkload(fanout int) workload {
	custom, _ := structpb.NewStruct(map[string]any{"bench_fanout": fanout})
	return workload{
		fanout: fanout,
		inputs: &task.Inputs{},
		spec: &task.TaskSpec{
			ShortName: "noop_fanout",
			TaskTemplate: &core.TaskTemplate{
				Id: &core.Identifier{
					ResourceType: core.ResourceType_TASK, Project: benchProject, Domain: benchDomain,
					Name: "bench.noop_fanout", Version: "v1",
				},
				Type:      "python",
				Metadata:  &core.TaskMetadata{},
				Interface: &core.TypedInterface{},
				Custom:    custom,
				Target: &core.TaskTemplate_Container{Container: &core.Container{
					Image: "bench-noop",
					Args:  []string{"false", "bench no-op task: run flyte-manager -tags bench with FLYTE_MANAGER_BENCH_RUNNER=noop"},
				}},
			},
		},
	}
}

// realTasks is the a0 runner's parent (a Python task that gathers n leaf
// tasks, each squaring an int) built with the SDK through
// bench/realtasks.py, and its inputs for each fan-out the bench asked for.
type realTasks struct {
	spec   *task.TaskSpec
	inputs map[int]*task.Inputs
}

// buildRealTasks runs realtasks.py for the given fan-outs.
func buildRealTasks(ctx context.Context, root, python, dir string, fanouts []int) (*realTasks, error) {
	var list []string
	for _, n := range fanouts {
		list = append(list, fmt.Sprint(n))
	}
	cmd := exec.CommandContext(ctx, python, filepath.Join(root, "bench", "realtasks.py"),
		"--workdir", dir, "--fanout", strings.Join(list, ","), "--project", benchProject, "--domain", benchDomain)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("building the real tasks with the SDK (%s): %w", python, err)
	}
	var index struct {
		Spec   string
		Inputs map[string]string
	}
	if err := json.Unmarshal(out, &index); err != nil {
		return nil, fmt.Errorf("realtasks.py printed %q: %w", out, err)
	}
	rt := &realTasks{spec: &task.TaskSpec{}, inputs: map[int]*task.Inputs{}}
	if err := readProto(index.Spec, rt.spec); err != nil {
		return nil, err
	}
	for _, n := range fanouts {
		in := &task.Inputs{}
		if err := readProto(index.Inputs[fmt.Sprint(n)], in); err != nil {
			return nil, err
		}
		rt.inputs[n] = in
	}
	return rt, nil
}

func readProto(path string, m proto.Message) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// workload is the parent with fanout children (one of the fan-outs built).
func (rt *realTasks) workload(fanout int) workload {
	return workload{spec: rt.spec, inputs: rt.inputs[fanout], fanout: fanout}
}

// runResult is one run as the bench saw it.
type runResult struct {
	name    string
	latency time.Duration // CreateRun sent → terminal phase seen on WatchActionDetails
	phase   common.ActionPhase
	err     error
}

// client is the bench's view of a manager: the public RunService over h2c
// with the gRPC protocol, as the SDK talks to it.
type client struct {
	runs workflowconnect.RunServiceClient
}

func newClient(baseURL string) *client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &p}}
	return &client{runs: workflowconnect.NewRunServiceClient(hc, baseURL, connect.WithGRPC())}
}

func runID(name string) *common.RunIdentifier {
	return &common.RunIdentifier{Project: benchProject, Domain: benchDomain, Name: name}
}

// submitAndWait creates one run and follows its root until it is terminal.
func (c *client) submitAndWait(ctx context.Context, w workload, name string) runResult {
	r := runResult{name: name}
	id := runID(name)
	start := time.Now()
	_, err := c.runs.CreateRun(ctx, connect.NewRequest(&workflow.CreateRunRequest{
		Id:           &workflow.CreateRunRequest_RunId{RunId: id},
		Task:         &workflow.CreateRunRequest_TaskSpec{TaskSpec: w.spec},
		InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: w.inputs},
	}))
	if err != nil {
		r.err = fmt.Errorf("CreateRun %s: %w", name, err)
		return r
	}
	stream, err := c.runs.WatchActionDetails(ctx, connect.NewRequest(&workflow.WatchActionDetailsRequest{
		ActionId: &common.ActionIdentifier{Run: id, Name: rootAction},
	}))
	if err != nil {
		r.err = fmt.Errorf("WatchActionDetails %s: %w", name, err)
		return r
	}
	defer stream.Close()
	for stream.Receive() {
		if ph := stream.Msg().GetDetails().GetStatus().GetPhase(); terminal(ph) {
			r.latency, r.phase = time.Since(start), ph
			return r
		}
	}
	r.err = stream.Err()
	if r.err == nil {
		r.err = errors.New("the watch ended before the run did")
	}
	r.err = fmt.Errorf("WatchActionDetails %s: %w", name, r.err)
	return r
}

func terminal(ph common.ActionPhase) bool {
	switch ph {
	case common.ActionPhase_ACTION_PHASE_SUCCEEDED, common.ActionPhase_ACTION_PHASE_FAILED,
		common.ActionPhase_ACTION_PHASE_ABORTED, common.ActionPhase_ACTION_PHASE_TIMED_OUT:
		return true
	}
	return false
}

// submitAll runs n runs named prefix0000.. with at most inflight at once
// (0: all at once) and returns their results and the wall time from the
// first submission to the last terminal phase.
func (c *client) submitAll(ctx context.Context, w workload, prefix string, n, inflight int) ([]runResult, time.Duration) {
	if inflight <= 0 || inflight > n {
		inflight = n
	}
	results := make([]runResult, n)
	sem := make(chan struct{}, inflight)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			results[i] = c.submitAndWait(ctx, w, fmt.Sprintf("%s%04d", prefix, i))
		}()
	}
	wg.Wait()
	return results, time.Since(start)
}

// verify counts a run's actions and how many succeeded (ListActions).
func (c *client) verify(ctx context.Context, name string) (actions, succeeded int, err error) {
	req := &workflow.ListActionsRequest{RunId: runID(name), Request: &common.ListRequest{Limit: 500}}
	for {
		resp, err := c.runs.ListActions(ctx, connect.NewRequest(req))
		if err != nil {
			return actions, succeeded, fmt.Errorf("ListActions %s: %w", name, err)
		}
		for _, a := range resp.Msg.GetActions() {
			actions++
			if a.GetStatus().GetPhase() == common.ActionPhase_ACTION_PHASE_SUCCEEDED {
				succeeded++
			}
		}
		if resp.Msg.GetToken() == "" {
			return actions, succeeded, nil
		}
		req.Request.Token = resp.Msg.GetToken()
	}
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func latencies(rs []runResult) []time.Duration {
	var out []time.Duration
	for _, r := range rs {
		if r.err == nil {
			out = append(out, r.latency)
		}
	}
	slices.Sort(out)
	return out
}
