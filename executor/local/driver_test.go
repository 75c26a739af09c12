package local

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/local/process"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/loglink"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

const succeed = `cp "$FIXTURES/outputs.pb" "$2/outputs.pb"`

func TestSuccess(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		d := h.driver()
		reg := prometheus.NewRegistry()
		if err := d.RegisterMetrics(reg); err != nil {
			t.Fatal(err)
		}
		// The script records its argv, cwd and the contract environment.
		script := `for a in "$@"; do echo "arg=$a"; done > "$SHARED/args"
pwd > "$SHARED/cwd"
echo "returned by the task" > returned.txt
env | grep -E '^(_U_|RUN_NAME|ACTION_NAME|FLYTE_ATTEMPT_NUMBER|FLYTE_INTERNAL_EXECUTION_PROJECT|RUNLEVEL|TASKLEVEL)' | sort > "$SHARED/env"
echo "hello from the task"; echo "to stderr" >&2
` + succeed
		key := h.run("rsucc", script, taskOpts{env: map[string]string{"TASKLEVEL": "task"}, runEnv: map[string]string{"RUNLEVEL": "run"}})
		a := h.terminal(key, phase.Succeeded, 20*time.Second)

		out := runstate.OutputDir(a, 1)
		atts := h.attempts(key)
		if len(atts) != 1 || atts[0].OutputURI != out || atts[0].Phase != phase.Succeeded || len(atts[0].LogInfo) == 0 {
			t.Fatalf("attempts %+v, want one SUCCEEDED with output %s and log info", atts, out)
		}
		tl := &core.TaskLog{}
		// Its link is the manager's log endpoint of the attempt, rooted (the
		// read side puts each client's base URL in front).
		if err := proto.Unmarshal(atts[0].LogInfo, tl); err != nil || tl.GetName() != "logs" || tl.GetUri() != loglink.Path(runstate.LogAttempt(key, 1)) {
			t.Errorf("log info %v (%v)", tl, err)
		}
		if got := h.phases(key, 1); !slices.Equal(got, []string{"QUEUED", "INITIALIZING", "RUNNING", "SUCCEEDED"}) {
			t.Errorf("phases %v", got)
		}
		if _, err := os.Stat(filepath.Join(out, runlayout.OutputsFile)); err != nil {
			t.Error(err)
		}

		// argv: every template rendered.
		root, _ := h.st.Actions.Get(h.ctx, key)
		args := strings.Split(strings.TrimSpace(h.readShared("args")), "\n")
		want := []string{
			"arg=" + root.InputURI + "/inputs.pb",
			"arg=" + out,
			"arg=" + out + "/raw",
			"arg=" + out + "/_flytecheckpoints",
			`arg=""`,
			"arg=rsucc",
			"arg=a0",
			"arg=" + root.CreatedAt.UTC().Format(time.RFC3339),
		}
		if !slices.Equal(args, want) {
			t.Errorf("argv\n got %q\nwant %q", args, want)
		}
		// Its own working directory.
		dir, _ := attemptDir(h.workDir, key, 1)
		if cwd := strings.TrimSpace(h.readShared("cwd")); cwd != filepath.Join(dir, cwdDir) {
			t.Errorf("cwd %q", cwd)
		}
		env := h.readShared("env")
		for _, kv := range []string{
			"_U_RUN_BASE=" + root.RunOutputBase, "_U_ORG_NAME=local", "_U_EP_OVERRIDE=localhost:1",
			"_U_INSECURE=true", "_U_USE_ACTIONS=1", "RUN_NAME=rsucc", "ACTION_NAME=a0",
			"FLYTE_ATTEMPT_NUMBER=0", "FLYTE_INTERNAL_EXECUTION_PROJECT=p", "RUNLEVEL=run", "TASKLEVEL=task",
		} {
			if !strings.Contains(env, kv+"\n") {
				t.Errorf("env lacks %s:\n%s", kv, env)
			}
		}
		// The process record is there; once the driver has stopped (and so
		// is done with the attempt), what the task wrote in its working directory is still
		// there (a File it returned with file:// storage points at it).
		if _, ok, err := readIdentity(dir); !ok || err != nil {
			t.Errorf("process.json: %v %v", ok, err)
		}
		if err := d.Stop(h.ctx); err != nil { // its workers are done with the attempt
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, cwdDir, "returned.txt")); err != nil || string(b) != "returned by the task\n" {
			t.Errorf("the file the task wrote in its working directory: %q, %v", b, err)
		}
		if n := testutil.ToFloat64(d.metrics.started); n != 1 {
			t.Errorf("started %v", n)
		}
		if n := testutil.ToFloat64(d.metrics.ended.WithLabelValues("succeeded")); n != 1 {
			t.Errorf("succeeded %v", n)
		}
		if n, err := testutil.GatherAndCount(reg); err != nil || n < 5 {
			t.Errorf("gathered %d metrics (%v)", n, err)
		}
	})
}

