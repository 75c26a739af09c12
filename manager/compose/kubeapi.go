package compose

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/server"
	"fmgr.dev/internal/store"
	"fmgr.dev/kubeapi"
)

// KubeAPIDir is where the Kubernetes-style API keeps its certificate and
// token hashes.
func KubeAPIDir(cfg *config.Config) string { return filepath.Join(cfg.Home, "kubeapi") }

// KubePlacement is where the configuration puts actions' TaskActions:
// the kubernetes executor's namespace settings, which the Kubernetes-style
// API follows in every mode so an action has one name.
func KubePlacement(cfg *config.Config) v1.Placement {
	k := cfg.Executor.Kubernetes
	return v1.Placement{Namespace: k.Namespace, NamespacePerProject: k.NamespacePerProject}
}

// KubeDefaultNamespace is the namespace a kubeconfig starts in: the shared
// one, or the first seeded project's development namespace.
func KubeDefaultNamespace(cfg *config.Config) string {
	p := KubePlacement(cfg)
	project := "flytesnacks"
	if len(cfg.Projects.Seed) > 0 {
		project = cfg.Projects.Seed[0]
	}
	return p.NamespaceOf(project, "development")
}

func newKubeAPI(d *Deps, st *store.Store, hub *runstate.Hub, state *runstate.Service, version string) http.Handler {
	return kubeapi.New(kubeapi.Deps{
		Actions: st.Actions, Hub: hub, Aborter: state, Placement: KubePlacement(d.Config),
		Tokens: kubeapi.NewTokens(KubeAPIDir(d.Config)), Keys: verifier(d.Config, d.DB), Version: version, Log: d.Log,
	})
}

// listenKubeAPI serves h on kubeAPI.listen over https, as a worker of srv.
// A busy address or an unreadable certificate costs only kubectl access,
// so it is logged and the manager carries on.
func listenKubeAPI(logger *slog.Logger, cfg *config.Config, srv *server.Server, h http.Handler) net.Addr {
	if h == nil || !cfg.KubeAPI.Enabled {
		return nil
	}
	host, _, _ := net.SplitHostPort(cfg.KubeAPI.Listen)
	cert, _, err := kubeapi.EnsureCertificate(KubeAPIDir(cfg), host)
	if err != nil {
		logger.Warn("not serving the Kubernetes-style API: no certificate", "error", err)
		return nil
	}
	ln, err := net.Listen("tcp", cfg.KubeAPI.Listen)
	if err != nil {
		logger.Warn("not serving the Kubernetes-style API (kubectl): its address is busy; set kubeAPI.listen to another",
			"addr", cfg.KubeAPI.Listen, "error", err)
		return nil
	}
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: defaultKubeReadHeaderTimeout,
		IdleTimeout:       cfg.Server.IdleTimeout,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	addr := ln.Addr()
	srv.AddCloser("kube API listener", func(context.Context) error {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
		return nil // closed by the worker already, or now because it never ran
	})
	srv.AddWorker("kube API", func(ctx context.Context) error {
		served := make(chan error, 1)
		go func() { served <- hs.ServeTLS(ln, "", "") }()
		select {
		case err := <-served:
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return err
		case <-ctx.Done():
		}
		// Watches are long requests: close them rather than wait.
		_ = hs.Close()
		<-served
		return nil
	})
	return addr
}

const defaultKubeReadHeaderTimeout = 10 * time.Second
