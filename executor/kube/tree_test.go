package kube

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// Children get TaskActions owned by their parent's; when the parent's Pod
// ends (it succeeds, or fails for good) while children still run, those
// children are aborted and their Pods stopped. Nobody aborts the run: the
// parent's own end must do it.
func TestChildrenAndParentEnd(t *testing.T) {
	h := newHarness(t, dbtest.SQLiteDSN(t))
	// Each parent runs until the test creates its marker, then ends as
	// its task would.
	waitFor := func(marker, then string) string {
		return `while [ ! -f "$FIXTURES/` + marker + `" ]; do sleep 0.1; done; ` + then
	}
	root := h.run("rtree", waitFor("end-rtree", succeed), taskOpts{})
	failing := h.run("rtreefail", waitFor("end-rtreefail", "exit 1"), taskOpts{})
	h.running(root, 1)
	h.running(failing, 1)
	fast := h.child(root, "c-fast", succeed)
	slow := h.child(root, "c-slow", `sleep 600`)
	orphan := h.child(failing, "c-slow", `sleep 600`)
	h.terminal(fast, phase.Succeeded)
	h.running(slow, 1)
	h.running(orphan, 1)

	parent, err := h.taskAction(root)
	if err != nil {
		t.Fatal(err)
	}
	kid, err := h.taskAction(slow)
	if err != nil {
		t.Fatal(err)
	}
	if len(kid.OwnerReferences) != 1 || kid.OwnerReferences[0].UID != parent.UID || kid.Labels[v1.LabelIsRoot] != "false" ||
		kid.Spec.ParentActionName == nil || *kid.Spec.ParentActionName != "a0" {
		t.Fatalf("child TaskAction %+v %+v", kid.ObjectMeta, kid.Spec)
	}

	// The parents' processes end on their own; their unfinished children
	// are aborted, the finished one keeps its phase.
	for _, marker := range []string{"end-rtree", "end-rtreefail"} {
		if err := os.WriteFile(filepath.Join(h.fixtures, marker), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.terminal(root, phase.Succeeded)
	h.terminal(failing, phase.Failed)
	h.terminal(slow, phase.Aborted)
	h.terminal(orphan, phase.Aborted)
	h.podGone(slow, 1)
	h.podGone(orphan, 1)
	if got := h.action(fast).Phase; got != phase.Succeeded {
		t.Errorf("the finished child became %v", got)
	}
}

// A TaskAction created with kubectl (the executor's sample) becomes a run
// and completes; one the manager cannot run is refused in its status.
func TestAdoptedTaskActions(t *testing.T) {
	h := newHarness(t, dbtest.SQLiteDSN(t))
	tmpl, err := proto.Marshal(&core.TaskTemplate{
		Id:     &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "p", Domain: "development", Name: "hello", Version: "v1"},
		Type:   "raw-container",
		Target: &core.TaskTemplate_Container{Container: &core.Container{Image: "busybox", Args: []string{"sh", "-c", "echo hello"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	good := &v1.TaskAction{ObjectMeta: metav1.ObjectMeta{Namespace: "flyte", Name: "p-development-hello-a0"},
		Spec: v1.TaskActionSpec{Project: "p", Domain: "development", RunName: "hello", ActionName: "a0", TaskType: "raw-container", TaskTemplate: tmpl}}
	parent := "a0"
	child := &v1.TaskAction{ObjectMeta: metav1.ObjectMeta{Namespace: "flyte", Name: "p-development-hello-c1"},
		Spec: v1.TaskActionSpec{Project: "p", Domain: "development", RunName: "hello", ActionName: "c1", ParentActionName: &parent, TaskTemplate: tmpl}}
	junk := &v1.TaskAction{ObjectMeta: metav1.ObjectMeta{Namespace: "flyte", Name: "p-development-junk-a0"},
		Spec: v1.TaskActionSpec{Project: "p", Domain: "development", RunName: "junk", ActionName: "a0", TaskTemplate: []byte("not a proto")}}
	// Under another name it would be a second TaskAction of the action.
	misnamed := &v1.TaskAction{ObjectMeta: metav1.ObjectMeta{Namespace: "flyte", Name: "hello"},
		Spec: v1.TaskActionSpec{Project: "p", Domain: "development", RunName: "other", ActionName: "a0", TaskTemplate: tmpl}}
	for _, ta := range []*v1.TaskAction{good, child, junk, misnamed} {
		if err := h.k.Create(h.ctx, ta); err != nil {
			t.Fatal(err)
		}
	}
	key := storeKey("p", "development", "hello", "a0")
	h.eventually("the kubectl-created TaskAction to become a run", func() bool {
		_, err := h.st.Actions.Get(h.ctx, key)
		return err == nil
	})
	h.terminal(key, phase.Succeeded)
	h.eventually("the kubectl-created TaskAction to complete", func() bool {
		got := &v1.TaskAction{}
		return h.k.Get(h.ctx, objKey(good), got) == nil && condition(got, v1.ConditionSucceeded) == "Completed/True"
	})
	if _, err := h.pod(key, 2); err == nil {
		t.Error("a second attempt's Pod exists")
	}
	for _, ta := range []*v1.TaskAction{child, junk, misnamed} {
		h.eventually(ta.Name+" to be refused", func() bool {
			got := &v1.TaskAction{}
			return h.k.Get(h.ctx, objKey(ta), got) == nil && condition(got, v1.ConditionFailed) == "InvalidSpec/True"
		})
	}
	for _, run := range []string{"junk", "other"} {
		if _, err := h.st.Actions.Get(h.ctx, storeKey("p", "development", run, "a0")); err == nil {
			t.Errorf("a run was created for the invalid TaskAction of run %s", run)
		}
	}
	var list v1.TaskActionList
	if err := h.k.List(h.ctx, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 4 {
		t.Errorf("%d TaskActions, want the 4 created (the adopted one is not made twice)", len(list.Items))
	}
}

// Ended TaskActions are deleted after the TTL, with their Pods; the
// database keeps the action.
func TestGarbageCollection(t *testing.T) {
	h := newHarness(t, dbtest.SQLiteDSN(t), func(c *config.KubernetesExecutor) {
		c.GCInterval, c.GCTTL = 500*time.Millisecond, time.Second
	})
	key := h.run("rgc", succeed, taskOpts{})
	h.terminal(key, phase.Succeeded)
	h.eventually("the ended TaskAction to be collected", func() bool {
		_, err := h.taskAction(key)
		return apierrors.IsNotFound(err)
	})
	h.eventually("its Pod to go with it", func() bool {
		_, err := h.pod(key, 1)
		return apierrors.IsNotFound(err)
	})
	if a := h.action(key); a.Phase != phase.Succeeded {
		t.Fatalf("after GC the action is %s", a.Phase)
	}
}

// A run's max_action_concurrency holds on a cluster too: with a limit of 1
// the children run one after the other (the parent, waiting for them, does
// not count), each waiting WAITING_FOR_RESOURCES meanwhile.
func TestRunConcurrencyLimit(t *testing.T) {
	h := newHarness(t, dbtest.SQLiteDSN(t))
	root := h.run("rlimit", `sleep 600`, taskOpts{limit: 1})
	h.running(root, 1)
	// Two at once would find the lock directory taken.
	script := `mkdir "$FIXTURES/lock" || touch "$FIXTURES/overlap"; sleep 1; rmdir "$FIXTURES/lock"; ` + succeed
	var kids []store.ActionKey
	for _, n := range []string{"c1", "c2", "c3"} {
		kids = append(kids, h.child(root, n, script))
	}
	waited := false
	h.eventually("a child to wait for the limit", func() bool {
		for _, k := range kids {
			waited = waited || h.action(k).Phase == phase.WaitingForResources
		}
		return waited
	})
	for _, k := range kids {
		h.terminal(k, phase.Succeeded)
	}
	if _, err := os.Stat(filepath.Join(h.fixtures, "overlap")); err == nil {
		t.Fatal("two children ran at once under max_action_concurrency 1")
	}
	if err := h.state.Abort(h.ctx, root, "done", "tester"); err != nil {
		t.Fatal(err)
	}
	h.terminal(root, phase.Aborted)
}

// A TaskAction another manager made (it carries the managed-by label, and
// this manager's database has no such action) is left alone: neither run
// nor refused.
func TestForeignTaskActionsLeftAlone(t *testing.T) {
	h := newHarness(t, dbtest.SQLiteDSN(t))
	foreign := &v1.TaskAction{ObjectMeta: metav1.ObjectMeta{Namespace: "flyte", Name: "theirs-a0", Labels: map[string]string{LabelManaged: managedBy}},
		Spec: v1.TaskActionSpec{Project: "p", Domain: "development", RunName: "theirs", ActionName: "a0", TaskTemplate: []byte("x")}}
	if err := h.k.Create(h.ctx, foreign); err != nil {
		t.Fatal(err)
	}
	// A run of our own after it: once it completed, the foreign one was
	// reconciled too (one queue), and must still be untouched.
	h.terminal(h.run("rours", succeed, taskOpts{}), phase.Succeeded)
	got := &v1.TaskAction{}
	if err := h.k.Get(h.ctx, objKey(foreign), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 0 || len(got.Finalizers) != 0 {
		t.Fatalf("the foreign TaskAction was touched: %+v %+v", got.Status, got.Finalizers)
	}
	if _, err := h.st.Actions.Get(h.ctx, storeKey("p", "development", "theirs", "a0")); err == nil {
		t.Fatal("the foreign TaskAction became a run")
	}
}
