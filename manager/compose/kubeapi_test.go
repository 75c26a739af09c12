package compose

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/server"
)

// A busy kube API address is logged and skipped; a free one is bound.
func TestListenKubeAPI(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.KubeAPI.Listen = busy.Addr().String()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	srv := server.New(cfg.Server, logger)
	defer srv.Close()
	h := http.NotFoundHandler()
	if got := listenKubeAPI(logger, &cfg, srv, h); got != nil {
		t.Errorf("listenKubeAPI on a busy port bound %v", got)
	}
	if !strings.Contains(logs.String(), "not serving the Kubernetes-style API") || !strings.Contains(logs.String(), busy.Addr().String()) {
		t.Errorf("no warning naming the busy address:\n%s", logs.String())
	}
	cfg.KubeAPI.Listen = "127.0.0.1:0"
	if got := listenKubeAPI(logger, &cfg, srv, h); got == nil {
		t.Errorf("listenKubeAPI on a free port bound nothing:\n%s", logs.String())
	}
	cfg.KubeAPI.Enabled = false
	if got := listenKubeAPI(logger, &cfg, srv, h); got != nil {
		t.Errorf("listenKubeAPI with kubeAPI.enabled false bound %v", got)
	}
}
