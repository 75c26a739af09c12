package v1

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestObjectName(t *testing.T) {
	cases := []struct {
		run, action string
		want        string // "" = check only validity and uniqueness
	}{
		{"r1", "a0", "r1-a0"},
		{"rabc123", "n0-x", "rabc123-n0-x"},
		{"MyRun", "a0", ""},
		{"run", "child_1", ""},
		{"run", "Child_1", ""},
		{"r", "_", ""},
		{strings.Repeat("r", 30), strings.Repeat("a", 30), strings.Repeat("r", 30) + "-" + strings.Repeat("a", 30)},
	}
	seen := map[string]string{}
	for _, c := range cases {
		got := ObjectName(c.run, c.action)
		if c.want != "" && got != c.want {
			t.Errorf("ObjectName(%q, %q) = %q, want %q", c.run, c.action, got, c.want)
		}
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Errorf("ObjectName(%q, %q) = %q is no object name: %v", c.run, c.action, got, errs)
		}
		key := c.run + "/" + c.action
		if prev, dup := seen[got]; dup {
			t.Errorf("ObjectName gives %q for both %s and %s", got, prev, key)
		}
		seen[got] = key
	}
	// Sanitizing must not make two different actions collide.
	if ObjectName("run", "child_1") == ObjectName("run", "child-1") {
		t.Error("run/child_1 and run/child-1 share an object name")
	}
}

// A project and domain become a valid namespace name whatever the project
// id holds; a name that had to change carries a hash of the exact pair, so
// projects differing only in case, '_' or past the length limit stay apart.
func TestNamespaceName(t *testing.T) {
	long := strings.Repeat("p", 63)
	cases := []struct {
		project, domain string
		want            string // the exact name, or with a trailing "*" its prefix before the hash
	}{
		{"p", "development", "p-development"},
		{"flyte-snacks", "production", "flyte-snacks-production"},
		{"My_Proj", "development", "my-proj-development-*"},
		{"my_proj", "development", "my-proj-development-*"},
		{"MY-PROJ", "development", "my-proj-development-*"},
		{"my-proj", "development", "my-proj-development"},
		{"a.b", "staging", "a-b-staging-*"},
		{"_x_", "development", "x--development-*"},
		{long, "development", long[:63-9] + "-*"},
		{long + "q", "development", long[:63-9] + "-*"},
		{long, "Development", long[:63-9] + "-*"},
	}
	seen := map[string]string{}
	for _, c := range cases {
		got := NamespaceName(c.project, c.domain)
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
			t.Errorf("NamespaceName(%q, %q) = %q is no namespace name: %v", c.project, c.domain, got, errs)
		}
		if prefix, hashed := strings.CutSuffix(c.want, "*"); hashed {
			hash := strings.TrimPrefix(got, prefix)
			if !strings.HasPrefix(got, prefix) || len(hash) != 8 || strings.Trim(hash, "0123456789abcdef") != "" {
				t.Errorf("NamespaceName(%q, %q) = %q, want %s<8 hex digits>", c.project, c.domain, got, prefix)
			}
		} else if got != c.want {
			t.Errorf("NamespaceName(%q, %q) = %q, want %q", c.project, c.domain, got, c.want)
		}
		key := c.project + "/" + c.domain
		if prev, dup := seen[got]; dup {
			t.Errorf("NamespaceName gives %q for both %s and %s", got, prev, key)
		}
		seen[got] = key
	}
}

func TestLabelValue(t *testing.T) {
	long := strings.Repeat("x", 80)
	for _, in := range []string{"flytesnacks", "a0", "Child_1", "ends_", "-starts", long, "____"} {
		got := LabelValue(in)
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("LabelValue(%q) = %q is no label value: %v", in, got, errs)
		}
		if len(validation.IsValidLabelValue(in)) == 0 && got != in {
			t.Errorf("LabelValue(%q) = %q changed a valid value", in, got)
		}
	}
	if LabelValue("ends_") == LabelValue("ends-") {
		t.Error("ends_ and ends- share a label value")
	}
}

func TestStandardLabels(t *testing.T) {
	parent := "a0"
	cases := []struct {
		name string
		spec TaskActionSpec
		want map[string]string
	}{
		{"root task", TaskActionSpec{Project: "p", Domain: "development", RunName: "r1", ActionName: "a0"},
			map[string]string{LabelProject: "p", LabelDomain: "development", LabelRun: "r1", LabelAction: "a0",
				LabelActionType: "task", LabelIsRoot: "true"}},
		{"child condition", TaskActionSpec{Project: "p", Domain: "d", RunName: "r1", ActionName: "c1",
			ParentActionName: &parent, ActionType: ActionTypeCondition},
			map[string]string{LabelProject: "p", LabelDomain: "d", LabelRun: "r1", LabelAction: "c1",
				LabelActionType: "condition", LabelIsRoot: "false"}},
	}
	for _, c := range cases {
		ta := &TaskAction{Spec: c.spec}
		got := ta.StandardLabels()
		if len(got) != len(c.want) {
			t.Errorf("%s: labels %v, want %v", c.name, got, c.want)
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s: label %s = %q, want %q", c.name, k, got[k], v)
			}
		}
	}
	empty := ""
	if !(&TaskAction{Spec: TaskActionSpec{ParentActionName: &empty}}).IsRoot() {
		t.Error("an empty parentActionName is a root")
	}
}

