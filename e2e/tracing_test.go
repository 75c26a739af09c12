package e2e

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/testkit"
)

// otlpReceiver is an OTLP/HTTP trace collector in the test process: it
// decodes every export (protobuf, gzip or not) and keeps its spans with
// their resource's attributes.
type otlpReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	exports  int
	spans    []*tracepb.Span
	resource map[string]string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{resource: map[string]string{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
			t.Errorf("OTLP receiver: %s %s", req.Method, req.URL.Path)
			http.NotFound(w, req)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		ex := &coltracepb.ExportTraceServiceRequest{}
		if err == nil {
			err = proto.Unmarshal(b, ex)
		}
		if err != nil {
			t.Errorf("OTLP receiver: undecodable export: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.exports++
		for _, rs := range ex.GetResourceSpans() {
			for _, kv := range rs.GetResource().GetAttributes() {
				r.resource[kv.GetKey()] = kv.GetValue().GetStringValue()
			}
			for _, ss := range rs.GetScopeSpans() {
				r.spans = append(r.spans, ss.GetSpans()...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

// await waits for a span that match accepts and returns it.
func (r *otlpReceiver) await(t *testing.T, what string, match func(*tracepb.Span) bool) *tracepb.Span {
	t.Helper()
	var found *tracepb.Span
	testkit.Eventually(t, what, time.Minute, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		i := slices.IndexFunc(r.spans, match)
		if i >= 0 {
			found = r.spans[i]
		}
		return found != nil
	})
	return found
}

// spanAttr is the value of span's attribute key, as text ("" when absent).
func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return anyValueText(kv.GetValue())
		}
	}
	return ""
}

func anyValueText(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		if x.BoolValue {
			return "true"
		}
		return "false"
	}
	return v.String()
}

// shellTask is a task whose container is a shell script that writes empty
// outputs: it runs on the local executor without the SDK.
func shellTask(name string) *task.TaskSpec {
	return &task.TaskSpec{TaskTemplate: &core.TaskTemplate{
		Id:       &core.Identifier{ResourceType: core.ResourceType_TASK, Project: testProject, Domain: testDomain, Name: name, Version: "v1"},
		Type:     "python",
		Metadata: &core.TaskMetadata{},
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image: "ignored",
			Args:  []string{"/bin/sh", "-c", `: > "$1/outputs.pb"`, "sh", "{{.outputPrefix}}"},
		}},
	}}
}

// runToEnd creates a run of spec with a secret-looking input, through a
// call carrying traceparent (when not ""), and waits until it succeeded.
func runToEnd(t *testing.T, m *manager, spec *task.TaskSpec, traceparent string) *common.RunIdentifier {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	runs := runClient(m)
	req := connect.NewRequest(&workflow.CreateRunRequest{
		Id:           &workflow.CreateRunRequest_ProjectId{ProjectId: projectID()},
		Task:         &workflow.CreateRunRequest_TaskSpec{TaskSpec: spec},
		InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: &task.Inputs{Literals: stringInputs(8).GetLiterals()}},
	})
	req.Msg.GetInputs().Literals[0].Value.GetScalar().GetPrimitive().Value = &core.Primitive_StringValue{StringValue: tracingPayload}
	if traceparent != "" {
		req.Header().Set("traceparent", traceparent)
	}
	created, err := runs.CreateRun(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	run := created.Msg.GetRun().GetAction().GetId().GetRun()
	id := &common.ActionIdentifier{Run: run, Name: "a0"}
	testkit.EventuallyErr(t, "the run succeeds", 3*time.Minute, func() (bool, error) {
		d, err := runs.GetActionDetails(ctx, connect.NewRequest(&workflow.GetActionDetailsRequest{ActionId: id}))
		if err != nil {
			return false, err
		}
		p := d.Msg.GetDetails().GetStatus().GetPhase()
		if p > common.ActionPhase_ACTION_PHASE_SUCCEEDED {
			t.Fatalf("the run ended %s: %v", p, d.Msg.GetDetails().GetErrorInfo())
		}
		return p == common.ActionPhase_ACTION_PHASE_SUCCEEDED, nil
	})
	return run
}

// tracingPayload is an input value no span may carry.
const tracingPayload = "payload-s3cret-4d1f"

