package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/testkit"
)

// triggerMinute is how long a FixedRate minute lasts for the managers of
// these scenarios: `FixedRate(1)` fires every triggerMinute.
const triggerMinute = 2 * time.Second

const (
	stampTask = "e2e_trig.stamp"
	greetTask = "e2e_trig.greet"
)

// firing is a run a trigger made, with the kickoff time it got as input.
type firing struct {
	run     string
	kickoff time.Time
}

// firings lists the runs of stampTask with their kickoff inputs, oldest
// kickoff first.
func firings(t *testing.T, ctx context.Context, m *manager) []firing {
	t.Helper()
	client := runClient(m)
	resp, err := client.ListRuns(ctx, connect.NewRequest(&workflow.ListRunsRequest{
		// As the official console lists a trigger's runs.
		Request: &common.ListRequest{Limit: 200, Filters: []*common.Filter{
			{Field: "task_name", Function: common.Filter_EQUAL, Values: []string{stampTask}},
			{Field: "trigger_name", Function: common.Filter_EQUAL, Values: []string{"every"}},
		}},
		ScopeBy: &workflow.ListRunsRequest_ProjectId{ProjectId: projectID()},
	}))
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	var out []firing
	for _, r := range resp.Msg.GetRuns() {
		id := r.GetAction().GetId()
		data, err := client.GetActionData(ctx, connect.NewRequest(&workflow.GetActionDataRequest{ActionId: id}))
		if err != nil {
			t.Fatalf("GetActionData of %s: %v", id.GetRun().GetName(), err)
		}
		f := firing{run: id.GetRun().GetName()}
		if md := r.GetAction().GetMetadata(); md.GetTriggerName() != "every" || md.GetSource() != workflow.RunSource_RUN_SOURCE_SCHEDULE_TRIGGER ||
			md.GetTriggerId().GetName().GetTaskName() != stampTask || md.GetTriggerType().GetSchedule().GetRate() == nil {
			t.Fatalf("run %s does not say the trigger every made it: %v", f.run, md)
		}
		for _, l := range data.Msg.GetInputs().GetLiterals() {
			if l.GetName() == "kickoff" {
				f.kickoff = l.GetValue().GetScalar().GetPrimitive().GetDatetime().AsTime()
			}
		}
		if f.kickoff.IsZero() {
			t.Fatalf("run %s of the trigger has no kickoff input: %v", f.run, data.Msg.GetInputs())
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].kickoff.Before(out[j].kickoff) })
	return out
}

// waitFirings polls the runs of stampTask until there are at least n.
func waitFirings(t *testing.T, ctx context.Context, m *manager, n int) []firing {
	t.Helper()
	var got []firing
	if msg := testkit.Poll(2*time.Minute, 500*time.Millisecond, func() string {
		got = firings(t, ctx, m)
		if len(got) >= n {
			return ""
		}
		return fmt.Sprintf("%d firings so far", len(got))
	}); msg != "" {
		t.Fatalf("waiting for %d firings of the trigger: %s\nmanager:\n%s", n, msg, m.output.Tail(60))
	}
	return got
}

// checkSlots requires one run per slot: kickoff times every triggerMinute,
// none twice, none missing between the first and the last.
func checkSlots(t *testing.T, fs []firing) {
	t.Helper()
	for i := 1; i < len(fs); i++ {
		if d := fs[i].kickoff.Sub(fs[i-1].kickoff); d != triggerMinute {
			var lines []string
			for _, f := range fs {
				lines = append(lines, f.kickoff.Format(time.RFC3339Nano)+" "+f.run)
			}
			t.Fatalf("firings %d and %d are %s apart, want %s (one run per slot):\n%s", i-1, i, d, triggerMinute, strings.Join(lines, "\n"))
		}
	}
}

// deployTriggers deploys testdata/triggers with `flyte deploy` from a
// directory configured for m, and returns that directory.
func deployTriggers(t *testing.T, ctx context.Context, m *manager) string {
	t.Helper()
	dir := t.TempDir()
	cliConfig(t, ctx, m, dir)
	copyTree(t, filepath.Join("testdata", "triggers"), dir)
	out := mustFlyte(t, ctx, dir, "deploy", "trig_tasks.py", "env")
	if !strings.Contains(out, stampTask) {
		t.Fatalf("flyte deploy does not report %s:\n%s", stampTask, out)
	}
	return dir
}

