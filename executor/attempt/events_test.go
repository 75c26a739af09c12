package attempt_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/requrl"
)

// Every transition the core applies is recorded once in the action's
// history with its reason, error, logs, cluster and outputs; the details
// show each attempt's transitions in order.
func TestApplyRecordsHistory(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		a := f.run(t, "rhistory", template("t.history", &core.Container{Args: []string{"a0"}}, &core.TaskMetadata{Retries: &core.RetryStrategy{Retries: 2}}), nil)
		c := attempt.New(f.state, attempt.Options{Fence: f.hold(t), Cluster: "c1"})
		spec, err := c.Spec(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		apply := func(ev machine.Event, rec attempt.Record) {
			t.Helper()
			if a, _, err = c.Apply(ctx, a, spec, ev, rec); err != nil {
				t.Fatalf("%s: %v", ev.Name(), err)
			}
		}
		apply(machine.Wait{Attempt: 1, Reason: "no free slot"}, attempt.Record{})
		for n := uint32(1); n <= 3; n++ {
			apply(machine.Start{Attempt: n}, attempt.Record{})
			rec := attempt.Record{Logs: true}
			if n == 3 { // a driver's own links (kubernetes renders them per Pod)
				rec.LogLinks = []*core.TaskLog{{Name: "logs", Uri: "/logs/elsewhere"}, {Name: "dashboard", Uri: "https://dash.example.com/3"}}
			}
			apply(machine.Running{Attempt: n}, rec)
			if n < 3 {
				apply(machine.Crashed{Attempt: n, ExitCode: 1, Message: "exit status 1"}, attempt.Record{OutDir: "file:///out/" + string(rune('0'+n))})
			}
		}
		if a, err = c.ReportClusterEvents(ctx, a, []*workflow.ClusterEvent{{Reason: "Pulled", Message: "image pulled"}}); err != nil {
			t.Fatal(err)
		}
		apply(machine.Succeeded{Attempt: 3}, attempt.Record{OutDir: "file:///out/3"})

		// Read by a client that reached the manager at http://mgr:8090.
		d, err := f.state.Details(requrl.WithBaseURL(ctx, "http://mgr:8090"), a)
		if err != nil {
			t.Fatal(err)
		}
		Q, W, I, R, S, F := common.ActionPhase_ACTION_PHASE_QUEUED, common.ActionPhase_ACTION_PHASE_WAITING_FOR_RESOURCES,
			common.ActionPhase_ACTION_PHASE_INITIALIZING, common.ActionPhase_ACTION_PHASE_RUNNING,
			common.ActionPhase_ACTION_PHASE_SUCCEEDED, common.ActionPhase_ACTION_PHASE_FAILED
		want := [][]common.ActionPhase{{Q, W, I, R, F}, {Q, I, R, F}, {Q, I, R, S}}
		if len(d.GetAttempts()) != 3 {
			t.Fatalf("%d attempts, want 3", len(d.GetAttempts()))
		}
		for i, at := range d.GetAttempts() {
			var got []common.ActionPhase
			for j, pt := range at.GetPhaseTransitions() {
				got = append(got, pt.GetPhase())
				if j > 0 && pt.GetStartTime().AsTime().Before(at.GetPhaseTransitions()[j-1].GetStartTime().AsTime()) {
					t.Fatalf("attempt %d: transitions out of order: %v", i+1, at.GetPhaseTransitions())
				}
			}
			if !equalPhases(got, want[i]) {
				t.Fatalf("attempt %d transitions %v, want %v", i+1, got, want[i])
			}
			if at.GetAttempt() != uint32(i+1) || at.GetCluster() != "c1" || !at.GetLogsAvailable() {
				t.Fatalf("attempt %d: number %d cluster %q logs available %v", i+1, at.GetAttempt(), at.GetCluster(), at.GetLogsAvailable())
			}
			// Each link once, on the client's address when it is the manager's.
			want := fmt.Sprintf("logs=http://mgr:8090/logs/local/%s/%s/rhistory/a0/%d", a.Project, a.Domain, i+1)
			if i == 2 {
				want = "logs=http://mgr:8090/logs/elsewhere dashboard=https://dash.example.com/3"
			}
			var links []string
			for _, tl := range at.GetLogInfo() {
				links = append(links, tl.GetName()+"="+tl.GetUri())
			}
			if got := strings.Join(links, " "); got != want {
				t.Errorf("attempt %d log links %q, want %q", i+1, got, want)
			}
		}
		first, last := d.GetAttempts()[0], d.GetAttempts()[2]
		reasons := clusterMessages(first)
		if !strings.Contains(reasons, "no free slot") || !strings.Contains(reasons, "exit status 1") {
			t.Fatalf("attempt 1 cluster events %q: want the waiting reason and the failure", reasons)
		}
		if got := clusterMessages(last); strings.Count(got, "image pulled") != 1 {
			t.Fatalf("attempt 3 cluster events %q: want the Pod's event once", got)
		}
		if first.GetOutputs().GetOutputUri() != "file:///out/1" || last.GetOutputs().GetOutputUri() != "file:///out/3" {
			t.Fatalf("outputs %v / %v", first.GetOutputs(), last.GetOutputs())
		}
	})
}

func equalPhases(a, b []common.ActionPhase) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func clusterMessages(at *workflow.ActionAttempt) string {
	var s []string
	for _, e := range at.GetClusterEvents() {
		s = append(s, e.GetMessage())
	}
	return strings.Join(s, " | ")
}
