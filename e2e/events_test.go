package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
	"fmgr.dev/internal/testkit"
)

// Scenario: the one recorded history of every attempt. A task that fails
// twice and succeeds on attempt 3: the SDK's remote ActionDetails and
// `flyte get action` show the three attempts, each with its phase
// transitions in lifecycle order, each phase once, the failures' causes
// once as cluster events; the events service (a Go Connect client over
// HTTP) takes the executor's own event again without recording it twice,
// and refuses news about the ended attempt and a forged FAILED.
func testHistory(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 8*time.Minute)
	type historyAttempt struct {
		attemptInfo
		ClusterEvents  []string `json:"cluster_events"`
		Logs           []string
		Cluster        string
		SDKTransitions []string `json:"sdk_transitions"`
	}
	var res struct {
		Run, Phase     string
		StatusAttempts int `json:"status_attempts"`
		Attempts       []historyAttempt
	}
	driver(t, ctx, &res, "drive_history.py", sdkEndpoint(m), testkit.TaskDir(t))
	if res.Phase != "SUCCEEDED" || res.StatusAttempts != 3 {
		t.Fatalf("run %s is %s after %d attempts, want SUCCEEDED on attempt 3", res.Run, res.Phase, res.StatusAttempts)
	}
	infos := make([]attemptInfo, len(res.Attempts))
	for i, a := range res.Attempts {
		infos[i] = a.attemptInfo
	}
	checkAttempts(t, res.Run, infos, "FAILED", "FAILED", "SUCCEEDED")
	for i, a := range res.Attempts {
		var phases []string
		for _, tr := range a.Transitions {
			phases = append(phases, tr.Phase)
		}
		checkOnceEach(t, fmt.Sprintf("run %s attempt %d transitions", res.Run, i+1), phases, "QUEUED")
		if !slices.Equal(a.SDKTransitions, phases) {
			t.Errorf("run %s attempt %d: the SDK's get_phase_transitions %v differ from the details' %v", res.Run, i+1, a.SDKTransitions, phases)
		}
		if a.Cluster == "" || !slices.Equal(a.Logs, logLinkNames(m)) {
			t.Errorf("run %s attempt %d: cluster %q, logs %v; want a cluster and each log link %v once", res.Run, i+1, a.Cluster, a.Logs, logLinkNames(m))
		}
		if i < 2 {
			cause := fmt.Sprintf("flaky failure on attempt %d", i+1)
			if n := countContaining(a.ClusterEvents, cause); n != 1 {
				t.Errorf("run %s attempt %d: the failure %q shows %d times in its cluster events %q, want once", res.Run, i+1, cause, n, a.ClusterEvents)
			}
		}
	}

	// After the run ended: what the executor recorded may be sent again
	// (idempotent) and changes nothing; anything new about the ended
	// attempt, a forged FAILED above all, is refused and shows nowhere, in
	// the details or in `flyte get action` below.
	t.Run("events service", func(t *testing.T) {
		id := &common.ActionIdentifier{Run: &common.RunIdentifier{Project: testProject, Domain: testDomain, Name: res.Run}, Name: "a0"}
		events := workflowconnect.NewEventsProxyServiceClient(rpcClient, m.URL)
		record := func(e *workflow.ActionEvent) error {
			_, err := events.Record(ctx, connect.NewRequest(&workflow.RecordRequest{Events: []*workflow.ActionEvent{e}}))
			return err
		}
		recorded := &workflow.ActionEvent{Id: id, Attempt: 3, Phase: common.ActionPhase_ACTION_PHASE_SUCCEEDED, Version: 0, UpdatedTime: timestamppb.Now()}
		for range 2 {
			if err := record(recorded); err != nil {
				t.Fatalf("Record of the executor's own SUCCEEDED: %v", err)
			}
		}
		for _, forged := range []*workflow.ActionEvent{
			{Id: id, Attempt: 3, Phase: common.ActionPhase_ACTION_PHASE_SUCCEEDED, Version: 1, UpdatedTime: timestamppb.Now(),
				ClusterEvents: []*workflow.ClusterEvent{{Reason: "E2E", Message: "reported after the end by the e2e test"}}},
			{Id: id, Attempt: 3, Phase: common.ActionPhase_ACTION_PHASE_FAILED, Version: 0, UpdatedTime: timestamppb.Now(),
				ErrorInfo: &workflow.ErrorInfo{Message: "forged by the e2e test"}},
		} {
			if err := record(forged); connect.CodeOf(err) != connect.CodeFailedPrecondition {
				t.Errorf("Record of %s after the attempt ended: %v, want FailedPrecondition", forged.GetPhase(), err)
			}
		}
		runs := workflowconnect.NewRunServiceClient(rpcClient, m.URL)
		resp, err := runs.GetActionDetails(ctx, connect.NewRequest(&workflow.GetActionDetailsRequest{ActionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		if p := resp.Msg.GetDetails().GetStatus().GetPhase(); p != common.ActionPhase_ACTION_PHASE_SUCCEEDED {
			t.Errorf("after Record the action is %s", p)
		}
		atts := resp.Msg.GetDetails().GetAttempts()
		if len(atts) != 3 {
			t.Fatalf("%d attempts after Record, want 3", len(atts))
		}
		var msgs []string
		for _, ce := range atts[2].GetClusterEvents() {
			msgs = append(msgs, ce.GetMessage())
		}
		if n := countContaining(msgs, "e2e test"); n != 0 || atts[2].GetErrorInfo() != nil {
			t.Errorf("a refused report shows: attempt 3's cluster events %q, error %v", msgs, atts[2].GetErrorInfo())
		}
		var phases []string
		for _, pt := range atts[2].GetPhaseTransitions() {
			phases = append(phases, strings.TrimPrefix(pt.GetPhase().String(), "ACTION_PHASE_"))
		}
		if !slices.Equal(phases, res.Attempts[2].SDKTransitions) {
			t.Errorf("after Record attempt 3 transitions %v, want %v", phases, res.Attempts[2].SDKTransitions)
		}
		err = record(&workflow.ActionEvent{
			Id: &common.ActionIdentifier{Run: id.Run, Name: "nosuchaction"}, Attempt: 1, Phase: common.ActionPhase_ACTION_PHASE_RUNNING,
		})
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("Record for an unknown action: %v, want NotFound", err)
		}
	})

	t.Run("flyte get action", func(t *testing.T) {
		dir := t.TempDir()
		mustFlyte(t, ctx, dir, "create", "config", "--endpoint", sdkEndpoint(m), "--insecure", "--project", testProject, "--domain", testDomain)
		got := cliAttempts(t, mustFlyte(t, ctx, dir, "get", "action", res.Run, "a0"))
		if len(got) != len(res.Attempts) {
			t.Fatalf("flyte get action %s a0 shows %d attempts %v, want %d", res.Run, len(got), got, len(res.Attempts))
		}
		for i, a := range res.Attempts {
			if !slices.Equal(got[i], a.SDKTransitions) {
				t.Errorf("flyte get action: attempt %d transitions %v, want %v", i+1, got[i], a.SDKTransitions)
			}
		}
	})

}

// checkOnceEach fails unless phases starts with first and names no phase twice.
func checkOnceEach(t *testing.T, what string, phases []string, first string) {
	t.Helper()
	if len(phases) == 0 || phases[0] != first {
		t.Errorf("%s %v do not start with %s", what, phases, first)
	}
	seen := map[string]bool{}
	for _, p := range phases {
		if seen[p] {
			t.Errorf("%s %v show %s twice", what, phases, p)
		}
		seen[p] = true
	}
}

func countContaining(ss []string, sub string) int {
	n := 0
	for _, s := range ss {
		if strings.Contains(s, sub) {
			n++
		}
	}
	return n
}

var (
	cliAttempt     = regexp.MustCompile(`'attempt':(\d+)`)
	cliTransitions = regexp.MustCompile(`'phaseTransitions':\[(.*?)\]`)
	cliPhase       = regexp.MustCompile(`'phase':'ACTION_PHASE_(\w+)'`)
)

// cliAttempts reads the attempts' phase transitions from what `flyte get
// action <run> <action>` prints: the details as a Python literal, attempt
// fields in field-number order (attempt = 5 before phase_transitions = 11),
// wrapped to the console's width (so whitespace is dropped first).
func cliAttempts(t *testing.T, out string) [][]string {
	t.Helper()
	flat := strings.Join(strings.Fields(out), "")
	marks := cliAttempt.FindAllStringSubmatchIndex(flat, -1)
	var got [][]string
	for i, mk := range marks {
		if want := fmt.Sprint(i + 1); flat[mk[2]:mk[3]] != want {
			t.Fatalf("flyte get action shows attempt %s at position %d:\n%s", flat[mk[2]:mk[3]], i+1, out)
		}
		end := len(flat)
		if i+1 < len(marks) {
			end = marks[i+1][0]
		}
		tr := cliTransitions.FindStringSubmatch(flat[mk[1]:end])
		if tr == nil {
			t.Fatalf("flyte get action shows attempt %d without phase transitions:\n%s", i+1, out)
		}
		var phases []string
		for _, p := range cliPhase.FindAllStringSubmatch(tr[1], -1) {
			phases = append(phases, p[1])
		}
		got = append(got, phases)
	}
	return got
}
