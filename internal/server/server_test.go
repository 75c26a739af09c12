package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/requrl"
	"fmgr.dev/internal/testkit"
)

const (
	echoService = "/fmgr.test.v1.Echo/"
	procSay     = echoService + "Say"
	procSize    = echoService + "Size"
	procBase    = echoService + "Base"
	procSlow    = echoService + "Slow"
	procTick    = echoService + "Tick"
	procHang    = echoService + "Hang"
)

type testServer struct {
	*Server
	base    string
	logs    *testkit.Buffer
	stop    context.CancelFunc
	served  chan error
	started chan string // procedures of streams/slow calls that began
	// release lets every pending Slow call answer; tests close it.
	release chan struct{}
}

// startServer serves a test-only Echo service on a free port.
func startServer(t *testing.T, mutate func(*config.Server), setup func(*Server)) *testServer {
	t.Helper()
	cfg := config.Default().Server
	cfg.Port = 0
	cfg.MaxRequestBytes = 1024
	cfg.ShutdownTimeout = 5 * time.Second
	if mutate != nil {
		mutate(&cfg)
	}
	logs := &testkit.Buffer{}
	s := New(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	s.readHeaderTimeout = 500 * time.Millisecond
	ts := &testServer{Server: s, logs: logs, served: make(chan error, 1), started: make(chan string, 16), release: make(chan struct{})}
	if err := s.Mount(Service{Path: echoService, Handler: echoHandler(s, ts.started, ts.release)}); err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(s)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	ts.base = "http://" + s.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	ts.stop = cancel
	go func() { ts.served <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ts.served:
		case <-time.After(10 * time.Second):
			t.Error("server did not stop")
		}
	})
	return ts
}

func echoHandler(s *Server, started chan<- string, release <-chan struct{}) http.Handler {
	opts := s.HandlerOptions()
	mux := http.NewServeMux()
	mux.Handle(procSay, connect.NewUnaryHandler(procSay,
		func(ctx context.Context, req *connect.Request[wrapperspb.StringValue]) (*connect.Response[wrapperspb.StringValue], error) {
			switch in := req.Msg.GetValue(); in {
			case "internal":
				return nil, errors.New("database password=hunter2 exploded")
			case "notfound":
				return nil, errs.NotFoundf("run %q", "r1")
			case "panic":
				panic("boom with secret hunter2")
			case "request-id":
				return connect.NewResponse(wrapperspb.String(RequestID(ctx))), nil
			default:
				return connect.NewResponse(wrapperspb.String("echo: " + in)), nil
			}
		}, opts...))
	mux.Handle(procSize, connect.NewUnaryHandler(procSize,
		func(_ context.Context, req *connect.Request[wrapperspb.BytesValue]) (*connect.Response[wrapperspb.Int64Value], error) {
			return connect.NewResponse(wrapperspb.Int64(int64(len(req.Msg.GetValue())))), nil
		}, opts...))
	mux.Handle(procBase, connect.NewUnaryHandler(procBase,
		func(ctx context.Context, _ *connect.Request[wrapperspb.StringValue]) (*connect.Response[wrapperspb.StringValue], error) {
			return connect.NewResponse(wrapperspb.String(requrl.BaseURL(ctx))), nil
		}, opts...))
	mux.Handle(procSlow, connect.NewUnaryHandler(procSlow,
		func(ctx context.Context, req *connect.Request[wrapperspb.StringValue]) (*connect.Response[wrapperspb.StringValue], error) {
			started <- procSlow
			select {
			case <-release:
				return connect.NewResponse(wrapperspb.String("done")), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}, opts...))
	mux.Handle(procTick, connect.NewServerStreamHandler(procTick,
		func(ctx context.Context, req *connect.Request[wrapperspb.StringValue], stream *connect.ServerStream[wrapperspb.StringValue]) error {
			gap, err := time.ParseDuration(req.Msg.GetValue())
			if err != nil {
				return errs.Invalidf("bad gap %q", req.Msg.GetValue())
			}
			if err := stream.Send(wrapperspb.String("first")); err != nil {
				return err
			}
			select {
			case <-time.After(gap):
			case <-ctx.Done():
				return ctx.Err()
			}
			return stream.Send(wrapperspb.String("second"))
		}, opts...))
	mux.Handle(procHang, connect.NewServerStreamHandler(procHang,
		func(ctx context.Context, _ *connect.Request[wrapperspb.StringValue], stream *connect.ServerStream[wrapperspb.StringValue]) error {
			if err := stream.Send(wrapperspb.String("hello")); err != nil {
				return err
			}
			started <- procHang
			<-ctx.Done()
			return ctx.Err()
		}, opts...))
	return mux
}

func httpClient(h2c bool) *http.Client {
	var p http.Protocols
	if h2c {
		p.SetUnencryptedHTTP2(true)
	} else {
		p.SetHTTP1(true)
	}
	return &http.Client{Transport: &http.Transport{Protocols: &p}}
}

type transport struct {
	name   string
	h2c    bool
	protos []connect.ClientOption
}

// transports are every protocol/HTTP version combination clients use.
var transports = []transport{
	{"connect-http1", false, nil},
	{"connect-h2c", true, nil},
	{"grpc-h2c", true, []connect.ClientOption{connect.WithGRPC()}},
	{"grpcweb-http1", false, []connect.ClientOption{connect.WithGRPCWeb()}},
	{"grpcweb-h2c", true, []connect.ClientOption{connect.WithGRPCWeb()}},
}

func sayClient(ts *testServer, tr transport, extra ...connect.ClientOption) *connect.Client[wrapperspb.StringValue, wrapperspb.StringValue] {
	return connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](httpClient(tr.h2c), ts.base+procSay, append(slices.Clone(tr.protos), extra...)...)
}

