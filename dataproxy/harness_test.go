package dataproxy_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"fmgr.dev/dataproxy"
	"fmgr.dev/gen/go/flyteidl2/cluster/clusterconnect"
	"fmgr.dev/gen/go/flyteidl2/dataproxy/dataproxyconnect"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/requrl"
)

const testSigningKey = "test-signing-key-0123456789"

// harness is the dataproxy service behind a real HTTP server, wired the way
// the manager wires it: requrl middleware, gzip request decompression, the
// errs → Connect error mapping.
type harness struct {
	t      *testing.T
	srv    *httptest.Server
	svc    *dataproxy.Service
	store  *blob.Store
	signer *blob.Signer
	root   string
	now    atomic.Int64 // unix nanoseconds of the service's clock
	dp     dataproxyconnect.DataProxyServiceClient
	cl     clusterconnect.ClusterServiceClient

	mu   sync.Mutex
	seen []seenRequest
}

// seenRequest records what a client sent, before any middleware.
type seenRequest struct {
	Method, Path, ContentEncoding, ContentType string
}

type harnessOpt func(*dataproxy.Deps, *harnessCfg)

type harnessCfg struct{ noGunzip bool }

func withMaxUpload(n int64) harnessOpt {
	return func(d *dataproxy.Deps, _ *harnessCfg) { d.MaxUploadBytes = n }
}

func withRuns(r dataproxy.RunData) harnessOpt {
	return func(d *dataproxy.Deps, _ *harnessCfg) { d.Runs = r }
}

// withPresigningStore puts the service on store, handing out URLs
// presigned for it.
func withPresigningStore(store *blob.Store) harnessOpt {
	return func(d *dataproxy.Deps, _ *harnessCfg) { d.Store, d.Presign = store, true }
}

// withoutGunzip leaves gzip request bodies to connect-go itself.
func withoutGunzip() harnessOpt {
	return func(_ *dataproxy.Deps, c *harnessCfg) { c.noGunzip = true }
}

func newHarness(t *testing.T, opts ...harnessOpt) *harness {
	t.Helper()
	ctx := context.Background()
	h := &harness{t: t, root: filepath.Join(t.TempDir(), "blobs")}
	h.now.Store(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano())

	store, err := blob.Open(ctx, "file://"+filepath.ToSlash(h.root))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := blob.NewSigner([]byte(testSigningKey))
	if err != nil {
		t.Fatal(err)
	}
	h.store, h.signer = store, signer
	deps := dataproxy.Deps{Store: store, Signer: signer, Now: h.clock}
	var cfg harnessCfg
	for _, o := range opts {
		o(&deps, &cfg)
	}
	h.svc = dataproxy.New(deps)
	h.store = deps.Store

	mux := http.NewServeMux()
	for _, r := range h.svc.Handlers(connect.WithInterceptors(errMapper{})) {
		mux.Handle(r.Path, r.Handler)
	}
	var handler http.Handler = mux
	if !cfg.noGunzip {
		handler = gunzipRequests(handler)
	}
	handler = requrl.Middleware("", handler)
	h.srv = httptest.NewServer(h.record(handler))
	t.Cleanup(h.srv.Close)
	t.Cleanup(func() { _ = store.Close() })

	h.dp = dataproxyconnect.NewDataProxyServiceClient(h.srv.Client(), h.srv.URL)
	h.cl = clusterconnect.NewClusterServiceClient(h.srv.Client(), h.srv.URL)
	return h
}

func (h *harness) clock() time.Time { return time.Unix(0, h.now.Load()).UTC() }

func (h *harness) advance(d time.Duration) { h.now.Add(int64(d)) }

func (h *harness) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.seen = append(h.seen, seenRequest{r.Method, r.URL.Path, r.Header.Get("Content-Encoding"), r.Header.Get("Content-Type")})
		h.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (h *harness) requests() []seenRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]seenRequest(nil), h.seen...)
}

// do sends a plain HTTP request to the server.
func (h *harness) do(method, url string, body []byte, hdr map[string]string) (int, string) {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	for k, v := range hdr {
		if strings.EqualFold(k, "Content-Length") {
			n, _ := strconv.ParseInt(v, 10, 64)
			req.ContentLength = n
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// errMapper stands in for the server's error interceptor: errs sentinels
// become their Connect codes, anything else a masked Internal.
type errMapper struct{}

func (errMapper) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		resp, err := next(ctx, req)
		return resp, mapErr(err)
	}
}

func (errMapper) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (errMapper) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		return mapErr(next(ctx, conn))
	}
}

func mapErr(err error) error {
	if err == nil {
		return nil
	}
	cerr, internal := errs.ToConnect(err)
	if internal {
		return connect.NewError(connect.CodeInternal, errors.New("internal error"))
	}
	return cerr
}

// gunzipRequests undoes Content-Encoding: gzip on unary request bodies, as
// the manager's server does for the Python client.
func gunzipRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := strings.ToLower(r.Header.Get("Content-Type"))
		if !strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") ||
			strings.HasPrefix(ct, "application/connect+") || strings.HasPrefix(ct, "application/grpc") {
			next.ServeHTTP(w, r)
			return
		}
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, "request body is not gzip", http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(io.LimitReader(zr, 64<<20))
		if err != nil {
			http.Error(w, "request body is not gzip", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Del("Content-Encoding")
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
		next.ServeHTTP(w, r)
	})
}
