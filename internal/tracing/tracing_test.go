package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/project"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/config"
)

func TestRequestAttributes(t *testing.T) {
	run := &common.RunIdentifier{Org: "o", Project: "p", Domain: "d", Name: "r"}
	for name, tc := range map[string]struct {
		msg  proto.Message
		want map[attribute.Key]string
	}{
		"run":     {&workflow.GetRunDetailsRequest{RunId: run}, map[attribute.Key]string{AttrProject: "p", AttrDomain: "d", AttrRun: "r"}},
		"action":  {&workflow.GetActionDetailsRequest{ActionId: &common.ActionIdentifier{Run: run, Name: "a0"}}, map[attribute.Key]string{AttrProject: "p", AttrDomain: "d", AttrRun: "r", AttrAction: "a0"}},
		"project": {&workflow.CreateRunRequest{Id: &workflow.CreateRunRequest_ProjectId{ProjectId: &common.ProjectIdentifier{Name: "p", Domain: "d"}}}, map[attribute.Key]string{AttrProject: "p", AttrDomain: "d"}},
		// A task spec is a payload: nothing of it but the names above.
		"inputs": {&workflow.CreateRunRequest{Id: &workflow.CreateRunRequest_RunId{RunId: run},
			InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: &task.Inputs{Literals: []*task.NamedLiteral{{Name: "password"}}}}},
			map[attribute.Key]string{AttrProject: "p", AttrDomain: "d", AttrRun: "r"}},
		"none": {&project.ListProjectsRequest{}, map[attribute.Key]string{}},
		"nil":  {nil, map[attribute.Key]string{}},
	} {
		got := map[attribute.Key]string{}
		for _, kv := range RequestAttributes(tc.msg) {
			got[kv.Key] = kv.Value.AsString()
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
			continue
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", name, k, got[k], v)
			}
		}
	}
}

func TestOffIsNoop(t *testing.T) {
	p, err := New(context.Background(), config.Tracing{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Enabled() {
		t.Fatal("tracing is on without telemetry.tracing.enabled")
	}
	_, span := p.Tracer("t").Start(context.Background(), "x")
	if span.IsRecording() {
		t.Error("a span of the off provider records")
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

func TestHTTPTracesURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://c:4318":                    "http://c:4318/v1/traces",
		"http://c:4318/":                   "http://c:4318/v1/traces",
		"https://v.example/otlp/v1/traces": "https://v.example/otlp/v1/traces",
	} {
		if got := httpTracesURL(in); got != want {
			t.Errorf("httpTracesURL(%q) = %q, want %q", in, got, want)
		}
	}
}
