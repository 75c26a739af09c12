package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/sdktest"
	"fmgr.dev/internal/store"
	"fmgr.dev/internal/testkit"
)

// sdkVenv is the virtualenv with the pinned flyte SDK (see sdktest.Venv).
func sdkVenv(t *testing.T) string { return sdktest.Venv(t) }

// TestRealSDKRuntime runs tasks serialised by the real SDK through the
// driver and the real `a0` runtime: a run created through the run state,
// executed, classified and recorded.
func TestRealSDKRuntime(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Python processes")
	}
	venv := sdkVenv(t)
	h := newHarness(t, "sqlite://"+filepath.Join(t.TempDir(), "manager.db"))

	// The SDK packs a bundle and serialises the tasks (the same preparation
	// the process package's runtime test uses).
	tasks := sdktest.PrepareTasks(t, "process/testdata/sdk_task.py", filepath.Join(testkit.TaskDir(t), "sdk"), "--x", "3", "--y", "4")
	create := func(run, name string) store.ActionKey {
		t.Helper()
		e := tasks[name]
		_, err := h.state.CreateRun(h.ctx, &workflow.CreateRunRequest{
			Id:           &workflow.CreateRunRequest_RunId{RunId: &common.RunIdentifier{Project: "p", Domain: "development", Name: run}},
			Task:         &workflow.CreateRunRequest_TaskSpec{TaskSpec: e.Spec},
			InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: e.Inputs(t)},
		})
		if err != nil {
			t.Fatal(err)
		}
		return store.RunKey{Project: "p", Domain: "development", RunName: run}.Action(store.RootName)
	}

	d := h.driver(func(c *config.LocalExecutor) { c.Python = filepath.Join(venv, "bin") })
	add := create("rsdkadd", "add")
	boom := create("rsdkboom", "boom")

	a := h.terminal(add, phase.Succeeded, 3*time.Minute)
	atts := h.attempts(add)
	b, err := os.ReadFile(filepath.Join(atts[0].OutputURI, runlayout.OutputsFile))
	if err != nil {
		t.Fatal(err)
	}
	var outs task.Outputs
	if err := proto.Unmarshal(b, &outs); err != nil {
		t.Fatal(err)
	}
	if a.Attempts != 1 || len(outs.GetLiterals()) != 1 || outs.GetLiterals()[0].GetName() != "o0" ||
		outs.GetLiterals()[0].GetValue().GetScalar().GetPrimitive().GetInteger() != 7 {
		t.Errorf("outputs %v, want o0 = 7", &outs)
	}
	// Its log holds the runtime's own start line.
	var lines []string
	if err := d.Logs(h.ctx, add, 1, false, func(ls []*dataplane.LogLine) error {
		for _, l := range ls {
			lines = append(lines, l.GetMessage())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(lines, "\n"), "Flyte runtime started for action a0 with run name rsdkadd") {
		t.Errorf("the runtime's start line is not in the log:\n%s", strings.Join(lines, "\n"))
	}

	// A task raising ValueError with retries=2: three attempts, then FAILED
	// with the user's error.
	a = h.terminal(boom, phase.Failed, 3*time.Minute)
	e := execErr(a.ErrorInfo)
	if a.Attempts != 3 || e.GetCode() != "ValueError" || e.GetKind() != core.ExecutionError_USER ||
		!strings.Contains(e.GetMessage(), "boom goes the task with 3 and 4") {
		t.Errorf("boom: %d attempts, error %v", a.Attempts, e)
	}
}
