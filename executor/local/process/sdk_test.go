package process

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/sdktest"
	"fmgr.dev/internal/testkit"
	"google.golang.org/protobuf/proto"
)

// sdkVenv is the virtualenv with the pinned flyte SDK (see sdktest.Venv).
func sdkVenv(t *testing.T) string { return sdktest.Venv(t) }

// TestRealSDKRuntime runs tasks serialised by the real SDK through the real
// `a0` runtime with our argv templating, environment and classification.
func TestRealSDKRuntime(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Python processes")
	}
	venv := sdkVenv(t)
	root := t.TempDir()

	var tasks []sdkTask
	for name, e := range sdktest.PrepareTasks(t, "testdata/sdk_task.py", filepath.Join(root, "sdk"), "--x", "3", "--y", "4") {
		tasks = append(tasks, sdkTask{name: name, spec: e.Spec, inputDir: e.InputDir})
	}
	port, err := testkit.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "localhost:" + strconv.Itoa(port) // nothing listens: these tasks never fan out
	// The same tasks, started plainly and by the warm server: the outcome
	// must not tell them apart.
	for _, warm := range []bool{false, true} {
		mode := map[bool]string{false: "plain", true: "warm"}[warm]
		t.Run(mode, func(t *testing.T) {
			h := &sdkHarness{
				root:     filepath.Join(root, mode),
				runner:   NewRunner(Config{BinDir: filepath.Join(venv, "bin"), KillGrace: 2 * time.Second, WarmStart: warm}),
				endpoint: endpoint,
				runStart: time.Now(),
				tasks:    tasks,
				warm:     warm,
			}
			t.Cleanup(h.runner.Close)
			if warm {
				waitWarm(t, h.runner, h.env(t, "ready", tasks[0], false, nil).Environ())
				if got := h.runner.WarmStats().Preimports; got != warmModeSDK {
					t.Errorf("the warm server pre-imported %q, want the SDK itself", got)
				}
			}
			runSDKCases(t, h)
		})
	}
}