func TestAttemptNumber(t *testing.T) {
	for _, c := range []struct{ attempts, want uint32 }{{0, 1}, {1, 1}, {3, 3}} {
		ta := &TaskAction{Status: TaskActionStatus{Attempts: c.attempts}}
		if got := ta.AttemptNumber(); got != c.want {
			t.Errorf("attempts %d: AttemptNumber = %d, want %d", c.attempts, got, c.want)
		}
	}
}

// TestConditionsLifecycle walks a TaskAction through the condition changes a
// reconciler makes, checking after each step what changed and whether it is
// terminal.
func TestConditionsLifecycle(t *testing.T) {
	ta := &TaskAction{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
	type set struct {
		cond   string
		status metav1.ConditionStatus
		reason string
	}
	steps := []struct {
		name        string
		set         set
		wantChanged bool
		wantTerm    bool
	}{
		{"queued", set{ConditionProgressing, metav1.ConditionTrue, ReasonQueued}, true, false},
		{"queued again", set{ConditionProgressing, metav1.ConditionTrue, ReasonQueued}, false, false},
		{"executing", set{ConditionProgressing, metav1.ConditionTrue, ReasonExecuting}, true, false},
		{"not failed yet", set{ConditionFailed, metav1.ConditionFalse, ReasonExecuting}, true, false},
		{"done progressing", set{ConditionProgressing, metav1.ConditionFalse, ReasonCompleted}, true, false},
		{"succeeded", set{ConditionSucceeded, metav1.ConditionTrue, ReasonCompleted}, true, true},
	}
	for _, s := range steps {
		changed := ta.SetCondition(s.set.cond, s.set.status, s.set.reason, "")
		if changed != s.wantChanged {
			t.Errorf("%s: changed = %v, want %v", s.name, changed, s.wantChanged)
		}
		c := ta.Condition(s.set.cond)
		if c == nil || c.Status != s.set.status || c.Reason != s.set.reason || c.ObservedGeneration != 2 {
			t.Errorf("%s: condition %s = %+v", s.name, s.set.cond, c)
		}
		if got := ta.IsTerminal(); got != s.wantTerm {
			t.Errorf("%s: IsTerminal = %v, want %v", s.name, got, s.wantTerm)
		}
	}
	if n := len(ta.Status.Conditions); n != 3 {
		t.Errorf("%d conditions, want one per type (3)", n)
	}
	failed := &TaskAction{}
	failed.SetCondition(ConditionFailed, metav1.ConditionTrue, ReasonPermanentFailure, "boom")
	if !failed.IsTerminal() {
		t.Error("Failed=True is terminal")
	}
	if failed.Condition(ConditionSucceeded) != nil {
		t.Error("Condition of an unset type must be nil")
	}
}

func TestRecordPhase(t *testing.T) {
	ta := &TaskAction{}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	steps := []struct {
		phase, msg string
		want       bool
	}{
		{"QUEUED", "", true},
		{"QUEUED", "", false},
		{"RUNNING", "", true},
		{"QUEUED", "retrying: exit code 1", true},
		{"QUEUED", "retrying: exit code 1", false},
		{"SUCCEEDED", "", true},
	}
	for i, s := range steps {
		if got := ta.RecordPhase(s.phase, s.msg, t0.Add(time.Duration(i)*time.Second)); got != s.want {
			t.Errorf("step %d (%s %q): appended = %v, want %v", i, s.phase, s.msg, got, s.want)
		}
	}
	h := ta.Status.PhaseHistory
	if len(h) != 4 || h[0].Phase != "QUEUED" || h[3].Phase != "SUCCEEDED" || !h[0].OccurredAt.Time.Equal(t0) {
		t.Errorf("history %+v", h)
	}
}

func TestType(t *testing.T) {
	for _, c := range []struct{ in, want ActionType }{{"", ActionTypeTask}, {ActionTypeTask, ActionTypeTask}, {ActionTypeCondition, ActionTypeCondition}} {
		if got := (&TaskAction{Spec: TaskActionSpec{ActionType: c.in}}).Type(); got != c.want {
			t.Errorf("Type of %q = %q, want %q", c.in, got, c.want)
		}
	}
}