func TestRecoverableErrorsAreRetried(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		h.driver()
		script := `if [ "$FLYTE_ATTEMPT_NUMBER" -lt 2 ]; then cp "$FIXTURES/recoverable.pb" "$2/error.pb"; exit 0; fi
echo "prev=$5" > "$SHARED/prev"
` + succeed
		key := h.run("rretry", script, taskOpts{retries: 2})
		a := h.terminal(key, phase.Succeeded, 30*time.Second)
		atts := h.attempts(key)
		if a.Attempts != 3 || len(atts) != 3 {
			t.Fatalf("%d attempts, want 3", len(atts))
		}
		for i, at := range atts[:2] {
			e := execErr(at.ErrorInfo)
			if at.Phase != phase.Failed || e.GetCode() != "ValueError" || e.GetMessage() != "try again" ||
				e.GetKind() != core.ExecutionError_USER || e.GetRecoverability() != core.ContainerError_RECOVERABLE ||
				e.GetErrorUri() != runstate.OutputDir(a, int32(i+1))+"/error.pb" {
				t.Errorf("attempt %d: %s %v", i+1, at.Phase.String(), e)
			}
			if got := h.phases(key, int32(i+1)); !slices.Equal(got, []string{"QUEUED", "INITIALIZING", "RUNNING", "FAILED"}) {
				t.Errorf("attempt %d phases %v", i+1, got)
			}
		}
		if atts[2].Phase != phase.Succeeded || atts[2].OutputURI != runstate.OutputDir(a, 3) {
			t.Errorf("attempt 3: %+v", atts[2])
		}
		if got := h.phases(key, 3); !slices.Equal(got, []string{"QUEUED", "INITIALIZING", "RUNNING", "SUCCEEDED"}) {
			t.Errorf("attempt 3 phases %v", got)
		}
		if prev := strings.TrimSpace(h.readShared("prev")); prev != "prev="+runstate.OutputDir(a, 2)+"/_flytecheckpoints" {
			t.Errorf("previous checkpoint %q", prev)
		}
	})
}

// A SYSTEM error the task reports itself is retried within the task's own
// retries, not capped by the platform's system budget (2 in the harness).
func TestReportedSystemErrorsUseTheTaskRetries(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		h.driver()
		script := `if [ "$FLYTE_ATTEMPT_NUMBER" -lt 4 ]; then cp "$FIXTURES/system.pb" "$2/error.pb"; exit 0; fi
` + succeed
		key := h.run("rsystem", script, taskOpts{retries: 5})
		a := h.terminal(key, phase.Succeeded, 60*time.Second)
		atts := h.attempts(key)
		if a.Attempts != 5 || len(atts) != 5 {
			t.Fatalf("%d attempts, want 5: four reported system errors, retried within retries=5", len(atts))
		}
		for _, at := range atts[:4] {
			if e := execErr(at.ErrorInfo); at.Phase != phase.Failed || e.GetKind() != core.ExecutionError_SYSTEM || e.GetCode() != "RuntimeSystemError" {
				t.Errorf("attempt %d: %s %v, want FAILED with the task's SYSTEM error", at.Attempt, at.Phase, e)
			}
		}
	})
}

