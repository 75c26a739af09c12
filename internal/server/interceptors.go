package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"

	"fmgr.dev/internal/errs"
)

// RequestIDHeader carries the caller's request id (the SDK sends a uuid).
const RequestIDHeader = "x-request-id"

type requestIDKey struct{}

// RequestID is the id of the call ctx belongs to: the caller's x-request-id,
// or one generated for it.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

func withRequestID(ctx context.Context, h http.Header) (context.Context, string) {
	id := h.Get(RequestIDHeader)
	if id == "" || len(id) > 200 {
		id = newID()
	}
	return context.WithValue(ctx, requestIDKey{}, id), id
}

// newID returns a short random hex id.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// errShuttingDown ends server streams when the server stops; clients see
// Unavailable and reconnect (to another replica, or after the restart).
var errShuttingDown = errors.New("server is shutting down")

// observeInterceptor is the outermost interceptor: it logs one line per
// call, records metrics, makes its trace span (tracing.go), tags the
// context with the request id, and ends server streams when shutdown
// begins.
type observeInterceptor struct{ s *Server }

func (i *observeInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		start := time.Now()
		ctx, id := withRequestID(ctx, req.Header())
		ctx, span := i.s.startSpan(ctx, req.Spec(), req.Header(), id)
		traceRequest(span, req.Any())
		resp, err := next(ctx, req)
		i.s.observe(ctx, req.Spec(), req.Peer(), id, start, err)
		endSpan(span, err)
		return resp, err
	}
}

func (i *observeInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *observeInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		spec := conn.Spec()
		ctx, id := withRequestID(ctx, conn.RequestHeader())
		ctx, span := i.s.startSpan(ctx, spec, conn.RequestHeader(), id)
		if span.IsRecording() {
			conn = &tracedConn{StreamingHandlerConn: conn, span: span}
		}

		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		stop := context.AfterFunc(i.s.streams, func() { cancel(errShuttingDown) })
		defer stop()

		inFlight := i.s.metrics.streams.WithLabelValues(spec.Procedure)
		inFlight.Inc()
		err := next(ctx, conn)
		inFlight.Dec()

		if errors.Is(context.Cause(ctx), errShuttingDown) {
			if c := connect.CodeOf(err); err != nil && (c == connect.CodeCanceled || c == connect.CodeDeadlineExceeded) {
				err = connect.NewError(connect.CodeUnavailable, errShuttingDown)
			}
		}
		i.s.observe(ctx, spec, conn.Peer(), id, start, err)
		endSpan(span, err)
		return err
	}
}

// observe logs and counts one finished call.
func (s *Server) observe(ctx context.Context, spec connect.Spec, peer connect.Peer, id string, start time.Time, err error) {
	elapsed := time.Since(start)
	code := "ok"
	if err != nil {
		code = connect.CodeOf(err).String()
	}
	kind := streamTypeLabel(spec.StreamType)
	s.metrics.requests.WithLabelValues(spec.Procedure, kind, code).Inc()
	s.metrics.duration.WithLabelValues(spec.Procedure, kind).Observe(elapsed.Seconds())

	attrs := []slog.Attr{
		slog.String("procedure", spec.Procedure),
		slog.String("protocol", peer.Protocol),
		slog.String("code", code),
		slog.Duration("duration", elapsed),
		slog.String("request_id", id),
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
	}
	if spec.StreamType != connect.StreamTypeUnary {
		attrs = append(attrs, slog.String("stream", kind))
	}
	level := slog.LevelInfo
	if err != nil {
		var cerr *connect.Error
		if errors.As(err, &cerr) {
			attrs = append(attrs, slog.String("error", cerr.Message()))
		}
		switch connect.CodeOf(err) {
		case connect.CodeInternal, connect.CodeUnknown, connect.CodeDataLoss:
			level = slog.LevelWarn
		}
	}
	s.log.LogAttrs(ctx, level, "rpc", attrs...)
}

// maskInterceptor maps handler errors to Connect errors with errs.ToConnect.
// Errors that are not part of the error vocabulary are logged with a
// correlation id, and the client gets only "internal error (ref <id>)".
type maskInterceptor struct{ s *Server }

func (i *maskInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		resp, err := next(ctx, req)
		if err != nil && !req.Spec().IsClient {
			return nil, i.s.mask(ctx, req.Spec(), err)
		}
		return resp, err
	}
}

func (i *maskInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *maskInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		err := next(ctx, conn)
		if err != nil {
			return i.s.mask(ctx, conn.Spec(), err)
		}
		return nil
	}
}

func (s *Server) mask(ctx context.Context, spec connect.Spec, err error) error {
	cerr, internal := errs.ToConnect(err)
	// UNKNOWN makes the SDK refresh credentials; never send it.
	if !internal && cerr.Code() != connect.CodeUnknown {
		return cerr
	}
	ref := newID()
	s.log.ErrorContext(ctx, "internal error",
		"ref", ref,
		"procedure", spec.Procedure,
		"request_id", RequestID(ctx),
		"error", err.Error(),
	)
	return connect.NewError(connect.CodeInternal, fmt.Errorf("internal error (ref %s)", ref))
}

// recoverPanic turns a handler panic into an ordinary (internal, hence
// masked and logged) error.
func recoverPanic(_ context.Context, spec connect.Spec, _ http.Header, p any) error {
	return fmt.Errorf("panic in %s: %v\n%s", spec.Procedure, p, debug.Stack())
}

func streamTypeLabel(t connect.StreamType) string {
	switch t {
	case connect.StreamTypeUnary:
		return "unary"
	case connect.StreamTypeClient:
		return "client_stream"
	case connect.StreamTypeServer:
		return "server_stream"
	default:
		return "bidi_stream"
	}
}
