package testcluster_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"fmgr.dev/executor/testcluster"
	"fmgr.dev/internal/testkit"
)

var taskactions = schema.GroupVersionResource{Group: "flyte.org", Version: "v1", Resource: "taskactions"}

func taskAction(name string, owner *unstructured.Unstructured) *unstructured.Unstructured {
	ta := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "flyte.org/v1",
		"kind":       "TaskAction",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       map[string]any{"actionName": name},
	}}
	if owner != nil {
		ta.SetOwnerReferences([]metav1.OwnerReference{ownerRef(owner)})
	}
	return ta
}

func ownerRef(owner *unstructured.Unstructured) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID()}
}

// TestOwnerReferenceGC: objects whose owners are gone are deleted, down a
// chain of TaskActions to their Pods (whose processes stop), in the
// background and in the foreground; an object whose owner lives stays.
func TestOwnerReferenceGC(t *testing.T) {
	c := testcluster.ForTest(t, testcluster.Options{CRDDirs: []string{"testdata/crd"}})
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	tas := dyn.Resource(taskactions).Namespace(ns)
	mk := func(name string, owner *unstructured.Unstructured) *unstructured.Unstructured {
		t.Helper()
		got, err := tas.Create(ctx, taskAction(name, owner), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create taskaction %s: %v", name, err)
		}
		return got
	}
	podOf := func(name string, owner *unstructured.Unstructured) {
		t.Helper()
		p := pod(name, "sleep 600")
		p.OwnerReferences = []metav1.OwnerReference{ownerRef(owner)}
		create(t, c, p)
	}
	goneTA := func(name string) func() (bool, error) {
		return func() (bool, error) {
			_, err := tas.Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), err
		}
	}
	gonePod := func(name string) func() (bool, error) {
		return func() (bool, error) {
			_, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), err
		}
	}
	exists := func(name string) {
		t.Helper()
		if _, err := tas.Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("taskaction %s: %v, want it kept", name, err)
		}
	}

	// Background: a0 → a1 → pod; deleting a0 takes a1, then the pod.
	a0 := mk("a0", nil)
	a1 := mk("a1", a0)
	podOf("a1-pod", a1)
	waitPod(t, c, "a1-pod", "to run", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	// A sibling tree whose root stays.
	b0 := mk("b0", nil)
	mk("b1", b0)
	if err := tas.Delete(ctx, "a0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyErr(t, "a1 to be collected", testcluster.Patience, goneTA("a1"))
	testkit.EventuallyErr(t, "a1-pod to be collected", testcluster.Patience, gonePod("a1-pod"))

	// A dangling owner (never existed) is an owner that is gone.
	dangling := taskAction("orphan", nil)
	dangling.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "flyte.org/v1", Kind: "TaskAction", Name: "never", UID: types.UID("00000000-0000-0000-0000-000000000000")}})
	if _, err := tas.Create(ctx, dangling, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyErr(t, "an object with a dangling owner to be collected", testcluster.Patience, goneTA("orphan"))
	exists("b0")
	exists("b1")

	// Foreground: c0 stays (with its deletion pending) until c1 is gone.
	c0 := mk("c0", nil)
	mk("c1", c0)
	fg := metav1.DeletePropagationForeground
	if err := tas.Delete(ctx, "c0", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyErr(t, "c1 to be collected", testcluster.Patience, goneTA("c1"))
	testkit.EventuallyErr(t, "c0 to be deleted after its dependents", testcluster.Patience, goneTA("c0"))

	// A Pod owned by an object of a kind the collector does not watch.
	cm, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := pod("cm-pod", "sleep 600")
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}}
	create(t, c, p)
	if err := c.Client.CoreV1().ConfigMaps(ns).Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyErr(t, "cm-pod to be collected", testcluster.Patience, gonePod("cm-pod"))
	exists("b1")
}
