// Package tracing is flyte-manager's OpenTelemetry tracing: the tracer
// provider built from telemetry.tracing (an OTLP exporter over
// http/protobuf or grpc, or a no-op provider when tracing is off), the W3C
// trace-context propagator, and the attribute names the manager's spans
// carry. The spans themselves are made where the work is: one per RPC in
// internal/server's interceptor chain, one per attempt in executor/attempt.
package tracing

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc/credentials"

	"fmgr.dev/internal/config"
)

// Attribute keys of the manager's own spans (the RPC ones follow the
// OpenTelemetry RPC conventions: rpc.system, rpc.service, rpc.method).
const (
	AttrProject   = attribute.Key("flyte.project")
	AttrDomain    = attribute.Key("flyte.domain")
	AttrRun       = attribute.Key("flyte.run")
	AttrAction    = attribute.Key("flyte.action")
	AttrAttempt   = attribute.Key("flyte.attempt")
	AttrPhase     = attribute.Key("flyte.phase")
	AttrErrorKind = attribute.Key("flyte.error.kind")
	AttrErrorCode = attribute.Key("flyte.error.code")
)

// Propagator reads and writes W3C traceparent and tracestate headers.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Provider is the process's tracer provider.
type Provider struct {
	trace.TracerProvider
	sdk *sdktrace.TracerProvider // nil when tracing is off
}

// Off is a provider whose tracers record nothing.
func Off() *Provider { return &Provider{TracerProvider: noop.NewTracerProvider()} }

// Enabled reports whether spans are exported.
func (p *Provider) Enabled() bool { return p != nil && p.sdk != nil }

// Shutdown exports the spans still buffered and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	return p.sdk.Shutdown(ctx)
}

// ForceFlush exports the spans buffered so far.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	return p.sdk.ForceFlush(ctx)
}

// New builds the provider cfg describes: Off when tracing is disabled.
// Export failures are logged to log (never with the exporter's headers).
func New(ctx context.Context, cfg config.Tracing, log *slog.Logger) (*Provider, error) {
	if !cfg.Enabled {
		return Off(), nil
	}
	if log == nil {
		log = slog.Default()
	}
	exp, err := newExporter(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("telemetry.tracing: %w", err)
	}
	res, err := newResource(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("telemetry.tracing: %w", err)
	}
	// The SDK reports export failures to the global handler only.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: could not export spans", "error", err)
	}))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
	)
	return &Provider{TracerProvider: tp, sdk: tp}, nil
}

// newResource describes the manager: service.name (cfg.ServiceName) and
// cfg.ResourceAttributes, then OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES, which win.
func newResource(ctx context.Context, cfg config.Tracing) (*resource.Resource, error) {
	name := cfg.ServiceName
	if name == "" {
		name = config.DefaultServiceName
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	extra, err := config.ParseKeyValues(cfg.ResourceAttributes)
	if err != nil {
		return nil, fmt.Errorf("resourceAttributes: %w", err)
	}
	for k, v := range extra {
		attrs = append(attrs, attribute.String(k, v))
	}
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithFromEnv(), resource.WithTelemetrySDK())
	if errors.Is(err, resource.ErrPartialResource) {
		err = nil // a bad OTEL_RESOURCE_ATTRIBUTES entry: the rest is kept
	}
	return res, err
}

func newExporter(ctx context.Context, cfg config.Tracing) (sdktrace.SpanExporter, error) {
	headers, err := config.ParseKeyValues(cfg.Headers)
	if err != nil {
		return nil, fmt.Errorf("headers: %w", err)
	}
	var tlsCfg *tls.Config
	if cfg.CAFile != "" {
		if tlsCfg, err = caConfig(cfg.CAFile); err != nil {
			return nil, err
		}
	}
	withURL := strings.Contains(cfg.Endpoint, "://")
	switch p := cfg.TracingProtocol(); p {
	case config.TracingHTTP:
		var opts []otlptracehttp.Option
		switch {
		case withURL:
			opts = append(opts, otlptracehttp.WithEndpointURL(httpTracesURL(cfg.Endpoint)))
		case cfg.Endpoint != "":
			opts = append(opts, otlptracehttp.WithEndpoint(cfg.Endpoint))
		}
		if cfg.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		if tlsCfg != nil {
			opts = append(opts, otlptracehttp.WithTLSClientConfig(tlsCfg))
		}
		if len(headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(headers))
		}
		return otlptracehttp.New(ctx, opts...)
	case config.TracingGRPC:
		var opts []otlptracegrpc.Option
		switch {
		case withURL:
			opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
		case cfg.Endpoint != "":
			opts = append(opts, otlptracegrpc.WithEndpoint(cfg.Endpoint))
		}
		if cfg.Insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		if tlsCfg != nil {
			opts = append(opts, otlptracegrpc.WithTLSCredentials(credentials.NewTLS(tlsCfg)))
		}
		if len(headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(headers))
		}
		return otlptracegrpc.New(ctx, opts...)
	default:
		return nil, fmt.Errorf("protocol %q: use %q or %q", p, config.TracingHTTP, config.TracingGRPC)
	}
}

// httpTracesURL is endpoint with the OTLP traces path when it names none
// (as for OTEL_EXPORTER_OTLP_ENDPOINT): http://collector:4318 sends to
// http://collector:4318/v1/traces.
func httpTracesURL(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return endpoint
	}
	u.Path = "/v1/traces"
	return u.String()
}

// caConfig trusts the system's roots and the PEM certificates in file.
func caConfig(file string) (*tls.Config, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("caFile: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("caFile %s: no PEM certificate in it", file)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
