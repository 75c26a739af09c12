package e2e

import (
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"fmgr.dev/internal/testkit"
)

// Run recovery end to end (testdata/sdk/drive_recover.py, wf_recover.py):
// flyte.rerun(recover=True) makes a new run whose root runs again and in
// which the sub-actions that succeeded in the source end RECOVERED with the
// source's outputs, without running; everything else runs. The run ends as
// its root does, SUCCEEDED when it succeeds, which is the only success the
// SDK knows (Run.raise_for_status).

type recoveredAction struct {
	Phase, Task   string
	RecoveredFrom string `json:"recovered_from"`
	OutputURI     string `json:"output_uri"`
}

type recoveredRun struct {
	Name, Phase string
	Output      any
	// StatusError is what Run.raise_for_status raised ("" for a success).
	StatusError string `json:"status_error"`
	Relation    *struct {
		Type int
		To   string
	}
	Actions map[string]recoveredAction
}

// leaves are the run's leaf actions by phase.
func (r recoveredRun) leaves() map[string][]string {
	out := map[string][]string{}
	for name, a := range r.Actions {
		if strings.HasSuffix(a.Task, ".leaf") {
			out[a.Phase] = append(out[a.Phase], name)
		}
	}
	for _, names := range out {
		slices.Sort(names)
	}
	return out
}

// trace is the name of the run's one trace action (fan's offset).
func (r recoveredRun) trace(t *testing.T) string {
	t.Helper()
	var found []string
	for name, a := range r.Actions {
		if name != "a0" && !strings.HasSuffix(a.Task, ".leaf") {
			found = append(found, name)
		}
	}
	if len(found) != 1 {
		t.Fatalf("run %s has trace actions %v, want one: %+v", r.Name, found, r.Actions)
	}
	return found[0]
}

// relationRecover is RELATION_TYPE_RECOVER.
const relationRecover = 2