func gz(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// postUnary sends a Connect unary request the way the Python SDK does:
// binary proto, content-encoding gzip.
func postUnary(t *testing.T, c *http.Client, url string, body []byte, encoding string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/proto")
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("Accept-Encoding", "gzip")
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readBody(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	var r io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestUnaryOverEveryTransport(t *testing.T) {
	ts := startServer(t, nil, nil)
	for _, tr := range transports {
		for _, gzipped := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/gzip=%v", tr.name, gzipped), func(t *testing.T) {
				var extra []connect.ClientOption
				if gzipped {
					extra = append(extra, connect.WithSendGzip())
				}
				resp, err := sayClient(ts, tr, extra...).CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("hi")))
				if err != nil {
					t.Fatal(err)
				}
				if got := resp.Msg.GetValue(); got != "echo: hi" {
					t.Errorf("got %q", got)
				}
			})
		}
	}
}

func TestGzipRequestBodyLikeTheSDK(t *testing.T) {
	ts := startServer(t, nil, nil)
	msg, _ := proto.Marshal(wrapperspb.String("from python"))
	for _, h2c := range []bool{false, true} {
		c := httpClient(h2c)
		cases := map[string]struct {
			body     []byte
			encoding string
			want     string
		}{
			"gzip":                 {gz(t, msg), "gzip", "echo: from python"},
			"gzip header, raw":     {msg, "gzip", "echo: from python"},
			"gzip header, empty":   {nil, "gzip", "echo: "},
			"gzip of empty":        {gz(t, nil), "gzip", "echo: "},
			"no encoding":          {msg, "", "echo: from python"},
			"uppercase GZIP value": {gz(t, msg), "GZIP", "echo: from python"},
		}
		for name, tc := range cases {
			t.Run(fmt.Sprintf("h2c=%v/%s", h2c, name), func(t *testing.T) {
				resp := postUnary(t, c, ts.base+procSay, tc.body, tc.encoding)
				data := readBody(t, resp)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: %s", resp.StatusCode, data)
				}
				if h2c != (resp.ProtoMajor == 2) {
					t.Errorf("served over %s", resp.Proto)
				}
				var out wrapperspb.StringValue
				if err := proto.Unmarshal(data, &out); err != nil {
					t.Fatal(err)
				}
				if out.GetValue() != tc.want {
					t.Errorf("got %q, want %q", out.GetValue(), tc.want)
				}
			})
		}
	}

	t.Run("corrupt gzip", func(t *testing.T) {
		bad := gz(t, msg)
		bad = append(bad[:12:12], 0xff, 0xff, 0xff)
		resp := postUnary(t, httpClient(false), ts.base+procSay, bad, "gzip")
		data := readBody(t, resp)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "invalid_argument") {
			t.Errorf("status %d: %s", resp.StatusCode, data)
		}
	})
}

