package kube

import (
	"strings"
	"testing"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/copilot"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
)

// A raw container with data fails at once on this executor, saying why; one
// without inputs or outputs gets its Pod in its own image.
func TestRawContainerPods(t *testing.T) {
	launch := func(iface *core.TypedInterface) *attempt.Launch {
		tmpl := &core.TaskTemplate{Type: "raw-container", Interface: iface, Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image: "alpine:3", Args: []string{"/bin/sh", "-c", "true"},
			DataConfig: &core.DataLoadingConfig{Enabled: true}}}}
		job, err := copilot.NewJob(tmpl, &task.Inputs{})
		if err != nil {
			t.Fatal(err)
		}
		return &attempt.Launch{Spec: &task.TaskSpec{TaskTemplate: tmpl}, Attempt: 1, Args: []string{"/bin/sh", "-c", "true"}, Raw: job}
	}
	ta := &v1.TaskAction{}
	outputs := &core.TypedInterface{Outputs: &core.VariableMap{Variables: []*core.VariableEntry{{Key: "x",
		Value: &core.Variable{Type: &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_INTEGER}}}}}}}
	if _, err := buildPod(ta, launch(outputs), podSpec{}); err == nil || !strings.Contains(err.Error(), "not supported by the kubernetes executor") ||
		!strings.Contains(err.Error(), "/var/outputs") {
		t.Errorf("a raw container with an output: %v", err)
	}
	pod, err := buildPod(ta, launch(&core.TypedInterface{}), podSpec{})
	if err != nil || pod.Spec.Containers[0].Image != "alpine:3" {
		t.Errorf("a raw container without data: %v %v", pod, err)
	}
}
