package v1_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "fmgr.dev/executor/api/v1"
)

// TestCRDInstalled: the generated CRD is accepted by a real API server and
// serves taskactions.flyte.org/v1 as a namespaced resource with a status
// subresource.
func TestCRDInstalled(t *testing.T) {
	needCluster(t)
	var crd apiextensionsv1.CustomResourceDefinition
	if err := cluster.client.Get(context.Background(), types.NamespacedName{Name: "taskactions.flyte.org"}, &crd); err != nil {
		t.Fatal(err)
	}
	established := false
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			established = true
		}
	}
	if !established {
		t.Errorf("CRD not established: %+v", crd.Status.Conditions)
	}
	if crd.Spec.Scope != apiextensionsv1.NamespaceScoped || crd.Spec.Names.Kind != "TaskAction" || len(crd.Spec.Versions) != 1 {
		t.Fatalf("CRD spec %+v", crd.Spec)
	}
	ver := crd.Spec.Versions[0]
	if ver.Name != "v1" || !ver.Served || !ver.Storage || ver.Subresources == nil || ver.Subresources.Status == nil {
		t.Errorf("version %s: served %v storage %v subresources %+v", ver.Name, ver.Served, ver.Storage, ver.Subresources)
	}
	if !slices.Contains(ver.Schema.OpenAPIV3Schema.Required, "spec") {
		t.Errorf("spec is not required: %v", ver.Schema.OpenAPIV3Schema.Required)
	}
}

// validSpec is a minimal task spec the CRD accepts.
func validSpec() map[string]any {
	return map[string]any{"runName": "r1", "project": "flytesnacks", "domain": "development", "actionName": "a0"}
}