func TestNonRecoverableErrorFailsAtOnce(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		h.driver()
		key := h.run("rfatal", `cp "$FIXTURES/fatal.pb" "$2/error.pb"`, taskOpts{retries: 2})
		a := h.terminal(key, phase.Failed, 20*time.Second)
		e := execErr(a.ErrorInfo)
		if a.Attempts != 1 || e.GetCode() != "NonRecoverableError" || e.GetMessage() != "cannot recover from this" ||
			e.GetKind() != core.ExecutionError_USER || e.GetRecoverability() != core.ContainerError_NON_RECOVERABLE {
			t.Fatalf("attempts %d, error %v", a.Attempts, e)
		}
		// The API view: ActionUpdate carries the error and the output dir.
		out, _ := h.state.Details(h.ctx, a)
		if out.GetErrorInfo().GetKind().String() != "KIND_USER" || !strings.Contains(out.GetErrorInfo().GetMessage(), "cannot recover") {
			t.Errorf("details %v", out.GetErrorInfo())
		}
	})
}

// A task process that dies without an error file, or exits 0 without
// outputs, failed by itself: the crash is paid from the task's own retries
// (retries=0 runs it exactly once, whatever the system budget), and the
// error is the user's.
func TestCrashesUseTheTaskRetries(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		h.driver() // SystemRetries 2: a crash must not use them
		count := func(name string) string { return `echo x >> "$SHARED/` + name + `.runs"; ` }
		cases := []struct {
			run, script string
			retries     uint32
			attempts    int32
			code, msg   string
		}{
			{"rexit1", count("rexit1") + `echo "going down"; exit 1`, 0, 1, machine.CodeCrashed, "exited with code 1"},
			{"rnoout", count("rnoout") + `exit 0`, 0, 1, contract.CodeOutputsMissing, "without writing outputs.pb"},
			{"rearlyabrt", count("rearlyabrt") + `kill -ABRT $$`, 0, 1, machine.CodeCrashed, "killed by signal aborted"},
			{"rretried", count("rretried") + `echo "going down"; exit 3`, 2, 3, machine.CodeCrashed, "going down"},
		}
		keys := map[string]store.ActionKey{}
		for _, tc := range cases {
			keys[tc.run] = h.run(tc.run, tc.script, taskOpts{retries: tc.retries})
		}
		for _, tc := range cases {
			a := h.terminal(keys[tc.run], phase.Failed, 30*time.Second)
			e := execErr(a.ErrorInfo)
			if a.Attempts != tc.attempts || e.GetCode() != tc.code || e.GetKind() != core.ExecutionError_USER || !strings.Contains(e.GetMessage(), tc.msg) {
				t.Errorf("%s: attempts %d, error %v; want %d attempts, a USER %s containing %q", tc.run, a.Attempts, e, tc.attempts, tc.code, tc.msg)
			}
			if runs := strings.Count(h.readShared(tc.run+".runs"), "x"); runs != int(tc.attempts) {
				t.Errorf("%s: the task ran %d times, want %d", tc.run, runs, tc.attempts)
			}
			for _, at := range h.attempts(keys[tc.run]) {
				if k := execErr(at.ErrorInfo).GetKind(); k != core.ExecutionError_USER {
					t.Errorf("%s attempt %d: error kind %s", tc.run, at.Attempt, k)
				}
			}
		}
	})
}

