package kube

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/copilot"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
)

// A raw container's Pod stages its data: emptyDirs at the task's data
// directories, an init container downloading the inputs and a sidecar
// uploading the outputs, both the manager's image running `flyte-manager
// copilot` with the job the manager encoded; without the copilot's image
// the Pod is refused, saying which setting is missing.
func TestRawContainerPods(t *testing.T) {
	outputs := &core.TypedInterface{Outputs: &core.VariableMap{Variables: []*core.VariableEntry{{Key: "x",
		Value: &core.Variable{Type: &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_INTEGER}}}}}}}
	tmpl := &core.TaskTemplate{Type: "raw-container", Interface: outputs, Target: &core.TaskTemplate_Container{Container: &core.Container{
		Image: "alpine:3", Args: []string{"/bin/sh", "-c", "echo 1 > /out/x"},
		DataConfig: &core.DataLoadingConfig{Enabled: true, InputPath: "/in", OutputPath: "/out"}}}}
	job, err := copilot.NewJob(tmpl, &task.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	job.InputsURI = "/store/run/a0/inputs.pb"
	l := &attempt.Launch{Spec: &task.TaskSpec{TaskTemplate: tmpl}, Attempt: 1, OutDir: "/store/run/a0/1",
		Args: []string{"/bin/sh", "-c", "echo 1 > /out/x"}, Raw: job}
	ta := &v1.TaskAction{}

	if _, err := buildPod(ta, l, podSpec{}); err == nil || !strings.Contains(err.Error(), "executor.kubernetes.copilotImage") {
		t.Errorf("a raw container without the copilot's image: %v", err)
	}
	pod, err := buildPod(ta, l, podSpec{raw: rawOptions{image: "fm:1", storage: "file:///store"}})
	if err != nil {
		t.Fatal(err)
	}
	main := pod.Spec.Containers[0]
	if main.Name != containerName || main.Image != "alpine:3" || main.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("task container %s %s %s", main.Name, main.Image, main.TerminationMessagePolicy)
	}
	mounts := map[string]string{}
	for _, m := range main.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir == nil {
			t.Errorf("volume %s is not an emptyDir", v.Name)
		}
	}
	if mounts["/in"] != rawInputsVolume || mounts["/out"] != rawOutputVolume || len(pod.Spec.Volumes) != 2 {
		t.Errorf("the task's data directories are not the emptyDirs: mounts %v, volumes %v", mounts, pod.Spec.Volumes)
	}
	if len(pod.Spec.InitContainers) != 1 || len(pod.Spec.Containers) != 2 {
		t.Fatalf("want one init container and a sidecar, got %d and %d containers", len(pod.Spec.InitContainers), len(pod.Spec.Containers))
	}
	for _, c := range []corev1.Container{pod.Spec.InitContainers[0], pod.Spec.Containers[1]} {
		if c.Image != "fm:1" || !slices.Equal(c.Command[:2], []string{"flyte-manager", "copilot"}) {
			t.Errorf("%s runs %v in %s", c.Name, c.Command, c.Image)
		}
		at := slices.Index(c.Command, "--job")
		if at < 0 {
			t.Fatalf("%s has no --job: %v", c.Name, c.Command)
		}
		back, err := copilot.Decode(c.Command[at+1], &task.Inputs{})
		if err != nil || back.InputDir != "/in" || back.OutputDir != "/out" || len(back.Interface.GetOutputs().GetVariables()) != 1 {
			t.Errorf("%s's job decodes to %+v, %v", c.Name, back, err)
		}
	}
	dl, up := pod.Spec.InitContainers[0], pod.Spec.Containers[1]
	if dl.Command[2] != "download" || !slices.Contains(dl.Command, job.InputsURI) || dl.VolumeMounts[0].MountPath != "/in" {
		t.Errorf("the init container: %v %v", dl.Command, dl.VolumeMounts)
	}
	if up.Command[2] != "upload" || !slices.Contains(up.Command, l.OutDir) || up.VolumeMounts[0].MountPath != "/out" ||
		!slices.ContainsFunc(up.Env, func(e corev1.EnvVar) bool {
			return e.Name == envPodName && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
		}) {
		t.Errorf("the sidecar: %v %v %v", up.Command, up.VolumeMounts, up.Env)
	}

	// Other tasks' Pods are as they were: one container, no volumes.
	plain := &attempt.Launch{Spec: &task.TaskSpec{TaskTemplate: &core.TaskTemplate{Target: &core.TaskTemplate_Container{Container: &core.Container{
		Image: "python:3"}}}}, Attempt: 1, Args: []string{"a0"}}
	pod, err = buildPod(ta, plain, podSpec{raw: rawOptions{image: "fm:1"}})
	if err != nil || len(pod.Spec.Containers) != 1 || len(pod.Spec.InitContainers) != 0 || len(pod.Spec.Volumes) != 0 {
		t.Errorf("a Python task's Pod: %v %v", pod, err)
	}
}
