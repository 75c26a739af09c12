package compose

import (
	"context"
	"net/http"
	"strings"

	"fmgr.dev/app"
	"fmgr.dev/executor/kube"
	"fmgr.dev/executor/local"
	"fmgr.dev/internal/appruntime"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/requrl"
	"fmgr.dev/internal/server"
)

// setupApps builds the App service and, with the local executor, the
// runtime that runs apps' replicas beside the attempts and the proxy that
// serves them; with the kubernetes executor, the runtime that runs each
// app as a Deployment and a Service (not served through the manager yet).
func setupApps(d *Deps, exec executor, blobs *blob.Store) (appsFront, error) {
	srv := d.Server
	if kd, ok := exec.(*kube.Driver); ok {
		var svc *app.Service
		rt, err := kd.Apps(reporter(func(ctx context.Context, r appruntime.Report) error { return svc.Report(ctx, r) }), blobs.URI("apps"))
		if err != nil {
			return appsFront{}, err
		}
		svc = app.NewService(app.NewStore(d.DB), app.Options{Runtime: rt, Log: d.Log})
		srv.AddWorker(AppReplicasWorker, rt.Run)
		return appsFront{svc: svc}, app.Setup(srv, svc)
	}
	drv, ok := exec.(*local.Driver)
	if !ok {
		svc := app.NewService(app.NewStore(d.DB), app.Options{
			NoRuntime: "this executor does not run apps",
			Log:       d.Log,
		})
		return appsFront{svc: svc}, app.Setup(srv, svc)
	}
	var svc *app.Service
	cfg := d.Config.Apps
	rt := drv.Apps(reporter(func(ctx context.Context, r appruntime.Report) error { return svc.Report(ctx, r) }),
		local.AppsOptions{RawDataPrefix: blobs.URI("apps"), Network: cfg.Network})
	proxy := rt.Proxy(cfg.PathPrefix)
	svc = app.NewService(app.NewStore(d.DB), app.Options{
		Runtime: rt,
		PublicURL: func(ctx context.Context, k app.Key) string {
			if cfg.PublicURL != "" {
				return strings.NewReplacer("{project}", k.Project, "{domain}", k.Domain, "{name}", k.Name).Replace(cfg.PublicURL)
			}
			base := requrl.BaseURL(ctx)
			if base == "" {
				base = "http://" + advertisedAddr(srv)
			}
			return proxy.URL(base, k)
		},
		Log: d.Log,
	})
	if err := srv.Handle(server.Route{Pattern: proxy.Pattern(), Handler: proxy}); err != nil {
		return appsFront{}, err
	}
	srv.AddWorker(AppReplicasWorker, rt.Run)
	return appsFront{svc: svc, proxy: proxy}, app.Setup(srv, svc)
}

// appsFront is what serves apps: the App service, and the proxy to their
// replicas where the manager serves them (nil otherwise).
type appsFront struct {
	svc   *app.Service
	proxy appProxy
}

// appProxy is what the composition uses of the apps proxy: it serves
// <Pattern()><project>/<domain>/<name>/<path> from the app's replicas.
type appProxy interface {
	http.Handler
	Pattern() string
}

// AppReplicasWorker is the name of the worker that runs apps' replicas
// (harnesses that must not run commands drop it).
const AppReplicasWorker = "app replicas"

type reporter func(ctx context.Context, r appruntime.Report) error

func (f reporter) Report(ctx context.Context, r appruntime.Report) error { return f(ctx, r) }