// The SDK's runtime sometimes dies of SIGABRT at interpreter shutdown after it
// wrote outputs.pb (or error.pb): the task ended, and is recorded from the
// file with a warning that names the signal, not run again.
func TestDeathAfterTheResultIsRecordedFromTheFile(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		h.driver()
		ok := h.run("rabrtok", succeed+`; echo x >> "$SHARED/ok.runs"; kill -ABRT $$`, taskOpts{retries: 2})
		bad := h.run("rabrterr", `cp "$FIXTURES/fatal.pb" "$2/error.pb"; echo x >> "$SHARED/err.runs"; kill -ABRT $$`, taskOpts{retries: 2})
		torn := h.run("rabrttorn", `head -c 5 "$FIXTURES/outputs.pb" > "$2/outputs.pb"; echo x >> "$SHARED/torn.runs"; kill -ABRT $$`, taskOpts{})

		a := h.terminal(ok, phase.Succeeded, 30*time.Second)
		if a.Attempts != 1 || h.readShared("ok.runs") != "x\n" {
			t.Errorf("outputs then SIGABRT: %d attempts, runs %q", a.Attempts, h.readShared("ok.runs"))
		}
		lines, err := process.ReadLog(h.logPath(ok, 1))
		if err != nil {
			t.Fatal(err)
		}
		warned := slices.ContainsFunc(lines, func(l process.Line) bool {
			return l.Stream == process.System && strings.Contains(l.Message, "warning:") && strings.Contains(l.Message, "signal aborted")
		})
		if !warned {
			t.Errorf("the attempt's log has no warning naming the signal: %+v", lines)
		}

		a = h.terminal(bad, phase.Failed, 30*time.Second)
		if e := execErr(a.ErrorInfo); a.Attempts != 1 || e.GetCode() != "NonRecoverableError" || h.readShared("err.runs") != "x\n" {
			t.Errorf("error file then SIGABRT: %d attempts, error %v", a.Attempts, e)
		}

		// A file cut short is not a result: that death is a crash.
		a = h.terminal(torn, phase.Failed, 30*time.Second)
		if e := execErr(a.ErrorInfo); a.Attempts != 1 || e.GetCode() != machine.CodeCrashed || e.GetKind() != core.ExecutionError_USER {
			t.Errorf("torn outputs then SIGABRT: %d attempts, error %v", a.Attempts, e)
		}
	})
}

func TestTimeouts(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		h.driver(func(c *config.LocalExecutor) { c.MaxParallelism = 1 })
		check := func(key store.ActionKey, code, msg string) {
			t.Helper()
			a := h.terminal(key, phase.TimedOut, 30*time.Second)
			e := execErr(a.ErrorInfo)
			if a.Attempts != 1 || e.GetCode() != code || !strings.Contains(e.GetMessage(), msg) {
				t.Errorf("%s: attempts %d, error %v", key.RunName, a.Attempts, e)
			}
		}
		// The run time: the process tree is stopped.
		key := h.run("rtime", `echo $$ > "$SHARED/pid"; sleep 60`, taskOpts{retries: 2, timeout: time.Second})
		h.wait(key, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == phase.Running })
		// Waiting too long for the only slot, held by rtime.
		queued := h.run("rqueued", `touch "$SHARED/queued-ran"`, taskOpts{queued: 300 * time.Millisecond})
		check(queued, machine.CodeQueuedTimeout, "queued timeout of 300ms")
		check(key, machine.CodeMaxRuntime, "timeout of 1s")
		if pid := atoi(h.readShared("pid")); pid == 0 || alive(pid) {
			t.Errorf("task process %d still alive", pid)
		}
		if _, err := os.Stat(h.sharedFile("queued-ran")); err == nil {
			t.Error("the queued action ran")
		}
		// The action's deadline binds before the run time does.
		dl := h.run("rdeadline", `sleep 60`, taskOpts{timeout: time.Minute, deadline: time.Second})
		check(dl, machine.CodeDeadline, "deadline")
	})
}

