package local

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
	"fmgr.dev/internal/testkit"
)

// runSpec creates a run whose root is spec.
func (h *harness) runSpec(name string, spec *task.TaskSpec) store.ActionKey {
	h.t.Helper()
	_, err := h.state.CreateRun(h.ctx, &workflow.CreateRunRequest{
		Id:   &workflow.CreateRunRequest_RunId{RunId: &common.RunIdentifier{Project: "p", Domain: "development", Name: name}},
		Task: &workflow.CreateRunRequest_TaskSpec{TaskSpec: spec},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return store.RunKey{Project: "p", Domain: "development", RunName: name}.Action(store.RootName)
}

// withMemory declares a memory request, as the SDK's Resources(memory=...)
// does.
func withMemory(spec *task.TaskSpec, quantity string) *task.TaskSpec {
	spec.GetTaskTemplate().GetContainer().Resources = &core.Resources{Requests: []*core.Resources_ResourceEntry{
		{Name: core.Resources_MEMORY, Value: quantity},
	}}
	return spec
}

// An attempt's detached processes (a setsid and a double fork whose parents
// exit at once) die with it, whether it ends on its own or is aborted, and
// before its end is recorded.
func TestDetachedProcessesDieWithTheAction(t *testing.T) {
	h := newHarness(t, "sqlite://"+t.TempDir()+"/manager.db")
	h.driver()
	detach := `setsid sh -c 'sleep 300 </dev/null >/dev/null 2>&1 & echo $! > "$SHARED/$0.setsid"' "$7" &
( sleep 300 </dev/null >/dev/null 2>&1 & echo $! > "$SHARED/$7.double" ) &
while [ ! -s "$SHARED/$7.setsid" ] || [ ! -s "$SHARED/$7.double" ]; do sleep 0.01; done
`
	pids := func(key store.ActionKey) []int {
		var out []int
		for _, f := range []string{".setsid", ".double"} {
			name := key.Name + f
			testkit.Eventually(t, name, 30*time.Second, func() bool { return atoi(h.readShared(name)) > 0 })
			out = append(out, atoi(h.readShared(name)))
		}
		return out
	}

	done := h.run("detach-done", detach+succeed, taskOpts{})
	h.terminal(done, phase.Succeeded, time.Minute)
	for _, pid := range pids(done) {
		if alive(pid) {
			t.Errorf("pid %d outlived its attempt, which succeeded", pid)
		}
	}

	aborted := h.run("detach-abort", detach+"exec sleep 300", taskOpts{})
	h.wait(aborted, "RUNNING", time.Minute, func(a *store.Action) bool { return a.Phase == phase.Running })
	left := pids(aborted)
	if err := h.state.Abort(h.ctx, aborted, "stop", "test"); err != nil {
		t.Fatal(err)
	}
	h.terminal(aborted, phase.Aborted, time.Minute)
	for _, pid := range left {
		if alive(pid) {
			t.Errorf("pid %d outlived its attempt, which was aborted", pid)
		}
	}
}

// A task that declares 200Mi and takes 600 MB fails as the user's OOM;
// within its limit it succeeds.
func TestMemoryLimitFailsTheActionAsOOM(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("needs python3")
	}
	h := newHarness(t, "sqlite://"+t.TempDir()+"/manager.db")
	// The system's python3 may live where other users cannot reach it
	// (pyenv under /root): its tasks run as the manager.
	d := h.driver(func(c *config.LocalExecutor) { c.RunAs.Mode = config.RunAsManager })
	if !d.runner.Cgroups() || os.Geteuid() != 0 {
		t.Skipf("this host gives attempts no cgroup: %s", d.runner.Containment())
	}
	alloc := func(mib int) string {
		return fmt.Sprintf(`%s -c 'b = b"x" * (%d << 20); print("allocated", len(b))' && %s`, python, mib, succeed)
	}

	over := h.runSpec("oom", withMemory(h.spec("oom", alloc(600), taskOpts{}), "200Mi"))
	a := h.terminal(over, phase.Failed, time.Minute)
	e := execErr(a.ErrorInfo)
	if e.GetKind() != core.ExecutionError_USER || e.GetCode() != attempt.CodeOOMKilled || !strings.Contains(e.GetMessage(), "memory limit of 200Mi") {
		t.Errorf("error %v, want the user's OOMKilled naming the 200Mi limit", e)
	}
	if a.Attempts != 1 {
		t.Errorf("%d attempts without retries", a.Attempts)
	}

	within := h.runSpec("fits", withMemory(h.spec("fits", alloc(50), taskOpts{}), "200Mi"))
	h.terminal(within, phase.Succeeded, time.Minute)

	bad := h.runSpec("badmem", withMemory(h.spec("badmem", succeed, taskOpts{}), "lots"))
	a = h.terminal(bad, phase.Failed, time.Minute)
	if e := execErr(a.ErrorInfo); e.GetKind() != core.ExecutionError_USER || !strings.Contains(e.GetMessage(), `memory resource "lots"`) {
		t.Errorf("bad quantity: error %v", e)
	}
}
