package kube

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"fmgr.dev/executor/contract"
	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/appruntime"
)

func appTarget(name string, c *core.Container) appruntime.Target {
	return appruntime.Target{
		Key:      appruntime.Key{Org: "o", Project: "flytesnacks", Domain: "development", Name: name},
		Revision: 3,
		Spec:     &pb.Spec{AppPayload: &pb.Spec_Container{Container: c}},
	}
}

func TestBuildAppObjects(t *testing.T) {
	c := &core.Container{
		Image:   "ghcr.io/example/app:1",
		Command: []string{"fserve"},
		Args:    []string{"--raw", "{{.rawOutputDataPrefix}}", "app.py"},
		Env:     []*core.KeyValuePair{{Key: "GREETING", Value: "hi"}},
		Ports:   []*core.ContainerPort{{ContainerPort: 9000}},
		Resources: &core.Resources{Requests: []*core.Resources_ResourceEntry{
			{Name: core.Resources_MEMORY, Value: "256Mi"},
		}},
	}
	dep, svc, err := buildAppObjects(appTarget("My_App", c), appObjectsSpec{Namespace: "ns", Replicas: 2,
		Endpoint: "manager:8090", RawDataPrefix: "s3://bucket/raw/", Env: []contract.KV{{Key: "FLYTE_AWS_ENDPOINT", Value: "http://s3"}}})
	if err != nil {
		t.Fatal(err)
	}
	if dep.Name != svc.Name || dep.Namespace != "ns" || svc.Namespace != "ns" {
		t.Fatalf("names: deployment %s/%s, service %s/%s", dep.Namespace, dep.Name, svc.Namespace, svc.Name)
	}
	if errs := validation.IsDNS1035Label(svc.Name); len(errs) != 0 {
		t.Fatalf("service name %q: %v", svc.Name, errs)
	}
	if appObjectName(appruntime.Key{Name: "my-app"}) == svc.Name {
		t.Fatal("My_App and my-app share a name")
	}
	if *dep.Spec.Replicas != 2 {
		t.Fatalf("replicas %d", *dep.Spec.Replicas)
	}
	for k, v := range dep.Spec.Selector.MatchLabels {
		if dep.Spec.Template.Labels[k] != v || svc.Spec.Selector[k] != v {
			t.Fatalf("label %s=%s does not select the Pods", k, v)
		}
	}
	if dep.Labels[LabelApp] == "" || dep.Labels[LabelManaged] != managedBy {
		t.Fatalf("owner labels missing: %v", dep.Labels)
	}
	ctr := dep.Spec.Template.Spec.Containers[0]
	if ctr.Image != c.Image || ctr.Ports[0].ContainerPort != 9000 || svc.Spec.Ports[0].Port != 9000 {
		t.Fatalf("container %+v, service ports %+v", ctr, svc.Spec.Ports)
	}
	if got := strings.Join(ctr.Args, " "); got != "--raw s3://bucket/raw/flytesnacks/development/My_App app.py" {
		t.Fatalf("args %q", got)
	}
	env := map[string]string{}
	for _, e := range ctr.Env {
		env[e.Name] = e.Value
	}
	for k, v := range map[string]string{"GREETING": "hi", contract.EnvPort: "9000", contract.EnvProject: "flytesnacks",
		contract.EnvEndpoint: "manager:8090", "FLYTE_AWS_ENDPOINT": "http://s3"} {
		if env[k] != v {
			t.Errorf("env %s=%q, want %q", k, env[k], v)
		}
	}
	if q := ctr.Resources.Limits[corev1.ResourceMemory]; q.String() != "256Mi" {
		t.Errorf("memory limit %s", q.String())
	}
	if ctr.ReadinessProbe == nil || ctr.ReadinessProbe.TCPSocket == nil {
		t.Error("no readiness probe: a Pod would count as available before it listens")
	}

	if _, _, err := buildAppObjects(appTarget("a", &core.Container{}), appObjectsSpec{Endpoint: "m:1"}); err == nil {
		t.Error("an app without an image was accepted")
	}
	noContainer := appTarget("a", nil)
	noContainer.Spec = &pb.Spec{}
	if _, _, err := buildAppObjects(noContainer, appObjectsSpec{Endpoint: "m:1"}); err == nil {
		t.Error("an app without a container was accepted")
	}
}

func TestAppStatusOf(t *testing.T) {
	one, zero := int32(1), int32(0)
	dep := func(want, available int32) *appsv1.Deployment {
		w := want
		return &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &w}, Status: appsv1.DeploymentStatus{AvailableReplicas: available}}
	}
	waiting := func(reason string, last *corev1.ContainerStateTerminated) corev1.Pod {
		return corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Image: "img:1", RestartCount: 4,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "back-off"}},
			LastTerminationState: corev1.ContainerState{Terminated: last},
		}}}}
	}
	for _, tc := range []struct {
		name   string
		want   bool
		dep    *appsv1.Deployment
		pods   []corev1.Pod
		status pb.Status_DeploymentStatus
		sub    pb.Status_Substate
	}{
		{"stopped", false, dep(0, 0), nil, pb.Status_DEPLOYMENT_STATUS_STOPPED, pb.Status_SUBSTATE_UNSPECIFIED},
		{"no deployment yet", true, nil, nil, pb.Status_DEPLOYMENT_STATUS_DEPLOYING, pb.Status_INITIALIZING},
		{"starting", true, dep(one, 0), []corev1.Pod{{}}, pb.Status_DEPLOYMENT_STATUS_DEPLOYING, pb.Status_INITIALIZING},
		{"pulling", true, dep(one, 0), []corev1.Pod{waiting("ContainerCreating", nil)}, pb.Status_DEPLOYMENT_STATUS_DEPLOYING, pb.Status_PULLING_IMAGE},
		{"active", true, dep(one, 1), nil, pb.Status_DEPLOYMENT_STATUS_ACTIVE, pb.Status_RUNNING},
		{"scaled to zero", true, dep(zero, 0), nil, pb.Status_DEPLOYMENT_STATUS_ACTIVE, pb.Status_SCALED_TO_ZERO},
		{"image pull", true, dep(one, 0), []corev1.Pod{waiting("ImagePullBackOff", nil)}, pb.Status_DEPLOYMENT_STATUS_FAILED, pb.Status_IMAGE_PULL_ERROR},
		{"crash loop", true, dep(one, 0), []corev1.Pod{waiting("CrashLoopBackOff", &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"})},
			pb.Status_DEPLOYMENT_STATUS_FAILED, pb.Status_CRASH_LOOP},
		{"oom", true, dep(one, 0), []corev1.Pod{waiting("CrashLoopBackOff", &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"})},
			pb.Status_DEPLOYMENT_STATUS_FAILED, pb.Status_OOM_KILLED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := appStatusOf(tc.want, false, tc.dep, tc.pods)
			if r.Status != tc.status || r.Substate != tc.sub || r.Message == "" {
				t.Fatalf("got %v/%v %q, want %v/%v", r.Status, r.Substate, r.Message, tc.status, tc.sub)
			}
		})
	}
}