func testRecover(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 15*time.Minute)
	counter := testkit.TaskDir(t)
	var res struct {
		Runs         []recoveredRun
		Forced       string
		SourceAfter  recoveredRun `json:"source_after"`
		RecoveredMid recoveredRun `json:"recovered_after"`
		Missing      string
	}
	driver(t, ctx, &res, "drive_recover.py", sdkEndpoint(m), counter, filepath.Join(counter, "marker"))
	if len(res.Runs) != 5 {
		t.Fatalf("driver reported %d runs, want 5", len(res.Runs))
	}
	source, recovered, forced, whole, fewer := res.Runs[0], res.Runs[1], res.Runs[2], res.Runs[3], res.Runs[4]

	// The CLI's way: flyte rerun --recover.
	dir := t.TempDir()
	cliConfig(t, ctx, m, dir)
	const cliRun = "recover-cli"
	mustFlyte(t, ctx, dir, "rerun", source.Name, "--recover", "--name", cliRun)
	if p := waitRun(t, ctx, m, cliRun); p != "SUCCEEDED" {
		t.Errorf("flyte rerun %s --recover: run %s ended %s, want SUCCEEDED", source.Name, cliRun, p)
	}
	var cliActions []struct {
		ID     struct{ Name string } `json:"id"`
		Status struct{ Phase string }
	}
	jsonOutput(t, mustFlyte(t, ctx, dir, "-of", "json-raw", "get", "action", cliRun), &cliActions)
	cliRecovered := 0
	for _, a := range cliActions {
		if a.Status.Phase == "ACTION_PHASE_RECOVERED" {
			cliRecovered++
		}
	}
	if cliRecovered != 3 {
		t.Errorf("flyte get action %s: %d actions RECOVERED, want 3 (two leaves and the trace): %+v", cliRun, cliRecovered, cliActions)
	}

	// Which action ran which code, from the tasks' own record.
	ran := map[string][]string{}  // run name → "what action" lines
	leafOf := map[string]string{} // action name → leaf0..leaf3
	line := regexp.MustCompile(`^(\S+) run=(\S+) action=(\S+)$`)
	for _, l := range executions(t, counter) {
		g := line.FindStringSubmatch(l)
		if g == nil {
			t.Fatalf("unexpected execution record %q", l)
		}
		ran[g[2]] = append(ran[g[2]], g[1])
		if strings.HasPrefix(g[1], "leaf") {
			leafOf[g[3]] = g[1]
		}
	}
	for _, names := range ran {
		slices.Sort(names)
	}

	// The source: even leaves succeeded, odd ones failed, so the run failed.
	if source.Phase != "FAILED" {
		t.Fatalf("source run %s ended %s, want FAILED (its odd leaves fail while the marker exists)", source.Name, source.Phase)
	}
	srcLeaves := source.leaves()
	if len(srcLeaves["SUCCEEDED"]) != 2 || len(srcLeaves["FAILED"]) != 2 {
		t.Fatalf("source leaves by phase %v, want 2 SUCCEEDED and 2 FAILED", srcLeaves)
	}
	checkRan(t, "the source", ran[source.Name], "fan", "trace", "leaf0", "leaf1", "leaf2", "leaf3")
	trace := source.trace(t)

	// The recovery: the root and the failed leaves ran, succeeded leaves
	// are RECOVERED (not run).
	if recovered.Phase != "SUCCEEDED" || recovered.StatusError != "" {
		t.Fatalf("recovery %s ended %s (raise_for_status: %q), want SUCCEEDED", recovered.Name, recovered.Phase, recovered.StatusError)
	}
	checkJSON(t, "the recovery's output", recovered.Output, `65`)
	if recovered.Relation == nil || recovered.Relation.Type != relationRecover || recovered.Relation.To != source.Name {
		t.Errorf("the recovery's a0 relation = %+v, want RECOVER of %s", recovered.Relation, source.Name)
	}
	recLeaves := recovered.leaves()
	if !reflect.DeepEqual(recLeaves["RECOVERED"], srcLeaves["SUCCEEDED"]) || !reflect.DeepEqual(recLeaves["SUCCEEDED"], srcLeaves["FAILED"]) {
		t.Fatalf("recovery leaves by phase %v; want the source's SUCCEEDED %v RECOVERED and its FAILED %v SUCCEEDED",
			recLeaves, srcLeaves["SUCCEEDED"], srcLeaves["FAILED"])
	}
	checkRan(t, "the recovery", ran[recovered.Name], "fan", "leaf1", "leaf3")
	checkRan(t, "flyte rerun --recover", ran[cliRun], "fan", "leaf1", "leaf3")
	// The trace fan recorded is replayed, not run: it is RECOVERED too.
	if got := recovered.trace(t); got != trace {
		t.Fatalf("the recovery's trace is %s, the source's %s: names are deterministic", got, trace)
	}
	for _, name := range append(slices.Clone(recLeaves["RECOVERED"]), trace) {
		a := recovered.Actions[name]
		if a.Phase != "RECOVERED" {
			t.Errorf("%s of the recovery is %s, want RECOVERED", name, a.Phase)
		}
		if a.RecoveredFrom != source.Name+"/"+name {
			t.Errorf("recovered %s: recovered_from %q, want %s/%s", name, a.RecoveredFrom, source.Name, name)
		}
		if !strings.Contains(a.OutputURI, "/"+recovered.Name+"/") {
			t.Errorf("recovered %s: outputs at %q, want them in the recovery's own storage", name, a.OutputURI)
		}
	}
	for _, name := range recLeaves["SUCCEEDED"] {
		if from := recovered.Actions[name].RecoveredFrom; from != "" {
			t.Errorf("%s ran in the recovery but says recovered_from %q", name, from)
		}
	}

	// Forcing a recovered leaf runs it, and its parent, again; the other
	// leaves are recovered from the recovery (itself recovered or not).
	if res.Forced == "" || !slices.Contains(recLeaves["RECOVERED"], res.Forced) {
		t.Fatalf("forced action %q is not one of the recovered leaves %v", res.Forced, recLeaves["RECOVERED"])
	}
	if forced.Phase != "SUCCEEDED" || forced.StatusError != "" {
		t.Fatalf("forced recovery %s ended %s (raise_for_status: %q), want SUCCEEDED", forced.Name, forced.Phase, forced.StatusError)
	}
	checkJSON(t, "the forced recovery's output", forced.Output, `65`)
	for name, a := range forced.Actions {
		want := "RECOVERED"
		if name == res.Forced || name == "a0" {
			want = "SUCCEEDED"
		}
		if a.Phase != want {
			t.Errorf("forced recovery: %s (%s) is %s, want %s", name, a.Task, a.Phase, want)
		}
		if want == "RECOVERED" && a.RecoveredFrom != recovered.Name+"/"+name {
			t.Errorf("forced recovery: %s recovered_from %q, want %s/%s", name, a.RecoveredFrom, recovered.Name, name)
		}
	}
	checkRan(t, "the forced recovery", ran[forced.Name], "fan", leafOf[res.Forced])

	// Recovering a run that succeeded whole runs only its root, which finds
	// every leaf and its trace recovered, and ends SUCCEEDED: a success to
	// the SDK.
	if whole.Phase != "SUCCEEDED" || whole.StatusError != "" {
		t.Errorf("recovery of the succeeded %s ended %s (raise_for_status: %q), want SUCCEEDED", recovered.Name, whole.Phase, whole.StatusError)
	}
	if a0 := whole.Actions["a0"]; a0.Phase != "SUCCEEDED" || a0.RecoveredFrom != "" {
		t.Errorf("whole recovery: a0 %+v, want SUCCEEDED, run again and not recovered", a0)
	}
	if l := whole.leaves(); len(l["RECOVERED"]) != 4 || len(l) != 1 {
		t.Errorf("whole recovery: leaves by phase %v, want 4 RECOVERED", l)
	}
	for name, a := range whole.Actions {
		if name != "a0" && (a.Phase != "RECOVERED" || a.RecoveredFrom != recovered.Name+"/"+name) {
			t.Errorf("whole recovery: %s (%s) is %s recovered from %q, want RECOVERED from %s/%s",
				name, a.Task, a.Phase, a.RecoveredFrom, recovered.Name, name)
		}
	}
	if len(whole.Actions) != 6 {
		t.Errorf("whole recovery has %d actions, want 6 (a0, four leaves, the trace): %+v", len(whole.Actions), whole.Actions)
	}
	whole.trace(t)
	checkJSON(t, "the whole recovery's output", whole.Output, `65`)
	checkRan(t, "the whole recovery", ran[whole.Name], "fan")

	// Another input for the root: the root runs (as always), the leaves it
	// calls again with the same inputs are recovered.
	if fewer.Phase != "SUCCEEDED" || fewer.StatusError != "" || fewer.Actions["a0"].RecoveredFrom != "" {
		t.Errorf("recovery of %s with n=3: phase %s, a0 %+v; want SUCCEEDED with a0 run again", recovered.Name, fewer.Phase, fewer.Actions["a0"])
	}
	checkJSON(t, "the output of the recovery with n=3", fewer.Output, `35`)
	if l := fewer.leaves(); len(l["RECOVERED"]) != 3 || len(l) != 1 {
		t.Errorf("recovery with n=3: leaves by phase %v, want 3 RECOVERED", l)
	}
	checkRan(t, "the recovery with n=3", ran[fewer.Name], "fan")

	// The runs recovered from are as they were.
	for _, c := range []struct{ before, after recoveredRun }{{source, res.SourceAfter}, {recovered, res.RecoveredMid}} {
		if c.after.Phase != c.before.Phase || !reflect.DeepEqual(c.after.Actions, c.before.Actions) || !reflect.DeepEqual(c.after.Output, c.before.Output) {
			t.Errorf("run %s changed after being recovered from:\nbefore %+v\nafter  %+v", c.before.Name, c.before, c.after)
		}
	}

	if !strings.Contains(res.Missing, "rnosuchrun0000000000") {
		t.Errorf("recovering a run that does not exist: %q, want an error naming it", res.Missing)
	}
}

// checkRan compares what task code ran in a run with want (sorted).
func checkRan(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s executed %v, want %v", what, got, want)
	}
}
