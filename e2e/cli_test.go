package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/testkit"
)

// This file holds the scenarios that drive the flyte CLI as a user types it,
// and the quick start of README.md.

var createdRun = regexp.MustCompile(`Created Run: (\S+)`)

// cliRun runs `flyte run ...` in dir and returns the new run's name.
func cliRun(t *testing.T, ctx context.Context, dir string, args ...string) string {
	t.Helper()
	out, err := flyteCLI(t, ctx, dir, append([]string{"run"}, args...)...)
	match := createdRun.FindStringSubmatch(out)
	switch {
	case err != nil && match != nil && abortedAtExit(err):
		// The run was created and named; only the client died at exit (see
		// flyteCLI). Running it again would create a second run.
		t.Logf("flyte run %s aborted at exit after naming run %s", strings.Join(args, " "), match[1])
	case err != nil:
		t.Fatal(err)
	}
	if match == nil {
		t.Fatalf("flyte run %s printed no run name:\n%s", strings.Join(args, " "), out)
	}
	return match[1]
}

// runPhase is the phase of run's root action as GetRunDetails reports it:
// the action's own current phase, not that of one of its earlier attempts.
func runPhase(t *testing.T, ctx context.Context, m *manager, run string) (common.ActionPhase, error) {
	t.Helper()
	resp, err := runClient(m).GetRunDetails(ctx, connect.NewRequest(&workflow.GetRunDetailsRequest{
		RunId: &common.RunIdentifier{Project: testProject, Domain: testDomain, Name: run},
	}))
	if err != nil {
		return 0, err
	}
	return resp.Msg.GetDetails().GetAction().GetStatus().GetPhase(), nil
}

// phaseName is the short form of an ActionPhase (SUCCEEDED).
func phaseName(p common.ActionPhase) string { return strings.TrimPrefix(p.String(), "ACTION_PHASE_") }

// waitRun polls the run's own phase until it is terminal and returns it
// (SUCCEEDED, FAILED, ...). A run that is not terminal within the deadline
// ends the test.
func waitRun(t *testing.T, ctx context.Context, m *manager, run string) string {
	t.Helper()
	var p common.ActionPhase
	if msg := testkit.Poll(5*time.Minute, time.Second, func() string {
		var err error
		if p, err = runPhase(t, ctx, m, run); err != nil {
			return "GetRunDetails: " + err.Error()
		}
		if phase.FromProto(p).Terminal() {
			return ""
		}
		return "still " + phaseName(p)
	}); msg != "" {
		t.Fatalf("run %s did not end: %s", run, msg)
	}
	return phaseName(p)
}

// jsonOutput decodes the first line of CLI output that is a JSON document
// (status lines come before it).
func jsonOutput(t *testing.T, out string, v any) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if (strings.HasPrefix(line, "[") || strings.HasPrefix(line, "{")) && json.Unmarshal([]byte(line), v) == nil {
			return
		}
	}
	t.Fatalf("no JSON document in the output:\n%s", out)
}

// cliConfig writes the SDK config a user would, with `flyte create config`,
// into dir/.flyte/config.yaml, where the CLI finds it when run in dir.
func cliConfig(t *testing.T, ctx context.Context, m *manager, dir string) {
	t.Helper()
	mustFlyte(t, ctx, dir, "create", "config", "--endpoint", sdkEndpoint(m), "--insecure", "--project", testProject, "--domain", testDomain)
	checkCLIConfig(t, m, dir)
}

// checkCLIConfig checks the config `flyte create config` wrote in dir: it
// points at m, without TLS.
func checkCLIConfig(t *testing.T, m *manager, dir string) {
	t.Helper()
	cfg, err := os.ReadFile(filepath.Join(dir, ".flyte", "config.yaml"))
	if err != nil {
		t.Fatalf("flyte create config wrote no .flyte/config.yaml: %v", err)
	}
	if !strings.Contains(string(cfg), sdkEndpoint(m)) || !strings.Contains(string(cfg), "insecure: true") {
		t.Fatalf("config written by flyte create config:\n%s", cfg)
	}
}

// checkLogs checks that `flyte get logs <run>` shows a line the task
// printed, as a line of its own. The CLI prints each LogLine.message as it
// is (rich, end=""): the SDK expects every message to end in a newline.
func checkLogs(t *testing.T, ctx context.Context, m *manager, dir, run, printed string) {
	t.Helper()
	logs := mustFlyte(t, ctx, dir, "get", "logs", run)
	switch {
	case !strings.Contains(logs, printed):
		t.Errorf("flyte get logs %s does not show what the task printed (%q):\n%s", run, printed, logs)
	case !regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(printed) + `\s*$`).MatchString(logs):
		t.Errorf("flyte get logs %s shows %q, but not on a line of its own: TailLogs must end each LogLine.message with \"\\n\" (the CLI prints messages back to back):\n%s",
			run, printed, logs)
	}
}

// cliRunEntry is a run as `flyte -of json-raw get run` lists it (the Run
// message as protobuf JSON).
type cliRunEntry struct {
	Action struct {
		ID struct {
			Run  struct{ Name string }
			Name string
		} `json:"id"`
		Status struct{ Phase string }
	}
}

