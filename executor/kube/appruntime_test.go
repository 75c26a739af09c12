package kube

import (
	"context"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "fmgr.dev/executor/api/v1"
	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/appruntime"
)

type reports struct {
	mu  sync.Mutex
	got []appruntime.Report
}

func (r *reports) Report(_ context.Context, rep appruntime.Report) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, rep)
	return nil
}

func (r *reports) last(t *testing.T) appruntime.Report {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.got) == 0 {
		t.Fatal("no report")
	}
	return r.got[len(r.got)-1]
}

// TestAppsRuntimeObjects drives the runtime's reconcile by hand against a
// fake API server: objects created, status read back, stopped scales to
// zero, a crash-looping Pod fails the app, delete removes the objects.
func TestAppsRuntimeObjects(t *testing.T) {
	ctx := context.Background()
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	rep := &reports{}
	rt := NewApps(AppsConfig{Client: c, Placement: v1.Placement{Namespace: "flyte"}, Endpoint: func() string { return "manager:8090" }, Reporter: rep})

	tg := appTarget("hello", &core.Container{Image: "img:1", Args: []string{"fserve", "app.py"}})
	tg.Revision = 1
	rt.Apply(tg)
	rt.reconcileAll(ctx)
	nn := types.NamespacedName{Namespace: "flyte", Name: appObjectName(tg.Key)}
	var dep appsv1.Deployment
	if err := c.Get(ctx, nn, &dep); err != nil {
		t.Fatal(err)
	}
	var svc corev1.Service
	if err := c.Get(ctx, nn, &svc); err != nil {
		t.Fatal(err)
	}
	if *dep.Spec.Replicas != 1 {
		t.Fatalf("replicas %d", *dep.Spec.Replicas)
	}
	if r := rep.last(t); r.Status != pb.Status_DEPLOYMENT_STATUS_DEPLOYING || r.Key != tg.Key || r.Revision != 1 {
		t.Fatalf("report %+v", r)
	}

	dep.Status.AvailableReplicas = 1
	if err := c.Status().Update(ctx, &dep); err != nil {
		t.Fatal(err)
	}
	rt.reconcileAll(ctx)
	if r := rep.last(t); r.Status != pb.Status_DEPLOYMENT_STATUS_ACTIVE || r.Replicas != 1 {
		t.Fatalf("report %+v", r)
	}
	n := len(rep.got)
	rt.reconcileAll(ctx)
	if len(rep.got) != n {
		t.Fatal("an unchanged status was reported again")
	}

	// A new revision whose Pod crash-loops.
	tg.Revision = 2
	rt.Apply(tg)
	if err := c.Get(ctx, nn, &dep); err != nil {
		t.Fatal(err)
	}
	dep.Status.AvailableReplicas = 0
	if err := c.Status().Update(ctx, &dep); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hello-x", Namespace: "flyte", Labels: dep.Spec.Template.Labels}}
	pod.Labels[labelAppRevision] = "2"
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{RestartCount: 5,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	rt.reconcileAll(ctx)
	if r := rep.last(t); r.Substate != pb.Status_CRASH_LOOP || r.Revision != 2 {
		t.Fatalf("report %+v", r)
	}
	if reps := rt.Replicas(tg.Key); len(reps) != 1 || reps[0].Status != "crashed" {
		t.Fatalf("replicas %+v", reps)
	}

	// Stopped: the Deployment asks for no Pod.
	tg.Revision = 3
	tg.Spec.DesiredState = pb.Spec_DESIRED_STATE_STOPPED
	rt.Apply(tg)
	rt.reconcileAll(ctx)
	if err := c.Get(ctx, nn, &dep); err != nil {
		t.Fatal(err)
	}
	if *dep.Spec.Replicas != 0 {
		t.Fatalf("a stopped app's Deployment asks for %d replicas", *dep.Spec.Replicas)
	}
	if r := rep.last(t); r.Status != pb.Status_DEPLOYMENT_STATUS_STOPPED {
		t.Fatalf("report %+v", r)
	}

	// Deleted: both objects go.
	rt.Remove(tg.Key)
	rt.reconcileAll(ctx)
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}} {
		if err := c.Get(ctx, nn, obj); !apierrors.IsNotFound(err) {
			t.Fatalf("%T after delete: %v", obj, err)
		}
	}
	rt.mu.Lock()
	left := len(rt.apps)
	rt.mu.Unlock()
	if left != 0 {
		t.Fatal("the deleted app is still known")
	}

	// An app without an image fails with a clear message, creating nothing.
	bad := appTarget("bad", &core.Container{})
	bad.Revision = 1
	rt.Apply(bad)
	rt.reconcileAll(ctx)
	if r := rep.last(t); r.Status != pb.Status_DEPLOYMENT_STATUS_FAILED || r.Key != bad.Key {
		t.Fatalf("report %+v", r)
	}
}
