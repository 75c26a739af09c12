package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Every call is one server span, unary or stream, named after its
// procedure, continuing the caller's traceparent, with the Connect code of
// a failure but never its text; the log line names the trace.
func TestRPCSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ts := startServer(t, nil, func(s *Server) { s.SetTracerProvider(tp) })
	client := sayClient(ts, transports[0])
	ctx := context.Background()

	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	req := connect.NewRequest(wrapperspb.String("hello"))
	req.Header().Set("traceparent", fmt.Sprintf("00-%s-%s-01", traceID, parentID))
	if _, err := client.CallUnary(ctx, req); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"internal", "notfound"} {
		if _, err := client.CallUnary(ctx, connect.NewRequest(wrapperspb.String(in))); err == nil {
			t.Fatalf("%s: no error", in)
		}
	}
	stream, err := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](httpClient(false), ts.base+procTick).
		CallServerStream(ctx, connect.NewRequest(wrapperspb.String("1ms")))
	if err != nil {
		t.Fatal(err)
	}
	for stream.Receive() {
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}

	ended := rec.Ended()
	if len(ended) != 4 {
		t.Fatalf("%d spans ended, want 4 (3 unary calls, 1 stream)", len(ended))
	}
	ok, internal, notFound, tick := ended[0], ended[1], ended[2], ended[3]
	if ok.Name() != strings.TrimPrefix(procSay, "/") || ok.SpanKind() != trace.SpanKindServer {
		t.Errorf("span %q kind %s", ok.Name(), ok.SpanKind())
	}
	if got := ok.SpanContext().TraceID().String(); got != traceID {
		t.Errorf("trace %s, want the caller's %s", got, traceID)
	}
	if got := ok.Parent().SpanID().String(); got != parentID || !ok.Parent().IsRemote() {
		t.Errorf("parent %s, want the caller's %s", got, parentID)
	}
	if !strings.Contains(ts.logs.String(), "trace_id="+traceID) {
		t.Errorf("no log line names trace %s:\n%s", traceID, ts.logs.String())
	}
	for _, tc := range []struct {
		span   sdktrace.ReadOnlySpan
		code   string
		status codes.Code
	}{{ok, "", codes.Unset}, {internal, "internal", codes.Error}, {notFound, "not_found", codes.Unset}, {tick, "", codes.Unset}} {
		attrs := map[string]string{}
		for _, kv := range tc.span.Attributes() {
			attrs[string(kv.Key)] = kv.Value.Emit()
			if strings.Contains(kv.Value.Emit(), "hunter2") {
				t.Errorf("%s: attribute %s carries the error's text", tc.span.Name(), kv.Key)
			}
		}
		if attrs["rpc.connect_rpc.error_code"] != tc.code || tc.span.Status().Code != tc.status {
			t.Errorf("%s: code %q status %v, want %q %v", tc.span.Name(), attrs["rpc.connect_rpc.error_code"], tc.span.Status(), tc.code, tc.status)
		}
		if strings.Contains(tc.span.Status().Description, "hunter2") {
			t.Errorf("%s: status carries the error's text", tc.span.Name())
		}
	}
	if tick.Name() != strings.TrimPrefix(procTick, "/") {
		t.Errorf("stream span %q", tick.Name())
	}
}

// Without SetTracerProvider a call with a traceparent is served as before
// and its log line names no trace.
func TestNoTracerNoSpan(t *testing.T) {
	ts := startServer(t, nil, nil)
	req := connect.NewRequest(wrapperspb.String("hello"))
	req.Header().Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	if _, err := sayClient(ts, transports[0]).CallUnary(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ts.logs.String(), "trace_id=") {
		t.Errorf("a server without a tracer logged a trace id:\n%s", ts.logs.String())
	}
}