// Scenario 6: the flyte CLI, as a user types it.
func testCLI(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 10*time.Minute)
	dir := t.TempDir()
	cliConfig(t, ctx, m, dir)
	copyTree(t, filepath.Join("testdata", "cli"), dir)

	run := cliRun(t, ctx, dir, "cli_tasks.py", "double", "--x", "1")
	phase := waitRun(t, ctx, m, run)
	details := mustFlyte(t, ctx, dir, "get", "run", run)
	if phase != "SUCCEEDED" {
		t.Fatalf("run %s is %s:\n%s", run, phase, details)
	}
	if !strings.Contains(details, run) || !strings.Contains(details, "e2e_cli.double") {
		t.Errorf("flyte get run %s does not name the run and its task:\n%s", run, details)
	}

	var runs []cliRunEntry
	jsonOutput(t, mustFlyte(t, ctx, dir, "-of", "json-raw", "get", "run"), &runs)
	if !slices.ContainsFunc(runs, func(r cliRunEntry) bool {
		return r.Action.ID.Run.Name == run && r.Action.Status.Phase == "ACTION_PHASE_SUCCEEDED"
	}) {
		t.Errorf("flyte get run does not list %s as succeeded: %+v", run, runs)
	}

	var actions []struct {
		ID     struct{ Name string } `json:"id"`
		Status struct{ Phase string }
	}
	jsonOutput(t, mustFlyte(t, ctx, dir, "-of", "json-raw", "get", "action", run), &actions)
	if len(actions) != 1 || actions[0].ID.Name != "a0" || actions[0].Status.Phase != "ACTION_PHASE_SUCCEEDED" {
		t.Errorf("flyte get action %s: want only a0, succeeded; got %+v", run, actions)
	}

	checkLogs(t, ctx, m, dir, run, "double got x=1")

	// Deploy the environment (by its variable name in the file), then run
	// the deployed task by name.
	deployed := mustFlyte(t, ctx, dir, "deploy", "cli_tasks.py", "env")
	if !strings.Contains(deployed, "e2e_cli.double") {
		t.Errorf("flyte deploy does not report the deployed task e2e_cli.double:\n%s", deployed)
	}
	if tasks := mustFlyte(t, ctx, dir, "-of", "json-raw", "get", "task"); !strings.Contains(tasks, `"e2e_cli.double"`) {
		t.Errorf("flyte get task does not list e2e_cli.double:\n%s", tasks)
	}
	if versions := mustFlyte(t, ctx, dir, "get", "task", "e2e_cli.double"); !strings.Contains(versions, "e2e_cli.double") {
		t.Errorf("flyte get task e2e_cli.double lists no version:\n%s", versions)
	}

	byName := cliRun(t, ctx, dir, "deployed-task", "e2e_cli.double", "--x", "21")
	if phase := waitRun(t, ctx, m, byName); phase != "SUCCEEDED" {
		details := mustFlyte(t, ctx, dir, "get", "run", byName)
		t.Fatalf("run %s of the deployed task is %s:\n%s", byName, phase, details)
	}
	io := mustFlyte(t, ctx, dir, "get", "io", byName, "--outputs-only")
	if !regexp.MustCompile(`\b42\b`).MatchString(io) {
		t.Errorf("flyte get io %s: want the output 42:\n%s", byName, io)
	}
	t.Logf("flyte get io %s --outputs-only:\n%s", byName, io)
}

// Finding 12a: a wait must read the action's own phase. While the second
// attempt of a retried run runs, `flyte get run <name>` already shows the
// first attempt's ACTION_PHASE_FAILED (a wait that scanned its text for a
// terminal phase reported the run failed); the run itself is RUNNING, and
// waitRun returns only once it succeeded.
func testWaitReadsOwnPhase(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 10*time.Minute)
	dir := t.TempDir()
	cliConfig(t, ctx, m, dir)
	copyTree(t, filepath.Join("testdata", "cli"), dir)
	marks := testkit.TaskDir(t)
	run := cliRun(t, ctx, dir, "cli_tasks.py", "second_try", "--dir", marks)

	if msg := testkit.Poll(5*time.Minute, 200*time.Millisecond, func() string {
		if _, err := os.Stat(filepath.Join(marks, "second-started")); err != nil {
			return "the second attempt has not started"
		}
		return ""
	}); msg != "" {
		t.Fatalf("run %s: %s", run, msg)
	}
	// The trap the old wait fell into: a terminal phase in the CLI's text.
	details := mustFlyte(t, ctx, dir, "get", "run", run)
	if !strings.Contains(details, "ACTION_PHASE_FAILED") {
		t.Errorf("flyte get run %s does not show the failed first attempt while the second runs:\n%s", run, details)
	}
	phase, err := runPhase(t, ctx, m, run)
	if err != nil {
		t.Fatal(err)
	}
	if phase != common.ActionPhase_ACTION_PHASE_RUNNING {
		t.Errorf("run %s is %s while its second attempt runs, want RUNNING", run, phaseName(phase))
	}

	if err := os.WriteFile(filepath.Join(marks, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if phase := waitRun(t, ctx, m, run); phase != "SUCCEEDED" {
		t.Fatalf("run %s is %s after its second attempt was released, want SUCCEEDED:\n%s", run, phase, mustFlyte(t, ctx, dir, "get", "run", run))
	}
	if io := mustFlyte(t, ctx, dir, "get", "io", run, "--outputs-only"); !strings.Contains(io, "second try") {
		t.Errorf("flyte get io %s: want the output %q:\n%s", run, "second try", io)
	}
}
