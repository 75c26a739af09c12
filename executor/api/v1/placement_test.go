package v1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"fmgr.dev/internal/phase"
)

func TestPlacement(t *testing.T) {
	shared := Placement{Namespace: "flyte"}
	perProject := Placement{Namespace: "flyte", NamespacePerProject: true}
	ref := ActionRef{Project: "flytesnacks", Domain: "development", Run: "r1", Action: "a0"}
	for _, c := range []struct {
		p        Placement
		ref      ActionRef
		ns, name string
	}{
		{shared, ref, "flyte", "flytesnacks-development-r1-a0"},
		{perProject, ref, "flytesnacks-development", "r1-a0"},
		{perProject, ActionRef{Org: "o", Project: "p", Domain: "d", Run: "r", Action: "x"}, "p-d", "o-r-x"},
	} {
		if ns := c.p.NamespaceOf(c.ref.Project, c.ref.Domain); ns != c.ns {
			t.Errorf("%+v: namespace %q, want %q", c, ns, c.ns)
		}
		if name := c.p.NameOf(c.ref); name != c.name {
			t.Errorf("%+v: name %q, want %q", c, name, c.name)
		}
	}
}

func TestSetProgress(t *testing.T) {
	for _, c := range []struct {
		p        phase.Phase
		attempts int32
		reason   string
		ended    string
	}{
		{phase.Queued, 1, ReasonQueued, ""},
		{phase.Queued, 2, ReasonRetryableFailure, ""},
		{phase.Running, 1, ReasonExecuting, ""},
		{phase.Succeeded, 1, ReasonCompleted, ConditionSucceeded},
		{phase.Aborted, 1, ReasonAborted, ConditionFailed},
	} {
		ta := &TaskAction{}
		ta.Status.ErrorState = &ErrorState{Message: "boom"}
		ta.SetProgress(c.p, c.attempts)
		if got := ta.Condition(ConditionProgressing); got == nil || got.Reason != c.reason {
			t.Errorf("%v: Progressing %+v, want reason %s", c.p, got, c.reason)
		}
		if c.ended != "" && !ta.IsTerminal() {
			t.Errorf("%v: not terminal", c.p)
		}
		if c.ended != "" && ta.Condition(c.ended).Status != metav1.ConditionTrue {
			t.Errorf("%v: %s not True", c.p, c.ended)
		}
	}
}
