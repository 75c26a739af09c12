package server

import (
	"context"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"fmgr.dev/internal/tracing"
)

// tracerName names the instrumentation that makes the RPC spans.
const tracerName = "fmgr.dev/internal/server"

// SetTracerProvider makes every Connect call a span of tp's (one per call,
// unary or stream, continuing the caller's W3C traceparent). Call it
// before Serve; without it the server traces nothing.
func (s *Server) SetTracerProvider(tp trace.TracerProvider) {
	s.tracer.Store(tracerBox{tp.Tracer(tracerName)})
}

type tracerBox struct{ trace.Tracer }

// startSpan starts the server span of a call to spec, the child of the
// traceparent in h when there is one. The span has the procedure; the
// request's names (project, domain, run, action) are added by
// traceRequest once the request message is read.
func (s *Server) startSpan(ctx context.Context, spec connect.Spec, h http.Header, requestID string) (context.Context, trace.Span) {
	box, ok := s.tracer.Load().(tracerBox)
	if !ok {
		return ctx, trace.SpanFromContext(ctx) // no tracer: the no-op span ctx already has
	}
	ctx = tracing.Propagator.Extract(ctx, propagation.HeaderCarrier(h))
	proc := strings.TrimPrefix(spec.Procedure, "/")
	service, method, _ := strings.Cut(proc, "/")
	return box.Start(ctx, proc,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("rpc.system", "connect_rpc"),
			attribute.String("rpc.service", service),
			attribute.String("rpc.method", method),
			attribute.String("flyte.request_id", requestID),
		))
}

// traceRequest adds what msg names to span (names only, never payloads).
func traceRequest(span trace.Span, msg any) {
	if !span.IsRecording() {
		return
	}
	if m, ok := msg.(proto.Message); ok {
		span.SetAttributes(tracing.RequestAttributes(m)...)
	}
}

// endSpan records the call's Connect code and ends span. Codes that say
// the server failed mark the span as an error (the OpenTelemetry RPC
// conventions); the error's text stays out of the span.
func endSpan(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		code := connect.CodeOf(err)
		span.SetAttributes(attribute.String("rpc.connect_rpc.error_code", code.String()))
		switch code {
		case connect.CodeUnknown, connect.CodeDeadlineExceeded, connect.CodeUnimplemented,
			connect.CodeInternal, connect.CodeUnavailable, connect.CodeDataLoss:
			span.SetStatus(codes.Error, code.String())
		}
	}
	span.End()
}

// tracedConn adds what a stream's first request message names to its span.
type tracedConn struct {
	connect.StreamingHandlerConn
	span trace.Span
	seen bool
}

func (c *tracedConn) Receive(msg any) error {
	if err := c.StreamingHandlerConn.Receive(msg); err != nil {
		return err
	}
	if !c.seen {
		c.seen = true
		traceRequest(c.span, msg)
	}
	return nil
}
