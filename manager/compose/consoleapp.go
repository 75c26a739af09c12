package compose

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"fmgr.dev/app"
	"fmgr.dev/console"
	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/server"
)

// setupConsoleApp serves /v2 from the app console.app names ("the UI via
// the App Service"), through the apps proxy, instead of the built-in
// console. The app is looked up on every request, so deploying, stopping
// or starting it takes effect at once.
func setupConsoleApp(srv *server.Server, apps appsFront, cfg *config.Config, log *slog.Logger) error {
	project, domain, name, ok := cfg.ConsoleApp()
	if !ok {
		return fmt.Errorf("console.app %q is not <project>/<domain>/<app name>", cfg.Console.App)
	}
	if apps.proxy == nil {
		return fmt.Errorf("console.app %s: this executor's apps are not served through the manager (executor.type %s); unset console.app", cfg.Console.App, cfg.Executor.Type)
	}
	return console.SetupApp(srv, &consoleApp{apps: apps.svc, proxy: apps.proxy, project: project, domain: domain, name: name, log: log})
}

// consoleApp forwards a /v2 request to the app as the request for
// <apps prefix>/<project>/<domain>/<name>/v2/...: the app sees the path
// it was asked for (an app that is a console serves under /v2).
type consoleApp struct {
	apps                  *app.Service
	proxy                 appProxy
	project, domain, name string
	log                   *slog.Logger
}

func (c *consoleApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	what := fmt.Sprintf("the console is served by app %s in project %s, domain %s (console.app)", c.name, c.project, c.domain)
	unavailable := func(why string) {
		w.Header().Set("Retry-After", "5")
		http.Error(w, what+", which "+why, http.StatusServiceUnavailable)
	}
	got, err := c.apps.Get(r.Context(), connect.NewRequest(&pb.GetRequest{Identifier: &pb.GetRequest_AppId{
		AppId: &pb.Identifier{Project: c.project, Domain: c.domain, Name: c.name},
	}}))
	switch {
	case errors.Is(err, errs.ErrNotFound):
		unavailable("is not deployed: deploy it with `flyte deploy`, or unset console.app for the built-in console")
		return
	case err != nil:
		c.log.WarnContext(r.Context(), "console app: reading the app failed", "app", c.name, "err", err)
		unavailable("cannot be read now; try again")
		return
	case got.Msg.GetApp().GetSpec().GetDesiredState() == pb.Spec_DESIRED_STATE_STOPPED:
		unavailable(fmt.Sprintf("is stopped: `flyte update app %s --activate` starts it", c.name))
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = strings.TrimSuffix(c.proxy.Pattern(), "/") + "/" + c.project + "/" + c.domain + "/" + c.name + r.URL.Path
	r2.URL.RawPath = ""
	c.proxy.ServeHTTP(w, r2)
}
