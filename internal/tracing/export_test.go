package tracing

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"fmgr.dev/internal/config"
)

// received is what a test collector got: the exports' spans by name, their
// resource attributes and the value of one header.
type received struct {
	mu       sync.Mutex
	spans    []string
	resource map[string]string
	header   string
}

func (r *received) add(req *coltracepb.ExportTraceServiceRequest, header string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.header = header
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			r.resource[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, s.GetName())
			}
		}
	}
}

// export makes one span with the provider cfg describes and shuts it down,
// which exports it.
func export(t *testing.T, cfg config.Tracing) {
	t.Helper()
	p, err := New(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Enabled() {
		t.Fatal("tracing enabled, yet the provider is off")
	}
	_, span := p.Tracer("test").Start(context.Background(), "one")
	span.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown (the export): %v", err)
	}
}

func (r *received) check(t *testing.T, wantService string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.spans) != 1 || r.spans[0] != "one" {
		t.Errorf("spans %v, want [one]", r.spans)
	}
	if r.header != "k3y value" {
		t.Errorf("x-api-key header %q, want the configured one", r.header)
	}
	for k, want := range map[string]string{"service.name": wantService, "deployment.environment": "test"} {
		if got := r.resource[k]; got != want {
			t.Errorf("resource %s = %q, want %q", k, got, want)
		}
	}
}

// The http/protobuf exporter sends to <endpoint>/v1/traces with the
// configured headers and resource.
func TestExportHTTP(t *testing.T) {
	got := &received{resource: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" {
			t.Errorf("export to %s, want /v1/traces", r.URL.Path)
		}
		b, _ := io.ReadAll(r.Body)
		req := &coltracepb.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(b, req); err != nil {
			t.Errorf("undecodable export: %v", err)
		}
		got.add(req, r.Header.Get("x-api-key"))
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	defer srv.Close()
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	export(t, config.Tracing{Enabled: true, Endpoint: srv.URL, Headers: "x-api-key=k3y%20value",
		SampleRatio: 1, ServiceName: "fm-test", ResourceAttributes: "deployment.environment=test"})
	got.check(t, "fm-test")
}

type grpcCollector struct {
	coltracepb.UnimplementedTraceServiceServer
	got *received
}

func (c *grpcCollector) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	var h string
	if v := md.Get("x-api-key"); len(v) > 0 {
		h = v[0]
	}
	c.got.add(req, h)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// The grpc exporter (protocol from the standard variable) reaches a plain
// collector with insecure, and OTEL_SERVICE_NAME wins over serviceName.
func TestExportGRPC(t *testing.T) {
	got := &received{resource: map[string]string{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, &grpcCollector{got: got})
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	export(t, config.Tracing{Enabled: true, Endpoint: ln.Addr().String(), Insecure: true, Headers: "x-api-key=k3y%20value",
		SampleRatio: 1, ServiceName: "fm-test", ResourceAttributes: "deployment.environment=test"})
	got.check(t, "from-env")
}
