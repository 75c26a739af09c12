//go:build bench

// The no-op runner of `make bench`: compiled only with -tags bench, active
// only when FLYTE_MANAGER_BENCH_RUNNER=noop. An attempt then starts no
// process. A leaf "runs" by writing an empty outputs.pb; a parent (a task
// whose TaskTemplate.custom carries bench_fanout: N) does what the SDK's
// controller does inside a real parent task, over HTTP to this manager's own
// endpoint with the generated Connect clients: it watches its children
// (ActionsService.WatchForUpdates), enqueues N no-op children
// (ActionsService.Enqueue), waits until every child's terminal update has
// arrived, and succeeds. Everything but the Python process is the real path:
// the run state, the store, the driver's queue, slots and state machine, the
// change fan-out and the watches.
//
// FLYTE_MANAGER_BENCH_PPROF=host:port (also bench builds only) serves
// net/http/pprof there, with mutex and block profiling on, plus
// /debug/bench/cpu/start and /debug/bench/cpu/stop, which bracket a CPU
// profile around exactly the measured part of a bench run.

package local

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	rpprof "runtime/pprof"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"fmgr.dev/executor/local/process"
	actionspb "fmgr.dev/gen/go/flyteidl2/actions"
	"fmgr.dev/gen/go/flyteidl2/actions/actionsconnect"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/store"
)

// Environment variables read by bench builds.
const (
	benchRunnerEnv = "FLYTE_MANAGER_BENCH_RUNNER"
	benchPprofEnv  = "FLYTE_MANAGER_BENCH_PPROF"
	// benchFanoutField is the TaskTemplate.custom field that makes a no-op
	// task a parent of that many no-op children.
	benchFanoutField = "bench_fanout"
	// benchEnqueueConcurrency bounds a parent's Enqueue calls in flight (the
	// SDK's controller also submits a gather's children concurrently).
	benchEnqueueConcurrency = 16
)

func init() {
	switch r := os.Getenv(benchRunnerEnv); r {
	case "", "a0", "process":
	case "noop":
		defaultRunner = noopRun
		fmt.Fprintln(os.Stderr, "flyte-manager (bench build): "+benchRunnerEnv+"=noop: attempts run no process")
	default:
		fmt.Fprintf(os.Stderr, "flyte-manager (bench build): unknown %s=%q (want noop or a0); running processes\n", benchRunnerEnv, r)
	}
	if addr := os.Getenv(benchPprofEnv); addr != "" {
		runtime.SetMutexProfileFraction(5)
		runtime.SetBlockProfileRate(int(100 * time.Microsecond)) // about one sample per 100µs blocked
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		// A CPU profile of exactly the measured part of a bench run.
		var cpu struct {
			sync.Mutex
			buf *bytes.Buffer
		}
		mux.HandleFunc("/debug/bench/cpu/start", func(w http.ResponseWriter, _ *http.Request) {
			cpu.Lock()
			defer cpu.Unlock()
			if cpu.buf != nil {
				http.Error(w, "a CPU profile is running", http.StatusConflict)
				return
			}
			buf := &bytes.Buffer{}
			if err := rpprof.StartCPUProfile(buf); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			cpu.buf = buf
		})
		mux.HandleFunc("/debug/bench/cpu/stop", func(w http.ResponseWriter, _ *http.Request) {
			cpu.Lock()
			defer cpu.Unlock()
			if cpu.buf == nil {
				http.Error(w, "no CPU profile is running", http.StatusConflict)
				return
			}
			rpprof.StopCPUProfile()
			_, _ = w.Write(cpu.buf.Bytes())
			cpu.buf = nil
		})
		go func() {
			if err := http.ListenAndServe(addr, mux); err != nil {
				fmt.Fprintf(os.Stderr, "flyte-manager (bench build): pprof on %s: %v\n", addr, err)
			}
		}()
	}
}

// benchClient talks h2c to the manager, as the SDK's gRPC channel does.
var benchClient = sync.OnceValue(func() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}}
})

// noopRun is the attemptRunner of FLYTE_MANAGER_BENCH_RUNNER=noop: no
// process; the attempt ends when noopStart's channel yields, recorded as a
// process's end is.
func noopRun(d *Driver, ctx context.Context, a *store.Action, e *ownAttempt, s launchSetup) (*store.Action, error) {
	done := noopStart(ctx, d, a, e, s.endpoint)
	go func() { d.ended(e, <-done) }()
	return a, nil
}

// noopStart starts a no-op attempt: a leaf ends at once, a parent once its
// children did.
func noopStart(ctx context.Context, d *Driver, a *store.Action, e *ownAttempt, endpoint string) <-chan process.ExitStatus {
	ch := make(chan process.ExitStatus, 1)
	fanout := int(e.spec.GetTaskTemplate().GetCustom().GetFields()[benchFanoutField].GetNumberValue())
	if fanout <= 0 {
		ch <- noopEnd(ctx, d, e, nil)
		return ch
	}
	go func() { ch <- noopParent(ctx, d, a, e, endpoint, fanout) }()
	return ch
}

