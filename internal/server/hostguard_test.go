package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"fmgr.dev/internal/config"
)

// guardedServer serves the Echo service plus a plain route that counts the
// requests reaching it, so a test can tell that a refused request had no
// effect.
func guardedServer(t *testing.T) (*testServer, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	ts := startServer(t, func(c *config.Server) {
		c.ExternalURL = "https://ext.example.net/flyte"
		c.AllowedHosts = []string{"flyte.example.com", "api.example.org:9000", "*.corp.example"}
		c.CORS.AllowedOrigins = []string{"https://ui.example.com", "http://LOCALHOST:3001/"}
	}, func(s *Server) {
		if err := s.Handle(Route{Pattern: "/count", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			_, _ = io.WriteString(w, "counted")
		})}); err != nil {
			t.Fatal(err)
		}
	})
	return ts, &hits
}

func (ts *testServer) port() string {
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(ts.base, "http://"))
	return port
}

// send makes a request to path with the given Host and extra headers.
func send(t *testing.T, ts *testServer, method, path, host string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, ts.base+path, strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := httpClient(false).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestHostsTheManagerIsKnownBy(t *testing.T) {
	ts, hits := guardedServer(t)
	port := ts.port()
	other := "1"
	if port == "1" {
		other = "2"
	}
	allowed := []string{
		"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST:" + port, "localhost." + ":" + port,
		"localhost", "127.0.0.1", "127.3.2.1:" + port, "[::1]:" + port, "[::1]",
		"flyte.example.com", "flyte.example.com:" + port, "FLYTE.example.com:443",
		"api.example.org:9000", "a.corp.example", "b.a.corp.example:8443",
		"ext.example.net", "ext.example.net:443",
	}
	refused := []string{
		"evil.example", "evil.example:" + port, "localhost:" + other, "127.0.0.1:" + other,
		"api.example.org", "api.example.org:9001", "corp.example", "evilcorp.example",
		"ext.example.net:8443", "localhost.evil.example:" + port, "127.0.0.1.nip.io:" + port,
		"0.0.0.0:" + port, "10.1.2.3:" + port, "bad host:" + port, "localhost:99999",
	}
	for _, host := range allowed {
		resp := send(t, ts, http.MethodPost, "/count", host, nil)
		if body := readBody(t, resp); resp.StatusCode != http.StatusOK || string(body) != "counted" {
			t.Errorf("Host %q: %d %q, want it served", host, resp.StatusCode, body)
		}
	}
	before := hits.Load()
	if before != int64(len(allowed)) {
		t.Fatalf("%d requests reached the handler, want %d", before, len(allowed))
	}
	for _, host := range refused {
		resp := send(t, ts, http.MethodPost, "/count", host, nil)
		body := string(readBody(t, resp))
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "server.allowedHosts") {
			t.Errorf("Host %q: %d %q, want 403 naming server.allowedHosts", host, resp.StatusCode, body)
		}
	}
	if n := hits.Load(); n != before {
		t.Errorf("%d refused requests reached the handler", n-before)
	}

	// Health, readiness and metrics are guarded like everything else.
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if resp := send(t, ts, http.MethodGet, path, "evil.example:"+port, nil); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s with a foreign Host: %d", path, resp.StatusCode)
		}
	}

	// An HTTP/1.0 request without a Host is refused as well.
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET /count HTTP/1.0\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("request without Host: %d", resp.StatusCode)
	}
}

// hostRoundTripper sends every request with a fixed Host (:authority on
// HTTP/2), the way a browser on a rebound name would.
type hostRoundTripper struct {
	host string
	next http.RoundTripper
}

func (h hostRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Host = h.host
	return h.next.RoundTrip(r)
}

func TestForeignHostIsRefusedOnEveryTransport(t *testing.T) {
	ts, _ := guardedServer(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			for host, want := range map[string]connect.Code{
				"evil.example:" + ts.port():      connect.CodePermissionDenied,
				"localhost:" + ts.port():         0,
				"127.0.0.1:" + ts.port():         0,
				"flyte.example.com:" + ts.port(): 0,
			} {
				client := &http.Client{Transport: hostRoundTripper{host, httpClient(tr.h2c).Transport}}
				c := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](client, ts.base+procSay, tr.protos...)
				_, err := c.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("hi")))
				if got := connect.CodeOf(err); (want == 0 && err != nil) || (want != 0 && got != want) {
					t.Errorf("Host %s: err = %v, want code %v", host, err, want)
				}
			}
		})
	}
}