// TestValidation creates TaskActions from raw objects (so a field can be
// missing or mistyped, which the Go type cannot express) and checks that the
// CRD's schema accepts the valid ones and rejects each invalid one as Invalid,
// naming the offending field, without creating anything.
func TestValidation(t *testing.T) {
	ns := needCluster(t)
	ctx := context.Background()
	cases := []struct {
		name  string
		edit  func(spec map[string]any) // nil spec map means: no spec at all
		field string                    // "" = must be accepted
	}{
		{"minimal", func(map[string]any) {}, ""},
		{"every field", func(s map[string]any) {
			s["parentActionName"] = "a0"
			s["actionName"] = strings.Repeat("c", 30)
			s["runName"] = strings.Repeat("r", 30)
			s["project"] = strings.Repeat("p", 63)
			s["domain"] = strings.Repeat("d", 63)
			s["actionType"] = "condition"
			s["conditionSpec"] = "CgR3YWl0"
			s["inputUri"] = "s3://bucket/p/d/r1/inputs/inputs.pb"
			s["runOutputBase"] = "s3://bucket/p/d/r1/"
			s["cacheKey"] = strings.Repeat("k", 256)
			s["taskType"] = strings.Repeat("t", 63)
			s["shortName"] = strings.Repeat("s", 63)
			s["taskTemplate"] = "EgZweXRob24="
			s["envVars"] = map[string]any{"A": "1", "B": ""}
			s["interruptible"] = true
			s["group"] = strings.Repeat("g", 256)
		}, ""},
		{"task action type", func(s map[string]any) { s["actionType"] = "task" }, ""},
		{"no spec", nil, "spec"},
		{"runName of 31 characters", func(s map[string]any) { s["runName"] = strings.Repeat("r", 31) }, "spec.runName"},
		{"empty runName", func(s map[string]any) { s["runName"] = "" }, "spec.runName"},
		{"missing runName", func(s map[string]any) { delete(s, "runName") }, "spec.runName"},
		{"missing project", func(s map[string]any) { delete(s, "project") }, "spec.project"},
		{"project of 64 characters", func(s map[string]any) { s["project"] = strings.Repeat("p", 64) }, "spec.project"},
		{"missing domain", func(s map[string]any) { delete(s, "domain") }, "spec.domain"},
		{"domain of 64 characters", func(s map[string]any) { s["domain"] = strings.Repeat("d", 64) }, "spec.domain"},
		{"missing actionName", func(s map[string]any) { delete(s, "actionName") }, "spec.actionName"},
		{"actionName of 31 characters", func(s map[string]any) { s["actionName"] = strings.Repeat("a", 31) }, "spec.actionName"},
		{"empty parentActionName", func(s map[string]any) { s["parentActionName"] = "" }, "spec.parentActionName"},
		{"parentActionName of 31 characters", func(s map[string]any) { s["parentActionName"] = strings.Repeat("a", 31) }, "spec.parentActionName"},
		{"bad actionType", func(s map[string]any) { s["actionType"] = "workflow" }, "spec.actionType"},
		{"cacheKey of 257 characters", func(s map[string]any) { s["cacheKey"] = strings.Repeat("k", 257) }, "spec.cacheKey"},
		{"taskType of 64 characters", func(s map[string]any) { s["taskType"] = strings.Repeat("t", 64) }, "spec.taskType"},
		{"shortName of 64 characters", func(s map[string]any) { s["shortName"] = strings.Repeat("s", 64) }, "spec.shortName"},
		{"group of 257 characters", func(s map[string]any) { s["group"] = strings.Repeat("g", 257) }, "spec.group"},
		{"envVars value not a string", func(s map[string]any) { s["envVars"] = map[string]any{"A": int64(1)} }, "spec.envVars.A"},
		{"interruptible not a bool", func(s map[string]any) { s["interruptible"] = "yes" }, "spec.interruptible"},
		{"runName not a string", func(s map[string]any) { s["runName"] = int64(7) }, "spec.runName"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": v1.GroupVersion.String(),
				"kind":       "TaskAction",
				"metadata":   map[string]any{"name": fmt.Sprintf("case-%d", i), "namespace": ns},
			}}
			if c.edit != nil {
				spec := validSpec()
				c.edit(spec)
				obj.Object["spec"] = spec
			}
			err := cluster.client.Create(ctx, obj)
			if c.field == "" {
				if err != nil {
					t.Fatalf("valid TaskAction rejected: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("err = %v, want Invalid", err)
			}
			if fields := causeFields(err); !slices.Contains(fields, c.field) {
				t.Errorf("rejection names %v, want %s (%v)", fields, c.field, err)
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(obj.GroupVersionKind())
			if err := cluster.client.Get(ctx, client.ObjectKeyFromObject(obj), got); !apierrors.IsNotFound(err) {
				t.Errorf("a rejected TaskAction exists: %v", err)
			}
		})
	}
}

// causeFields are the field paths an Invalid error names.
func causeFields(err error) []string {
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Details == nil {
		return nil
	}
	var out []string
	for _, c := range st.Status().Details.Causes {
		out = append(out, c.Field)
	}
	return out
}

func newTaskAction(ns, run, action string) *v1.TaskAction {
	ta := &v1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: v1.ObjectName(run, action), Namespace: ns},
		Spec: v1.TaskActionSpec{
			RunName: run, ActionName: action, Project: "flytesnacks", Domain: "development",
			TaskType: "python", TaskTemplate: []byte{0x12, 0x06, 'p', 'y', 't', 'h', 'o', 'n'},
			EnvVars: map[string]string{"A": "1"},
		},
	}
	ta.Labels = ta.StandardLabels()
	return ta
}