// noopEnd writes what a task that ended leaves behind: outputs.pb, or
// error.pb (a non-recoverable user error) when failure is set.
func noopEnd(ctx context.Context, d *Driver, e *ownAttempt, failure error) process.ExitStatus {
	name, data := runlayout.OutputsFile, []byte(nil)
	if failure != nil {
		name = runlayout.ErrorFile
		data, _ = proto.Marshal(&core.ErrorDocument{Error: &core.ContainerError{
			Code:    "BenchParentFailed",
			Message: failure.Error(),
			Kind:    core.ContainerError_NON_RECOVERABLE,
			Origin:  core.ExecutionError_USER,
		}})
	} else {
		data, _ = proto.Marshal(&task.Outputs{})
	}
	var err error
	if filepath.IsAbs(e.outDir) {
		err = os.WriteFile(filepath.Join(e.outDir, name), data, 0o644)
	} else {
		var key string
		if key, err = d.state.Blobs().Key(e.outDir); err == nil {
			err = d.state.Blobs().Put(ctx, key+"/"+name, data, nil)
		}
	}
	if err != nil {
		return process.ExitStatus{Code: 1, StderrTail: []string{"bench no-op runner: " + err.Error()}}
	}
	return process.ExitStatus{}
}

// noopParent plays the SDK's controller for fanout no-op children.
func noopParent(ctx context.Context, d *Driver, a *store.Action, e *ownAttempt, endpoint string, fanout int) process.ExitStatus {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := actionsconnect.NewActionsServiceClient(benchClient(), "http://"+endpoint, connect.WithGRPC())
	run := &common.RunIdentifier{Org: a.Org, Project: a.Project, Domain: a.Domain, Name: a.RunName}
	self := &common.ActionIdentifier{Run: run, Name: a.Name}

	stream, err := client.WatchForUpdates(ctx, connect.NewRequest(&actionspb.WatchForUpdatesRequest{
		Filter: &actionspb.WatchForUpdatesRequest_ParentActionId{ParentActionId: self},
	}))
	if err != nil {
		return noopInterrupted(ctx, fmt.Errorf("watching the children: %w", err))
	}
	defer stream.Close()

	// The children: this task without the fan-out marker.
	leaf := proto.Clone(e.spec).(*task.TaskSpec)
	tmpl := leaf.GetTaskTemplate()
	tmpl.Custom = nil
	if tmpl.GetId() != nil {
		tmpl.Id.Name += ".leaf"
	}
	id := tmpl.GetId()
	leafID := &task.TaskIdentifier{Org: id.GetOrg(), Project: id.GetProject(), Domain: id.GetDomain(), Name: id.GetName(), Version: id.GetVersion()}
	children := make(map[string]bool, fanout)
	for i := range fanout {
		children[fmt.Sprintf("%s-%d", a.Name, i)] = true
	}

	ended := map[string]common.ActionPhase{}
	receive := func() (*workflow.ActionUpdate, bool, error) {
		if !stream.Receive() {
			err := stream.Err()
			if err == nil {
				err = fmt.Errorf("the watch ended")
			}
			return nil, false, err
		}
		m := stream.Msg()
		if m.GetControlMessage().GetSentinel() {
			return nil, true, nil
		}
		return m.GetActionUpdate(), false, nil
	}
	note := func(u *workflow.ActionUpdate) {
		name := u.GetActionId().GetName()
		if children[name] && phase.FromProto(u.GetPhase()).Terminal() {
			ended[name] = u.GetPhase()
		}
	}
	// The snapshot (children of an earlier attempt) up to the sentinel.
	for {
		u, sentinel, err := receive()
		if err != nil {
			return noopInterrupted(ctx, fmt.Errorf("watching the children: %w", err))
		}
		if sentinel {
			break
		}
		note(u)
	}

	enqueueErr := make(chan error, 1)
	go func() {
		sem := make(chan struct{}, benchEnqueueConcurrency)
		var wg sync.WaitGroup
		var once sync.Once
		for name := range children {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				_, err := client.Enqueue(ctx, connect.NewRequest(&actionspb.EnqueueRequest{Action: &actionspb.Action{
					ActionId:         &common.ActionIdentifier{Run: run, Name: name},
					ParentActionName: &a.Name,
					InputUri:         a.InputURI,
					RunOutputBase:    a.RunOutputBase,
					Spec:             &actionspb.Action_Task{Task: &workflow.TaskAction{Id: leafID, Spec: leaf}},
				}}))
				if err != nil {
					once.Do(func() { enqueueErr <- fmt.Errorf("enqueueing %s: %w", name, err) })
					cancel()
				}
			}()
		}
		wg.Wait()
	}()

	for len(ended) < fanout {
		u, _, err := receive()
		if err != nil {
			select {
			case eerr := <-enqueueErr:
				return noopEnd(context.WithoutCancel(ctx), d, e, eerr)
			default:
			}
			return noopInterrupted(ctx, fmt.Errorf("watching the children: %w", err))
		}
		if u != nil {
			note(u)
		}
	}
	for name, ph := range ended {
		if ph != common.ActionPhase_ACTION_PHASE_SUCCEEDED {
			return noopEnd(ctx, d, e, fmt.Errorf("child %s ended %s", name, ph))
		}
	}
	return noopEnd(ctx, d, e, nil)
}

// noopInterrupted is the end of a parent whose watch broke: when the driver
// is stopping, an interrupted attempt (run again after a restart), else a
// crash (a recoverable system failure, retried).
func noopInterrupted(ctx context.Context, err error) process.ExitStatus {
	if ctx.Err() != nil {
		return process.ExitStatus{Code: -1, Signal: "killed", Aborted: true, AbortReason: "the manager is stopping"}
	}
	return process.ExitStatus{Code: 1, StderrTail: []string{"bench no-op parent: " + err.Error()}}
}