// TestTracing points a manager's telemetry.tracing at an in-process OTLP
// receiver: a CreateRun carrying a traceparent is a server span of that
// trace, with the procedure and the project; a server stream's span names
// the run it watches; the run's attempt is a span from QUEUED to
// SUCCEEDED with the run and action; nothing carries the run's input.
// Without the configuration (the default) nothing is exported, even with
// the standard OTEL_EXPORTER_OTLP_ENDPOINT set.
func TestTracing(t *testing.T) {
	recv := newOTLPReceiver(t)
	m := startManager(t, "sqlite://"+filepath.Join(t.TempDir(), "fm.db"), pathLocations,
		"FLYTE_MANAGER_TELEMETRY_TRACING_ENABLED=true",
		"FLYTE_MANAGER_TELEMETRY_TRACING_ENDPOINT="+recv.URL,
		"FLYTE_MANAGER_TELEMETRY_TRACING_RESOURCEATTRIBUTES=deployment.environment=e2e",
		"OTEL_BSP_SCHEDULE_DELAY=50") // export every 50 ms, not 5 s

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	run := runToEnd(t, m, shellTask("e2e.traced"), "00-"+traceID+"-"+parentID+"-01")

	create := recv.await(t, "the CreateRun span", func(s *tracepb.Span) bool {
		return s.GetName() == "flyteidl2.workflow.RunService/CreateRun"
	})
	if got := hex.EncodeToString(create.GetTraceId()); got != traceID {
		t.Errorf("CreateRun span trace id %s, want the caller's %s", got, traceID)
	}
	if got := hex.EncodeToString(create.GetParentSpanId()); got != parentID {
		t.Errorf("CreateRun span parent %s, want the caller's span %s", got, parentID)
	}
	if create.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("CreateRun span kind %s", create.GetKind())
	}
	for k, want := range map[string]string{"rpc.system": "connect_rpc", "rpc.service": "flyteidl2.workflow.RunService", "rpc.method": "CreateRun",
		"flyte.project": testProject, "flyte.domain": testDomain} {
		if got := spanAttr(create, k); got != want {
			t.Errorf("CreateRun span %s = %q, want %q", k, got, want)
		}
	}

	// A server stream: its span ends with the stream and names the run.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := runClient(m).WatchRunDetails(ctx, connect.NewRequest(&workflow.WatchRunDetailsRequest{RunId: run}))
	if err != nil {
		t.Fatal(err)
	}
	if !stream.Receive() {
		t.Fatalf("WatchRunDetails: %v", stream.Err())
	}
	_ = stream.Close()
	recv.await(t, "the WatchRunDetails span naming the run", func(s *tracepb.Span) bool {
		return s.GetName() == "flyteidl2.workflow.RunService/WatchRunDetails" && spanAttr(s, "flyte.run") == run.GetName()
	})

	att := recv.await(t, "the attempt span", func(s *tracepb.Span) bool {
		return s.GetName() == "attempt" && spanAttr(s, "flyte.run") == run.GetName()
	})
	for k, want := range map[string]string{"flyte.project": testProject, "flyte.domain": testDomain, "flyte.action": "a0",
		"flyte.attempt": "1", "flyte.phase": "SUCCEEDED"} {
		if got := spanAttr(att, k); got != want {
			t.Errorf("attempt span %s = %q, want %q", k, got, want)
		}
	}
	var phases []string
	for _, e := range att.GetEvents() {
		phases = append(phases, e.GetName())
	}
	if len(phases) < 3 || phases[0] != "QUEUED" || !slices.Contains(phases, "RUNNING") || phases[len(phases)-1] != "SUCCEEDED" {
		t.Errorf("attempt span events %v, want QUEUED ... RUNNING ... SUCCEEDED", phases)
	}
	if att.GetStartTimeUnixNano() > att.GetEndTimeUnixNano() || att.GetStartTimeUnixNano() > create.GetEndTimeUnixNano() {
		t.Errorf("attempt span from %d to %d, CreateRun ended at %d: it must start when the run was queued",
			att.GetStartTimeUnixNano(), att.GetEndTimeUnixNano(), create.GetEndTimeUnixNano())
	}

	recv.mu.Lock()
	for k, want := range map[string]string{"service.name": "flyte-manager", "deployment.environment": "e2e"} {
		if got := recv.resource[k]; got != want {
			t.Errorf("resource %s = %q, want %q", k, got, want)
		}
	}
	for _, s := range recv.spans {
		if b, _ := proto.Marshal(s); strings.Contains(string(b), tracingPayload) {
			t.Errorf("span %s carries the run's input", s.GetName())
		}
	}
	recv.mu.Unlock()

	// Off by default: a manager with the standard variables pointing at
	// a receiver, but no telemetry.tracing, exports nothing, even when it
	// shuts down (which would flush what it buffered).
	quiet := newOTLPReceiver(t)
	off := startManager(t, "sqlite://"+filepath.Join(t.TempDir(), "fm.db"), pathLocations,
		"OTEL_EXPORTER_OTLP_ENDPOINT="+quiet.URL, "OTEL_BSP_SCHEDULE_DELAY=50")
	runToEnd(t, off, shellTask("e2e.untraced"), "00-"+traceID+"-"+parentID+"-01")
	off.Stop()
	quiet.mu.Lock()
	defer quiet.mu.Unlock()
	if quiet.exports != 0 {
		t.Errorf("a manager without telemetry.tracing exported %d times (%d spans)", quiet.exports, len(quiet.spans))
	}
}
