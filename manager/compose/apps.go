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

// setupApps builds the App service and the runtime that runs apps'
// replicas: beside the attempts with the local executor, as a Deployment
// and a Service each with the kubernetes executor. Either way the manager
// serves the apps through its proxy (appruntime.Proxy), which is also
// their public URL unless apps.publicURL names another.
func setupApps(d *Deps, exec executor, blobs *blob.Store) (appsFront, error) {
	srv := d.Server
	var svc *app.Service
	rep := reporter(func(ctx context.Context, r appruntime.Report) error { return svc.Report(ctx, r) })
	var rt interface {
		appruntime.Runtime
		appruntime.Served
		Run(ctx context.Context) error
	}
	cfg := d.Config.Apps
	switch e := exec.(type) {
	case *kube.Driver:
		kr, err := e.Apps(rep, blobs.URI("apps"))
		if err != nil {
			return appsFront{}, err
		}
		rt = kr
	case *local.Driver:
		rt = e.Apps(rep, local.AppsOptions{RawDataPrefix: blobs.URI("apps"), Network: cfg.Network})
	default:
		svc := app.NewService(app.NewStore(d.DB), app.Options{
			NoRuntime: "this executor does not run apps",
			Log:       d.Log,
		})
		return appsFront{svc: svc}, app.Setup(srv, svc)
	}
	proxy := appruntime.NewProxy(rt, cfg.PathPrefix)
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
