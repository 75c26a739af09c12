package dataproxy_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"fmgr.dev/dataproxy"
	"fmgr.dev/gen/go/flyteidl2/cluster"
	"fmgr.dev/gen/go/flyteidl2/cluster/clusterconnect"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/server"
)

// serveDataProxy runs the data proxy behind the manager's real server (Host
// guard, base-URL recording), as the manager mounts it.
func serveDataProxy(t *testing.T, mutate func(*config.Server)) string {
	t.Helper()
	store, err := blob.Open(context.Background(), "file://"+filepath.ToSlash(filepath.Join(t.TempDir(), "blobs")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	signer, err := blob.NewSigner([]byte(testSigningKey))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default().Server
	cfg.Port = 0
	if mutate != nil {
		mutate(&cfg)
	}
	srv := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, r := range dataproxy.New(dataproxy.Deps{Store: store, Signer: signer}).Handlers(srv.HandlerOptions()...) {
		if r.Plain {
			err = srv.Handle(server.Route{Pattern: r.Path, Handler: r.Handler})
		} else {
			err = srv.Mount(server.Service{Path: r.Path, Handler: r.Handler})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-served:
		case <-time.After(30 * time.Second):
			t.Error("server did not stop")
		}
	})
	return srv.Addr().String()
}

// hostTransport sends requests with a fixed Host header.
type hostTransport struct{ host string }

func (h hostTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Host = h.host
	return http.DefaultTransport.RoundTrip(r)
}

func selectCluster(addr, host string) (string, error) {
	c := clusterconnect.NewClusterServiceClient(&http.Client{Transport: hostTransport{host}, Timeout: time.Minute}, "http://"+addr)
	resp, err := c.SelectCluster(context.Background(), connect.NewRequest(&cluster.SelectClusterRequest{}))
	if err != nil {
		return "", err
	}
	return resp.Msg.GetClusterEndpoint(), nil
}

// SelectCluster's answer is where the SDK sends its data-plane calls: it
// must never be a name an attacker put in the Host header.
func TestSelectClusterNeverEchoesAForeignHost(t *testing.T) {
	addr := serveDataProxy(t, func(c *config.Server) { c.AllowedHosts = []string{"flyte.example.com"} })
	_, port, _ := net.SplitHostPort(addr)
	for _, host := range []string{"evil.example", "evil.example:" + port, "127.0.0.1.evil.example:" + port} {
		got, err := selectCluster(addr, host)
		if connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("Host %s: endpoint %q, err %v; want permission_denied", host, got, err)
		}
	}
	for host, want := range map[string]string{
		addr:                     "http://" + addr,
		"localhost:" + port:      "http://localhost:" + port,
		"flyte.example.com":      "http://flyte.example.com",
		"flyte.example.com:8443": "http://flyte.example.com:8443",
	} {
		if got, err := selectCluster(addr, host); err != nil || got != want {
			t.Errorf("Host %s: endpoint %q, err %v; want %q", host, got, err, want)
		}
	}

	// Behind a proxy the configured external URL is the answer, whatever
	// accepted Host the request named.
	ext := serveDataProxy(t, func(c *config.Server) { c.ExternalURL = "https://flyte.example.net/" })
	for _, host := range []string{ext, "flyte.example.net"} {
		if got, err := selectCluster(ext, host); err != nil || got != "https://flyte.example.net" {
			t.Errorf("with externalURL, Host %s: endpoint %q, err %v", host, got, err)
		}
	}
	if _, err := selectCluster(ext, "evil.example"); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("with externalURL, a foreign Host: err %v", err)
	}
}