// A FixedRate trigger deployed with its task by `flyte deploy` fires every
// slot once, with the slot's time as its kickoff input, also across a
// manager restart (the slots missed while it was down are made after it,
// by the catch-up policy "all"); `flyte update trigger --deactivate` stops
// it; a trigger without a schedule runs by name with an override.
// (Before triggers were built, DeployTask refused them and this failed at
// the deploy.)
func TestTriggers(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := scenarioContext(t, 10*time.Minute)
			m := startSDKManager(t, b.dsn(t), "FLYTE_MANAGER_TRIGGERS_MINUTE="+triggerMinute.String())
			deployedAt := time.Now()
			dir := deployTriggers(t, ctx, m)

			listed := mustFlyte(t, ctx, dir, "get", "trigger")
			for _, want := range []string{"every", "manual", stampTask, greetTask} {
				if !strings.Contains(listed, want) {
					t.Errorf("flyte get trigger does not list %q:\n%s", want, listed)
				}
			}
			one := mustFlyte(t, ctx, dir, "get", "trigger", stampTask, "every")
			if !strings.Contains(one, `name: "every"`) || !strings.Contains(one, "active: true") {
				t.Errorf("flyte get trigger %s every does not show an active trigger:\n%s", stampTask, one)
			}

			fs := waitFirings(t, ctx, m, 3)
			checkSlots(t, fs)
			if first := fs[0].kickoff; first.Before(deployedAt.Add(triggerMinute - time.Second)) {
				t.Errorf("the first firing is at %s, before one interval after the deploy (%s): a deploy must not fire at once", first, deployedAt)
			}
			// The run got the kickoff time and computed with it.
			if phase := waitRun(t, ctx, m, fs[0].run); phase != "SUCCEEDED" {
				t.Fatalf("run %s of the trigger ended %s", fs[0].run, phase)
			}
			out := mustFlyte(t, ctx, dir, "get", "io", fs[0].run)
			if !strings.Contains(out, "rate@") {
				t.Errorf("flyte get io %s does not show the task's output made from its kickoff input:\n%s", fs[0].run, out)
			}

			// A crash (SIGKILL, mid-pass as likely as not) and a restart: the
			// slots missed meanwhile are made, none twice.
			m.Kill()
			m.Restart()
			fs = waitFirings(t, ctx, m, len(fs)+3)
			checkSlots(t, fs)
			if n := strings.Count(m.output.String(), "trigger firing found made already"); n > 1 {
				t.Errorf("after the restart %d firings were tried twice", n)
			}

			// Deactivated: no firing after the update returned. (The
			// restarted manager listens on another port: a new config.)
			dir = t.TempDir()
			cliConfig(t, ctx, m, dir)
			mustFlyte(t, ctx, dir, "update", "trigger", "every", stampTask, "--deactivate")
			stopped := time.Now()

			// The trigger without a schedule, by name, with n overridden
			// (name keeps the trigger's value). This takes a few slots' time.
			var manual struct {
				Run    string
				Phase  string
				Output string
			}
			// The SDK reads the trigger's offloaded inputs itself to merge the
			// override into them: it needs what any client reading blobs does.
			driverWith(t, ctx, m.ClientEnv(), &manual, "drive_triggers.py", "run", sdkEndpoint(m), "manual", greetTask, "5")
			if manual.Phase != "SUCCEEDED" || manual.Output != "trigger:5" {
				t.Errorf("run of trigger manual by name: %+v, want SUCCEEDED with trigger:5", manual)
			}
			byTrigger, err := runClient(m).ListRuns(ctx, connect.NewRequest(&workflow.ListRunsRequest{
				ScopeBy: &workflow.ListRunsRequest_TriggerName{TriggerName: &common.TriggerName{
					Project: testProject, Domain: testDomain, TaskName: greetTask, Name: "manual",
				}},
			}))
			if err != nil {
				t.Fatalf("ListRuns of trigger manual: %v", err)
			}
			if runs := byTrigger.Msg.GetRuns(); len(runs) != 1 || runs[0].GetAction().GetId().GetRun().GetName() != manual.Run ||
				runs[0].GetAction().GetMetadata().GetTriggerName() != "manual" {
				t.Errorf("ListRuns of trigger manual: %v, want the run %s, made by it", runs, manual.Run)
			}
			if time.Since(stopped) < 2*triggerMinute {
				t.Logf("the run by name took only %s", time.Since(stopped))
			}
			final := firings(t, ctx, m)
			for _, f := range final {
				if f.kickoff.After(stopped) {
					t.Errorf("run %s fired at %s, after the trigger was deactivated at %s", f.run, f.kickoff, stopped)
				}
			}
			checkSlots(t, final)
			after := mustFlyte(t, ctx, dir, "get", "trigger", stampTask, "every")
			if strings.Contains(after, "active: true") {
				t.Errorf("flyte get trigger after --deactivate does not show it inactive:\n%s", after)
			}
		})
	}
}

