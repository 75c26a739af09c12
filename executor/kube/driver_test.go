package kube

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/executor/contract"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runstate"
)

// A run goes from CreateRun to a TaskAction, to a Pod with the task-process
// contract, to SUCCEEDED in the database and Completed on the TaskAction.
func TestRunToCompletion(t *testing.T) {
	h := newHarness(t, dbtest.SQLiteDSN(t))
	key := h.run("rok", succeed, taskOpts{})
	a := h.terminal(key, phase.Succeeded)
	if a.Attempts != 1 {
		t.Fatalf("attempts %d", a.Attempts)
	}

	ta, err := h.taskAction(key)
	if err != nil {
		t.Fatal(err)
	}
	h.eventually("the TaskAction to show the end", func() bool {
		ta, err = h.taskAction(key)
		return err == nil && condition(ta, v1.ConditionSucceeded) == "Completed/True"
	})
	for c, want := range map[string]string{v1.ConditionProgressing: "Completed/False", v1.ConditionFailed: "Completed/False"} {
		if got := condition(ta, c); got != want {
			t.Errorf("condition %s = %s, want %s", c, got, want)
		}
	}
	if ta.Spec.RunName != "rok" || ta.Spec.ActionName != "a0" || ta.Spec.TaskType != "python" || len(ta.Spec.TaskTemplate) == 0 ||
		!slices.Contains(ta.Finalizers, v1.Finalizer) || ta.Labels[v1.LabelRun] != "rok" || ta.Labels[v1.LabelIsRoot] != "true" {
		t.Errorf("TaskAction %+v", ta.ObjectMeta)
	}
	phases := []string{}
	for _, p := range ta.Status.PhaseHistory {
		phases = append(phases, p.Phase)
	}
	if phases[len(phases)-1] != "SUCCEEDED" {
		t.Errorf("phase history %v", phases)
	}

	pod, err := h.pod(key, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	out := runstate.OutputDir(a, 1)
	if c.Name != containerName || c.Image != "ignored" || pod.Spec.RestartPolicy != corev1.RestartPolicyNever ||
		!slices.Equal(c.Command[:2], []string{"sh", "-c"}) || c.Command[5] != out ||
		env[contract.EnvActionName] != "a0" || env[contract.EnvRunName] != "rok" || env[contract.EnvEndpoint] != "127.0.0.1:1" ||
		env["FIXTURES"] != h.fixtures || c.Resources.Limits.Memory().String() != "64Mi" {
		t.Errorf("pod container %+v\nenv %v", c, env)
	}
	if len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].UID != ta.UID || pod.Labels[LabelManaged] != managedBy || pod.Labels[labelAttempt] != "1" {
		t.Errorf("pod metadata %+v", pod.ObjectMeta)
	}
	if _, err := h.pod(key, 2); !apierrors.IsNotFound(err) {
		t.Errorf("a second Pod exists: %v", err)
	}
	if !strings.HasPrefix(ta.Name, "p-development-rok-a0") {
		t.Errorf("TaskAction name %q", ta.Name)
	}
	// What the run cost the API server, for the record (make bench
	// measures it at scale).
	for _, w := range []struct{ verb, kind string }{{"create", "TaskAction"}, {"create", "Pod"}, {"update/status", "TaskAction"}, {"update", "TaskAction"}, {"delete", "Pod"}} {
		t.Logf("API writes %s %s: %v", w.verb, w.kind, testutil.ToFloat64(h.d.metrics.apiWrites.WithLabelValues(w.verb, w.kind)))
	}
}