// TestStatusSubresource: a status write leaves the spec as it was, a spec
// write leaves the status as it was, and the status has a schema too.
func TestStatusSubresource(t *testing.T) {
	ns := needCluster(t)
	ctx := context.Background()
	ta := newTaskAction(ns, "r1", "a0")
	if err := cluster.client.Create(ctx, ta); err != nil {
		t.Fatal(err)
	}
	gen := ta.Generation

	// A status write that also tries to change the spec.
	ta.Spec.TaskType = "changed-by-status-write"
	ta.Status.Attempts = 2
	ta.Status.ErrorState = &v1.ErrorState{Code: "OOM", Kind: v1.ErrorKindUser, Message: "killed"}
	ta.SetCondition(v1.ConditionProgressing, metav1.ConditionTrue, v1.ReasonRetryableFailure, "attempt 1 failed")
	if err := cluster.client.Status().Update(ctx, ta); err != nil {
		t.Fatal(err)
	}
	got := get(t, ta)
	if got.Spec.TaskType != "python" {
		t.Errorf("a status write changed spec.taskType to %q", got.Spec.TaskType)
	}
	if got.Status.Attempts != 2 || got.Status.ErrorState == nil || got.Status.ErrorState.Code != "OOM" ||
		got.Condition(v1.ConditionProgressing).Reason != v1.ReasonRetryableFailure {
		t.Errorf("status not written: %+v", got.Status)
	}
	if got.Generation != gen {
		t.Errorf("a status write changed the generation %d -> %d", gen, got.Generation)
	}

	// A spec write that also tries to change the status.
	got.Spec.ShortName = "renamed"
	got.Status.Attempts = 9
	got.Status.Conditions = nil
	if err := cluster.client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	again := get(t, ta)
	if again.Spec.ShortName != "renamed" {
		t.Errorf("spec write lost: shortName %q", again.Spec.ShortName)
	}
	if again.Status.Attempts != 2 || again.Condition(v1.ConditionProgressing) == nil {
		t.Errorf("a spec write changed the status: %+v", again.Status)
	}
	if again.Generation != gen+1 {
		t.Errorf("a spec write left the generation at %d", again.Generation)
	}

	// The status schema rejects what the reconciler must never write.
	for _, bad := range []struct {
		name  string
		edit  func(*v1.TaskAction)
		field string
	}{
		{"unknown error kind", func(x *v1.TaskAction) { x.Status.ErrorState = &v1.ErrorState{Kind: "OOPS"} }, "status.errorState.kind"},
		{"condition without reason", func(x *v1.TaskAction) {
			x.Status.Conditions = []metav1.Condition{{Type: v1.ConditionFailed, Status: metav1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		}, "status.conditions[0].reason"},
		{"phase entry without phase", func(x *v1.TaskAction) {
			x.Status.PhaseHistory = []v1.PhaseTransition{{OccurredAt: metav1.Now()}}
		}, "status.phaseHistory[0].phase"},
	} {
		x := get(t, ta)
		bad.edit(x)
		err := cluster.client.Status().Update(ctx, x)
		if !apierrors.IsInvalid(err) || !slices.Contains(causeFields(err), bad.field) {
			t.Errorf("%s: err = %v (fields %v), want Invalid naming %s", bad.name, err, causeFields(err), bad.field)
		}
	}
	if after := get(t, ta); after.Status.Attempts != 2 || after.Status.ErrorState.Kind != v1.ErrorKindUser {
		t.Errorf("a rejected status write changed the status: %+v", after.Status)
	}
}

func get(t *testing.T, ta *v1.TaskAction) *v1.TaskAction {
	t.Helper()
	var out v1.TaskAction
	if err := cluster.client.Get(context.Background(), client.ObjectKeyFromObject(ta), &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// TestSampleAccepted: the sample in config/samples passes the CRD's
// validation as it is, created by a client and by kubectl apply -k.
func TestSampleAccepted(t *testing.T) {
	ns := needCluster(t)
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "flyte_v1_taskaction.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(js); err != nil {
		t.Fatal(err)
	}
	obj.SetNamespace(ns)
	if err := cluster.client.Create(context.Background(), obj); err != nil {
		t.Fatalf("the sample is rejected: %v", err)
	}
	var ta v1.TaskAction
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &ta); err != nil {
		t.Fatal(err)
	}
	if len(ta.Spec.TaskTemplate) == 0 || !maps.Equal(ta.Labels, ta.StandardLabels()) {
		t.Errorf("stored sample %+v", ta)
	}

	// The way docs/kubernetes.md applies it.
	ns = needKubectl(t)
	kubectl(t, "apply", "-n", ns, "-k", filepath.Join("..", "..", "config", "samples"))
	var applied v1.TaskAction
	if err := cluster.client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: ta.Name}, &applied); err != nil {
		t.Fatalf("kubectl apply -k config/samples: %v", err)
	}
}
