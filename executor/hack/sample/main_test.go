package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/gen/go/flyteidl2/core"
)

// samplePath is the committed sample, relative to this package.
var samplePath = filepath.Join("..", "..", "config", "samples", "flyte_v1_taskaction.yaml")

// TestSampleIsCurrent: the committed sample is exactly what the generator
// writes, so nobody edits the base64 by hand or forgets to regenerate.
func TestSampleIsCurrent(t *testing.T) {
	want, err := render()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(samplePath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run `make -C executor generate`", samplePath)
	}
}

// TestSampleIsRunnable decodes the committed sample as a TaskAction and its
// taskTemplate as a TaskTemplate, and checks it is the task a reconciler can
// finish: a raw container that echoes and declares no outputs.
func TestSampleIsRunnable(t *testing.T) {
	raw, err := os.ReadFile(samplePath)
	if err != nil {
		t.Fatal(err)
	}
	var ta v1.TaskAction
	if err := yaml.UnmarshalStrict(raw, &ta); err != nil {
		t.Fatalf("sample is no TaskAction: %v", err)
	}
	if ta.APIVersion != v1.GroupVersion.String() || ta.Kind != "TaskAction" {
		t.Errorf("apiVersion/kind %s/%s", ta.APIVersion, ta.Kind)
	}
	if want := v1.ObjectName(ta.Spec.Project+"-"+ta.Spec.Domain+"-"+ta.Spec.RunName, ta.Spec.ActionName); ta.Name != want {
		t.Errorf("name %q, want %q", ta.Name, want)
	}
	for k, v := range ta.StandardLabels() {
		if ta.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, ta.Labels[k], v)
		}
	}
	if !ta.IsRoot() || ta.Type() != v1.ActionTypeTask {
		t.Errorf("spec %+v", ta.Spec)
	}
	// Paths are the manager's business: a path written here would name a
	// place in somebody else's storage that the Pods may not reach.
	if ta.Spec.InputURI != "" || ta.Spec.RunOutputBase != "" {
		t.Errorf("the sample names inputUri %q, runOutputBase %q; want neither (the manager picks its own)", ta.Spec.InputURI, ta.Spec.RunOutputBase)
	}

	var tmpl core.TaskTemplate
	if err := proto.Unmarshal(ta.Spec.TaskTemplate, &tmpl); err != nil {
		t.Fatalf("taskTemplate is no TaskTemplate: %v", err)
	}
	if tmpl.GetType() != ta.Spec.TaskType || tmpl.GetType() != "raw-container" {
		t.Errorf("template type %q, spec.taskType %q", tmpl.GetType(), ta.Spec.TaskType)
	}
	c := tmpl.GetContainer()
	if c.GetImage() == "" || len(c.GetCommand()) != 3 || c.GetCommand()[0] != "sh" || c.GetCommand()[1] != "-c" {
		t.Errorf("container %v", c)
	}
	if n := len(tmpl.GetInterface().GetOutputs().GetVariables()); n != 0 {
		t.Errorf("the sample's task declares %d outputs, want none", n)
	}
	if id := tmpl.GetId(); id.GetProject() != ta.Spec.Project || id.GetDomain() != ta.Spec.Domain || id.GetName() == "" {
		t.Errorf("template id %v", id)
	}
}