func runSDKCases(t *testing.T, h *sdkHarness) {

	cases := []struct {
		name, task string
		// child: pass the input as a child's full inputs.pb path instead of
		// a root's directory.
		child bool
		// drop removes contract variables, to pin down what the runtime needs.
		drop  []string
		check func(t *testing.T, r sdkResult)
	}{
		{"add", "add", false, nil, func(t *testing.T, r sdkResult) {
			outs := r.succeeded(t)
			if len(outs.GetLiterals()) != 1 || outs.GetLiterals()[0].GetName() != "o0" ||
				outs.GetLiterals()[0].GetValue().GetScalar().GetPrimitive().GetInteger() != 7 {
				t.Errorf("outputs %v, want o0 = 7", outs)
			}
		}},
		{"recoverable user error", "boom", true, nil, func(t *testing.T, r sdkResult) {
			r.exitedZero(t) // handled failures exit 0: the error is in error.pb
			e := r.res.Error
			if r.res.Outcome != contract.Failed || e.Kind != machine.KindUser || !e.Recoverable ||
				e.Code != "ValueError" || !strings.Contains(e.Message, "boom goes the task with 3 and 4") {
				t.Fatalf("outcome %s, error %v", r.res.Outcome, e)
			}
			// retries=2 on the task: the machine retries.
			p := machine.PolicyFor(r.spec.GetTaskTemplate().GetMetadata(), machine.DefaultMaxSystemRetries)
			_, d, err := machine.Transition(machine.State{Phase: phase.Running, Attempt: 1}, r.res.Event(1), p)
			if rt, ok := d.(*machine.Retry); err != nil || !ok || rt.Attempt != 2 || rt.System {
				t.Errorf("decision %v (%v), want a user retry", d, err)
			}
		}},
		{"non-recoverable user error", "fatal", false, nil, func(t *testing.T, r sdkResult) {
			r.exitedZero(t)
			e := r.res.Error
			if r.res.Outcome != contract.Failed || e.Kind != machine.KindUser || e.Recoverable ||
				e.Code != "NonRecoverableError" || !strings.Contains(e.Message, "cannot recover from this") {
				t.Fatalf("outcome %s, error %v", r.res.Outcome, e)
			}
			p := machine.PolicyFor(r.spec.GetTaskTemplate().GetMetadata(), machine.DefaultMaxSystemRetries)
			_, d, err := machine.Transition(machine.State{Phase: phase.Running, Attempt: 1}, r.res.Event(1), p)
			if term, ok := d.(*machine.Terminal); err != nil || !ok || term.Phase != phase.Failed {
				t.Errorf("decision %v (%v), want FAILED despite retries=2", d, err)
			}
		}},
		// The SDK's background loop (which a warm server imports but does
		// not start) is the attempt's own and runs.
		{"background loop", "loopcheck", false, nil, func(t *testing.T, r sdkResult) {
			outs := r.succeeded(t)
			if len(outs.GetLiterals()) != 1 {
				t.Fatalf("outputs %v, want one", outs)
			}
			if got := outs.GetLiterals()[0].GetValue().GetScalar().GetPrimitive().GetStringValue(); got != "ok" {
				t.Errorf("the task's check of its background loop: %q", got)
			}
		}},
		// What the runtime requires: without _U_RUN_BASE click stops with a
		// usage error (exit 2, no error.pb) ...
		{"without run base", "add", false, []string{contract.EnvRunBase}, func(t *testing.T, r sdkResult) {
			if r.st.Code != contract.UsageExitCode || r.res.Outcome != contract.Failed ||
				r.res.Error.Code != contract.CodeUsageError || r.res.Error.Recoverable ||
				!strings.Contains(r.res.Error.Message, "--run-base-dir") {
				t.Errorf("exit %+v, result %s %v", r.st, r.res.Outcome, r.res.Error)
			}
		}},
		// ... and without FSSPEC_FILE auto_mkdir it cannot create the output
		// directory it writes outputs.pb into: it crashes without error.pb.
		{"without fsspec auto_mkdir", "add", false, []string{contract.EnvFSSpecFile}, func(t *testing.T, r sdkResult) {
			if r.st.Code == 0 || r.res.Outcome != contract.Crashed || !strings.Contains(r.res.Error.Message, "FileNotFoundError") {
				t.Errorf("exit %+v, result %s %v", r.st, r.res.Outcome, r.res.Error)
			}
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := h.run(t, fmt.Sprintf("r%d", i), tc.task, tc.child, tc.drop)
			// Without FSSPEC_FILE the imports would have configured fsspec
			// differently: that attempt starts plainly.
			if want := h.warm && !slices.Contains(tc.drop, contract.EnvFSSpecFile); r.warm != want {
				t.Errorf("warm-started = %v, want %v", r.warm, want)
			}
			tc.check(t, r)
		})
	}
}

type sdkTask struct {
	name     string
	spec     *task.TaskSpec
	inputDir string
}

type sdkHarness struct {
	root     string
	runner   *Runner
	endpoint string
	runStart time.Time
	tasks    []sdkTask
	warm     bool // the runner warm-starts a0
}

type sdkResult struct {
	spec   *task.TaskSpec
	st     ExitStatus
	res    contract.Result
	outDir string
	warm   bool
}

// succeeded checks the attempt succeeded and returns the outputs it wrote.
func (r sdkResult) succeeded(t *testing.T) *task.Outputs {
	t.Helper()
	r.exitedZero(t)
	if r.res.Outcome != contract.Succeeded {
		t.Fatalf("outcome %s: %v", r.res.Outcome, r.res.Error)
	}
	b, err := os.ReadFile(filepath.Join(r.outDir, runlayout.OutputsFile))
	if err != nil {
		t.Fatal(err)
	}
	outs := &task.Outputs{}
	if err := proto.Unmarshal(b, outs); err != nil {
		t.Fatal(err)
	}
	return outs
}