func TestOversizedRequestIsResourceExhausted(t *testing.T) {
	ts := startServer(t, nil, nil) // maxRequestBytes 1024
	big := &wrapperspb.BytesValue{Value: make([]byte, 4096)}
	for _, tr := range transports {
		for _, gzipped := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/gzip=%v", tr.name, gzipped), func(t *testing.T) {
				opts := slices.Clone(tr.protos)
				if gzipped {
					opts = append(opts, connect.WithSendGzip())
				}
				client := connect.NewClient[wrapperspb.BytesValue, wrapperspb.Int64Value](httpClient(tr.h2c), ts.base+procSize, opts...)
				_, err := client.CallUnary(context.Background(), connect.NewRequest(big))
				if connect.CodeOf(err) != connect.CodeResourceExhausted {
					t.Fatalf("err = %v, want resource_exhausted", err)
				}
				// The connection and server stay usable.
				resp, err := client.CallUnary(context.Background(), connect.NewRequest(&wrapperspb.BytesValue{Value: []byte("ok")}))
				if err != nil || resp.Msg.GetValue() != 2 {
					t.Fatalf("small request after big one: %v", err)
				}
			})
		}
	}

	t.Run("raw gzip bomb", func(t *testing.T) {
		huge, _ := proto.Marshal(&wrapperspb.BytesValue{Value: make([]byte, 10<<20)})
		resp := postUnary(t, httpClient(false), ts.base+procSize, gz(t, huge), "gzip")
		data := readBody(t, resp)
		if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(data), "resource_exhausted") ||
			!strings.Contains(string(data), "server.maxRequestBytes") {
			t.Errorf("status %d: %s", resp.StatusCode, data)
		}
	})
}

func TestErrorMasking(t *testing.T) {
	ts := startServer(t, nil, nil)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			client := sayClient(ts, tr)
			for _, in := range []string{"internal", "panic"} {
				_, err := client.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String(in)))
				var cerr *connect.Error
				if !errors.As(err, &cerr) || cerr.Code() != connect.CodeInternal {
					t.Fatalf("%s: err = %v, want internal", in, err)
				}
				if strings.Contains(cerr.Error(), "hunter2") || !strings.HasPrefix(cerr.Message(), "internal error (ref ") {
					t.Fatalf("%s: client saw %q", in, cerr.Message())
				}
				ref := strings.TrimSuffix(strings.TrimPrefix(cerr.Message(), "internal error (ref "), ")")
				logs := ts.logs.String()
				if !strings.Contains(logs, "ref="+ref) || !strings.Contains(logs, "hunter2") {
					t.Errorf("%s: real error not logged with ref %s:\n%s", in, ref, logs)
				}
			}

			_, err := client.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("notfound")))
			var cerr *connect.Error
			if !errors.As(err, &cerr) || cerr.Code() != connect.CodeNotFound || cerr.Message() != `run "r1": not found` {
				t.Fatalf("sentinel: err = %v", err)
			}
		})
	}

	// Streams are masked too.
	stream, err := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](httpClient(false), ts.base+procTick).
		CallServerStream(context.Background(), connect.NewRequest(wrapperspb.String("not-a-duration")))
	if err != nil {
		t.Fatal(err)
	}
	for stream.Receive() {
	}
	if connect.CodeOf(stream.Err()) != connect.CodeInvalidArgument || !strings.Contains(stream.Err().Error(), `bad gap "not-a-duration"`) {
		t.Errorf("stream err = %v", stream.Err())
	}
}

func TestRequestLogLine(t *testing.T) {
	ts := startServer(t, nil, nil)
	req := connect.NewRequest(wrapperspb.String("request-id"))
	req.Header().Set("X-Request-Id", "rid-4711")
	resp, err := sayClient(ts, transports[0]).CallUnary(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Msg.GetValue() != "rid-4711" {
		t.Errorf("RequestID(ctx) = %q", resp.Msg.GetValue())
	}
	var line string
	for l := range strings.SplitSeq(ts.logs.String(), "\n") {
		if strings.Contains(l, "request_id=rid-4711") {
			line = l
		}
	}
	for _, want := range []string{"msg=rpc", "procedure=" + procSay, "protocol=connect", "code=ok", "duration="} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %q lacks %q", line, want)
		}
	}
}