// Two managers on one PostgreSQL database: only the executor lease's
// holder fires; when it stops, the other takes the lease and the firings
// go on, each slot once.
func TestTriggersTwoManagers(t *testing.T) {
	ctx := scenarioContext(t, 10*time.Minute)
	dsn := pgtest.NewDatabase(t)
	shared := testkit.TaskDir(t)
	env := []string{
		"FLYTE_MANAGER_STORAGE_URL=file://" + filepath.Join(shared, "blobs"),
		"FLYTE_MANAGER_STORAGE_SIGNINGKEY=e2e-triggers-shared-signing-key",
		"FLYTE_MANAGER_EXECUTOR_LOCAL_LEASETTL=5s",
		"FLYTE_MANAGER_TRIGGERS_MINUTE=" + triggerMinute.String(),
	}
	a := startSDKManager(t, dsn, env...)
	waitExecutorState(t, a, "lease holder")
	b := startSDKManager(t, dsn, env...)
	waitExecutorState(t, b, "standby")
	deployTriggers(t, ctx, b) // any manager serves the API

	fs := waitFirings(t, ctx, b, 3)
	checkSlots(t, fs)
	if n := strings.Count(b.output.String(), "trigger fired"); n != 0 {
		t.Errorf("the standby fired %d times", n)
	}
	a.Stop() // releases the lease
	waitExecutorState(t, b, "lease holder")
	fs = waitFirings(t, ctx, b, len(fs)+3)
	checkSlots(t, fs)
	for name, m := range map[string]*manager{"a": a, "b": b} {
		if n := strings.Count(m.output.String(), "trigger firing found made already"); n != 0 {
			t.Errorf("manager %s tried %d firings the other had made", name, n)
		}
	}
}

// examples/triggers.py as its docstring says to run it: `python
// examples/triggers.py` deploys it and runs a trigger by name with an
// override; then the CLI lists, activates and deletes its triggers.
func TestTriggersExample(t *testing.T) {
	ctx := scenarioContext(t, 10*time.Minute)
	m := startSDKManager(t, backends[0].dsn(t))
	dir := t.TempDir()
	cliConfig(t, ctx, m, dir)
	copyTree(t, filepath.Join("..", "examples"), filepath.Join(dir, "examples"))
	cmd := venvCommand(t, ctx, dir, "python", "examples/triggers.py")
	cmd.Env = append(cmd.Env, m.ClientEnv()...) // it reads the trigger's inputs (see TestTriggers)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python examples/triggers.py: %v\n%s", err, tailLines(string(out), 60))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if want := "Hello, trigger! Hello, trigger!"; strings.TrimSpace(lines[len(lines)-1]) != want {
		t.Fatalf("python examples/triggers.py: want the result %q last:\n%s", want, out)
	}
	listed := mustFlyte(t, ctx, dir, "get", "trigger")
	for _, want := range []string{"hourly", "every_minute", "on_demand"} {
		if !strings.Contains(listed, want) {
			t.Errorf("flyte get trigger does not list %s:\n%s", want, listed)
		}
	}
	mustFlyte(t, ctx, dir, "update", "trigger", "every_minute", "triggers_example.report", "--activate")
	got := mustFlyte(t, ctx, dir, "get", "trigger", "triggers_example.report", "every_minute")
	if !strings.Contains(got, "active: true") {
		t.Errorf("after --activate, flyte get trigger shows:\n%s", got)
	}
	mustFlyte(t, ctx, dir, "delete", "trigger", "every_minute", "triggers_example.report")
	if listed := mustFlyte(t, ctx, dir, "get", "trigger"); strings.Contains(listed, "every_minute") || !strings.Contains(listed, "hourly") {
		t.Errorf("after flyte delete trigger every_minute, flyte get trigger lists:\n%s", listed)
	}
}