func (r sdkResult) exitedZero(t *testing.T) {
	t.Helper()
	if r.st.Code != 0 || r.st.Signal != "" {
		t.Fatalf("a0 ended %+v", r.st)
	}
}

// run renders the task's argv and environment with the contract for attempt 1
// of action a0 of run runName (plus the variables extra), runs it and
// classifies the result.
func (h *sdkHarness) run(t *testing.T, runName, taskName string, child bool, drop []string, extra ...string) sdkResult {
	t.Helper()
	var tk sdkTask
	for _, x := range h.tasks {
		if x.name == taskName {
			tk = x
		}
	}
	if tk.spec == nil {
		t.Fatalf("no task %s", taskName)
	}
	args, values := h.args(tk, runName, child)
	kept := h.env(t, runName, tk, child, drop)
	t.Logf("argv: %q", args)
	t.Logf("env: %s", kept)

	a := attempt{dir: filepath.Join(h.root, "work", runName, "1"), log: filepath.Join(h.root, "logs", runName, "1.log")}
	p, err := h.runner.Start(Spec{Args: args, Env: append(kept.Environ(), extra...), Dir: a.dir, LogPath: a.log, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	st := p.Wait()
	t.Cleanup(func() {
		if t.Failed() {
			lines, _ := ReadLog(a.log)
			for _, l := range lines {
				t.Logf("%s %s", l.Stream, l.Message)
			}
		}
	})
	res, err := contract.ClassifyDir(values.OutputPrefix, st.Contract())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exit %d %s: %s %v", st.Code, st.Signal, res.Outcome, res.Error)
	if len(drop) == 0 {
		lines, _ := ReadLog(a.log)
		if !containsMsg(lines, Stderr, "Flyte runtime started for action a0 with run name "+runName) &&
			!containsMsg(lines, Stdout, "Flyte runtime started for action a0 with run name "+runName) {
			t.Error("the runtime's start line is not in the log")
		}
		// The runtime extracted the bundle into the attempt's own cwd.
		if _, err := os.Stat(filepath.Join(a.dir, "tmod.py")); err != nil {
			t.Errorf("bundle not extracted into the working dir: %v", err)
		}
	}
	return sdkResult{spec: tk.spec, st: st, res: res, outDir: values.OutputPrefix, warm: p.Warm()}
}

const sdkAction, sdkAttempt = "a0", 1

// args renders the task's argv for attempt 1 of action a0 of run runName.
func (h *sdkHarness) args(tk sdkTask, runName string, child bool) ([]string, contract.Values) {
	inputURI := tk.inputDir
	if child {
		inputURI = filepath.Join(tk.inputDir, runlayout.InputsFile)
	}
	runBase := filepath.Join(h.root, "data", "p", "d", runName)
	values := contract.ValuesFor(inputURI, runBase, "", runName, sdkAction, sdkAttempt, h.runStart)
	return contract.RenderArgs(tk.spec.GetTaskTemplate().GetContainer().GetArgs(), values), values
}

// env is the contract's environment for that attempt, without drop.
func (h *sdkHarness) env(t *testing.T, runName string, tk sdkTask, child bool, drop []string) contract.Env {
	t.Helper()
	tmpl := tk.spec.GetTaskTemplate()
	runBase := filepath.Join(h.root, "data", "p", "d", runName)
	env, err := contract.BuildEnv(contract.EnvSpec{
		Host:       os.Environ(),
		TaskEnv:    tmpl.GetContainer().GetEnv(),
		Org:        "", // what the SDK sends from localhost: becomes "local"
		Project:    "p",
		Domain:     "d",
		RunName:    runName,
		ActionName: sdkAction,
		Attempt:    sdkAttempt,
		RunBase:    runBase,
		Endpoint:   h.endpoint,
		TaskID:     tmpl.GetId(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var kept contract.Env
	for _, kv := range env {
		if !slices.Contains(drop, kv.Key) {
			kept = append(kept, kv)
		}
	}
	return kept
}