func TestTaskTypesWithoutAContainerFail(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		h.driver()
		// The API refuses such specs, so write the action directly, as a
		// deployed plugin task could arrive.
		spec := &task.TaskSpec{TaskTemplate: &core.TaskTemplate{
			Id:   &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "p", Domain: "d", Name: "t.sleep", Version: "v1"},
			Type: "core-sleep",
		}}
		raw, _ := proto.Marshal(spec)
		run := store.RunKey{Project: "p", Domain: "d", RunName: "rplugin"}
		rs, _ := proto.Marshal(&task.RunSpec{})
		if _, _, err := h.st.Projects.EnsureExists(h.ctx, "", "p"); err != nil {
			t.Fatal(err)
		}
		a, err := h.st.Actions.CreateRun(h.ctx, store.NewAction{
			Key: run.Action(store.RootName), ActionType: store.ActionTypeTask, TaskType: "core-sleep",
			Task: store.TaskID{Project: "p", Domain: "d", Name: "t.sleep", Version: "v1"},
			Spec: raw, InputURI: h.blobs.URI("runs/_/p/d/rplugin/inputs"), RunOutputBase: h.blobs.URI("runs/_/p/d/rplugin"), RunSpec: rs,
		})
		if err != nil {
			t.Fatal(err)
		}
		// No Submit: the resync scan finds it.
		a = h.terminal(a.ActionKey, phase.Failed, 20*time.Second)
		e := execErr(a.ErrorInfo)
		if a.Attempts != 1 || e.GetCode() != attempt.CodeUnsupportedTask || !strings.Contains(e.GetMessage(), `"core-sleep"`) ||
			e.GetRecoverability() != core.ContainerError_NON_RECOVERABLE {
			t.Fatalf("attempts %d, error %v", a.Attempts, e)
		}
	})
}

func TestLogs(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		d := h.driver()
		script := `echo first; echo second >&2; while [ ! -e "$SHARED/go" ]; do sleep 0.05; done; echo third; ` + succeed
		key := h.run("rlogs", script, taskOpts{})
		h.wait(key, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == phase.Running })

		if err := d.Logs(h.ctx, key, 2, false, func([]*dataplane.LogLine) error { return nil }); !errors.Is(err, errs.ErrNotFound) {
			t.Errorf("logs of an attempt that never started: %v", err)
		}

		// Follow the running attempt: the lines printed so far, then the
		// rest as they come, then the end.
		got := make(chan string, 100)
		done := make(chan error, 1)
		go func() {
			done <- d.Logs(h.ctx, key, 0, true, func(lines []*dataplane.LogLine) error {
				for _, l := range lines {
					if l.GetOriginator() == dataplane.LogLineOriginator_USER {
						got <- strings.TrimSuffix(l.GetMessage(), "\n")
					}
				}
				return nil
			})
		}()
		var early []string // the two streams are read independently: either order
		for range 2 {
			select {
			case m := <-got:
				early = append(early, m)
			case <-time.After(10 * time.Second):
				t.Fatalf("got %q while following, want first and second", early)
			}
		}
		if slices.Sort(early); !slices.Equal(early, []string{"first", "second"}) {
			t.Fatalf("got %q while following, want first and second", early)
		}
		select {
		case err := <-done:
			t.Fatalf("follow ended while the attempt runs: %v", err)
		default:
		}
		// The third line is printed only after "go": receiving it proves
		// the follow outlived the first two lines.
		writeFile(t, h.sharedFile("go"), "", 0o644)
		select {
		case m := <-got:
			if m != "third" {
				t.Fatalf("line %q, want third", m)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no third line while following")
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("follow did not end with the attempt")
		}
		h.terminal(key, phase.Succeeded, 20*time.Second)

		// A finished attempt: the whole log, system lines included.
		var user, system []string
		err := d.Logs(h.ctx, key, 1, true, func(lines []*dataplane.LogLine) error {
			for _, l := range lines {
				if l.GetTimestamp() == nil {
					t.Errorf("line without a timestamp: %v", l)
				}
				if l.GetOriginator() == dataplane.LogLineOriginator_USER {
					user = append(user, strings.TrimSuffix(l.GetMessage(), "\n"))
				} else {
					system = append(system, l.GetMessage())
				}
			}
			return nil
		})
		slices.Sort(user[:min(2, len(user))])
		if err != nil || !slices.Equal(user, []string{"first", "second", "third"}) || len(system) < 2 {
			t.Fatalf("logs %v / %v (%v)", user, system, err)
		}
	})
}

func atoi(s string) int {
	n := 0
	for _, c := range strings.TrimSpace(s) {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	return n
}