func TestHealthReadyMetrics(t *testing.T) {
	var dbUp atomic.Bool
	ts := startServer(t, nil, func(s *Server) {
		s.AddReadinessCheck("database", func(context.Context) error {
			if !dbUp.Load() {
				return errors.New("not migrated")
			}
			return nil
		})
		s.AddReadinessCheck("executor", func(context.Context) error { return nil })
	})
	c := httpClient(false)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := c.Get(ts.base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}

	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d", code)
	}
	code, body := get("/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "database: not ready: not migrated") || !strings.Contains(body, "executor: ok") {
		t.Errorf("/readyz = %d %q", code, body)
	}
	dbUp.Store(true)
	if code, body := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d %q", code, body)
	}

	if _, err := sayClient(ts, transports[0]).CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("x"))); err != nil {
		t.Fatal(err)
	}
	_, _ = sayClient(ts, transports[0]).CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("notfound")))
	code, body = get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{
		`flyte_manager_rpc_requests_total{code="ok",procedure="/fmgr.test.v1.Echo/Say",type="unary"} 1`,
		`flyte_manager_rpc_requests_total{code="not_found",procedure="/fmgr.test.v1.Echo/Say",type="unary"} 1`,
		`flyte_manager_rpc_duration_seconds_count{procedure="/fmgr.test.v1.Echo/Say",type="unary"} 2`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestUnknownPaths(t *testing.T) {
	ts := startServer(t, nil, nil)
	resp, err := httpClient(false).Get(ts.base + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/nope = %d", resp.StatusCode)
	}
	for _, tr := range transports {
		client := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](httpClient(tr.h2c), ts.base+"/flyteidl2.nothere.NoService/Call", tr.protos...)
		_, err := client.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("x")))
		if connect.CodeOf(err) != connect.CodeUnimplemented {
			t.Errorf("%s: unmounted service: err = %v", tr.name, err)
		}
	}
}

func TestBaseURL(t *testing.T) {
	ts := startServer(t, nil, nil)
	client := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](httpClient(false), ts.base+procBase)
	resp, err := client.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("")))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Msg.GetValue() != ts.base {
		t.Errorf("BaseURL = %q, want %q", resp.Msg.GetValue(), ts.base)
	}

	ext := startServer(t, func(c *config.Server) { c.ExternalURL = "https://flyte.example.com/" }, nil)
	client = connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](httpClient(false), ext.base+procBase)
	resp, err = client.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("")))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Msg.GetValue() != "https://flyte.example.com" {
		t.Errorf("BaseURL = %q", resp.Msg.GetValue())
	}
}

// A server stream that stays silent for longer than every short timeout the
// server has must not be cut: the header timeout, the body read deadline
// (lifted when the request message has arrived) and the idle timeout (a
// connection with a call in progress is not idle).
func TestSilentStreamIsNotCut(t *testing.T) {
	ts := startServer(t, shortTimeouts(300*time.Millisecond, 300*time.Millisecond), nil) // readHeaderTimeout 500ms
	var wg sync.WaitGroup
	for _, tr := range transports {
		wg.Go(func() {
			client := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](httpClient(tr.h2c), ts.base+procTick, tr.protos...)
			stream, err := client.CallServerStream(context.Background(), connect.NewRequest(wrapperspb.String("3s")))
			if err != nil {
				t.Errorf("%s: %v", tr.name, err)
				return
			}
			var got []string
			for stream.Receive() {
				got = append(got, stream.Msg().GetValue())
			}
			if err := stream.Err(); err != nil {
				t.Errorf("%s: stream ended with %v after %q", tr.name, err, got)
			}
			if !slices.Equal(got, []string{"first", "second"}) {
				t.Errorf("%s: got %q", tr.name, got)
			}
		})
	}
	wg.Wait()
}

func TestMountRejectsBadServices(t *testing.T) {
	s := New(config.Default().Server, nil)
	if err := s.Mount(Service{Path: "flyteidl2.X/", Handler: http.NotFoundHandler()}); err == nil {
		t.Error("path without leading slash accepted")
	}
	if err := s.Mount(Service{Path: "/a.B/", Handler: http.NotFoundHandler()}); err != nil {
		t.Fatal(err)
	}
	if err := s.Mount(Service{Path: "/a.B/", Handler: http.NotFoundHandler()}); err == nil {
		t.Error("double mount accepted")
	}
	if err := s.Handle(Route{Pattern: "GET /healthz", Handler: http.NotFoundHandler()}); err == nil {
		t.Error("conflicting route accepted")
	}
	if err := s.Handle(Route{Pattern: "PUT /blobs/{key...}", Handler: http.NotFoundHandler()}); err != nil {
		t.Error(err)
	}
}