func TestBrowserOrigins(t *testing.T) {
	ts, hits := guardedServer(t)
	port := ts.port()
	local := "localhost:" + port
	cases := []struct {
		host, origin string
		ok, cors     bool
	}{
		{local, "http://" + local, true, false}, // the manager's own page
		{"127.0.0.1:" + port, "http://127.0.0.1:" + port, true, false},
		{"flyte.example.com", "https://flyte.example.com", true, false}, // behind a TLS proxy
		{"ext.example.net", "https://ext.example.net", true, false},
		{local, "https://ext.example.net", true, false}, // externalURL's origin
		{local, "https://ui.example.com", true, true},
		{local, "http://localhost:3001", true, true},
		{local, "http://evil.example", false, false},
		{local, "http://localhost:3000", false, false}, // another local app's page
		{local, "null", false, false},
		{local, "https://ui.example.com.evil.example", false, false},
		{"flyte.example.com", "http://flyte.example.com:8080", false, false},
	}
	for _, c := range cases {
		before := hits.Load()
		resp := send(t, ts, http.MethodPost, "/count", c.host, map[string]string{"Origin": c.origin})
		body := string(readBody(t, resp))
		acao := resp.Header.Get("Access-Control-Allow-Origin")
		switch {
		case !c.ok:
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "server.cors.allowedOrigins") || hits.Load() != before {
				t.Errorf("Origin %s to %s: %d %q, want 403 naming server.cors.allowedOrigins and no effect", c.origin, c.host, resp.StatusCode, body)
			}
		case resp.StatusCode != http.StatusOK || hits.Load() != before+1:
			t.Errorf("Origin %s to %s: %d %q, want it served", c.origin, c.host, resp.StatusCode, body)
		case c.cors && (acao != c.origin || !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Grpc-Status-Details-Bin") || resp.Header.Get("Vary") != "Origin"):
			t.Errorf("Origin %s: CORS headers %v", c.origin, resp.Header)
		case !c.cors && acao != "":
			t.Errorf("Origin %s: same-origin answer carries Access-Control-Allow-Origin %q", c.origin, acao)
		}
	}
}

func TestCORSPreflight(t *testing.T) {
	ts, hits := guardedServer(t)
	local := "localhost:" + ts.port()
	preflight := func(origin string) *http.Response {
		return send(t, ts, http.MethodOptions, procSay, local, map[string]string{
			"Origin":                         origin,
			"Access-Control-Request-Method":  "POST",
			"Access-Control-Request-Headers": "connect-protocol-version,content-type,connect-timeout-ms",
		})
	}
	resp := preflight("https://ui.example.com")
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "https://ui.example.com" {
		t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	for header, wants := range map[string][]string{
		"Access-Control-Allow-Methods": {"GET", "POST", "PUT"},
		"Access-Control-Allow-Headers": {"Content-Type", "Connect-Protocol-Version", "Connect-Timeout-Ms", "Grpc-Timeout", "X-Grpc-Web", "X-User-Agent", "Content-Encoding"},
		"Access-Control-Max-Age":       {"7200"},
		"Vary":                         {"Origin"},
	} {
		got := strings.Join(resp.Header.Values(header), ", ")
		for _, want := range wants {
			if !strings.Contains(got, want) {
				t.Errorf("%s = %q lacks %s", header, got, want)
			}
		}
	}
	if resp := preflight("http://evil.example"); resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from an unlisted origin: %d %v", resp.StatusCode, resp.Header)
	}
	if hits.Load() != 0 {
		t.Error("a preflight reached a handler")
	}

	// The call the preflight announced works and its status headers are
	// readable by the page.
	resp = send(t, ts, http.MethodPost, procSay, local, map[string]string{
		"Origin": "https://ui.example.com", "Content-Type": "application/json", "Connect-Protocol-Version": "1",
	})
	if body := readBody(t, resp); resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusOK {
		t.Errorf("call after preflight: %d %s", resp.StatusCode, body)
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "https://ui.example.com" {
		t.Errorf("call after preflight lacks Access-Control-Allow-Origin: %v", resp.Header)
	}
}

func TestHostGuardWithoutListener(t *testing.T) {
	// Handler used directly (no connection address): the configured port is
	// the bound port.
	cfg := config.Default().Server
	cfg.Port = 8090
	h := New(cfg, nil).Handler()
	for host, want := range map[string]int{"localhost:8090": http.StatusOK, "localhost:8091": http.StatusForbidden, "evil.example:8090": http.StatusForbidden} {
		r, _ := http.NewRequest(http.MethodGet, "/healthz", nil)
		r.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != want {
			t.Errorf("Host %s: %d, want %d", host, rec.Code, want)
		}
	}
}
