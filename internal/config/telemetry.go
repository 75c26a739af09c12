package config

import (
	"fmt"
	"net/url"
	"os"
	"strings"
)

// Tracing protocols (OTLP).
const (
	TracingHTTP = "http/protobuf"
	TracingGRPC = "grpc"
)

// DefaultServiceName is the OpenTelemetry service.name of the manager's spans.
const DefaultServiceName = "flyte-manager"

// Telemetry configures what the manager reports besides /metrics.
type Telemetry struct {
	Tracing Tracing `mapstructure:"tracing" yaml:"tracing"`
}

// Tracing configures OpenTelemetry traces, exported over OTLP: a span per
// RPC and per attempt (docs/architecture.md, "Tracing"). Off by default.
// What is not set here is read from the standard OTEL_EXPORTER_OTLP_*
// variables (endpoint, headers, certificate, timeout), OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES.
type Tracing struct {
	// Enabled exports spans; off, the manager uses a no-op tracer.
	Enabled bool `mapstructure:"enabled" yaml:"enabled"`
	// Endpoint is the collector's URL (http://host:4318 for http/protobuf,
	// host:4317 or http(s)://host:4317 for grpc); "" takes
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT, else
	// the exporter's localhost default.
	Endpoint string `mapstructure:"endpoint" yaml:"endpoint"`
	// Protocol is "http/protobuf" or "grpc"; "" takes
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL, else
	// http/protobuf.
	Protocol string `mapstructure:"protocol" yaml:"protocol"`
	// Insecure sends spans without TLS (an http:// endpoint does too).
	Insecure bool `mapstructure:"insecure" yaml:"insecure"`
	// CAFile is a PEM bundle the collector's certificate is checked
	// against, besides the system's roots.
	CAFile string `mapstructure:"caFile" yaml:"caFile"`
	// Headers are sent with every export, "name=value,name2=value2" (the
	// OTEL_EXPORTER_OTLP_HEADERS format; values URL-encoded). Secret: they
	// often carry a token.
	Headers string `mapstructure:"headers" yaml:"headers"`
	// SampleRatio is the share of new traces sampled, 0 to 1; a call that
	// comes with a traceparent follows its caller's decision.
	SampleRatio float64 `mapstructure:"sampleRatio" yaml:"sampleRatio"`
	// ServiceName is the resource's service.name (OTEL_SERVICE_NAME wins).
	ServiceName string `mapstructure:"serviceName" yaml:"serviceName"`
	// ResourceAttributes are added to the resource, "key=value,key2=value2"
	// (the OTEL_RESOURCE_ATTRIBUTES format), e.g. deployment.environment=prod.
	ResourceAttributes string `mapstructure:"resourceAttributes" yaml:"resourceAttributes"`
}

func defaultTelemetry() Telemetry {
	return Telemetry{Tracing: Tracing{SampleRatio: 1, ServiceName: DefaultServiceName}}
}

// ParseKeyValues parses the OTEL_EXPORTER_OTLP_HEADERS and
// OTEL_RESOURCE_ATTRIBUTES format: "key=value" pairs separated by commas,
// values URL-decoded. The error never repeats a value (headers are secret).
func ParseKeyValues(s string) (map[string]string, error) {
	out := map[string]string{}
	for i, pair := range strings.Split(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("entry %d is not key=value", i+1)
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("entry %d (%s): the value is not URL-encoded", i+1, k)
		}
		out[k] = dv
	}
	return out, nil
}

// TracingProtocol is the protocol to export with: t.Protocol, else the
// OTEL_EXPORTER_OTLP_* variables', else http/protobuf.
func (t Tracing) TracingProtocol() string {
	for _, p := range []string{t.Protocol, os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")} {
		if p != "" {
			return p
		}
	}
	return TracingHTTP
}

func (t Tracing) validate(bad func(key, format string, args ...any)) {
	if !t.Enabled {
		return
	}
	if p := t.TracingProtocol(); p != TracingHTTP && p != TracingGRPC {
		bad("telemetry.tracing.protocol", "must be %q or %q, got %q", TracingHTTP, TracingGRPC, p)
	}
	if t.SampleRatio < 0 || t.SampleRatio > 1 {
		bad("telemetry.tracing.sampleRatio", "must be between 0 and 1, got %v", t.SampleRatio)
	}
	if _, err := ParseKeyValues(t.Headers); err != nil {
		bad("telemetry.tracing.headers", "%v", err)
	}
	if _, err := ParseKeyValues(t.ResourceAttributes); err != nil {
		bad("telemetry.tracing.resourceAttributes", "%v", err)
	}
	if t.Endpoint != "" && strings.Contains(t.Endpoint, "://") {
		if u, err := url.Parse(t.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("telemetry.tracing.endpoint", "must be an http:// or https:// URL or host:port, got %q", t.Endpoint)
		}
	}
	if t.CAFile != "" {
		if _, err := os.Stat(t.CAFile); err != nil {
			bad("telemetry.tracing.caFile", "cannot be read: %v", err)
		}
	}
}
