package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/gen/go/flyteidl2/app/appconnect"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/testkit"
)

// deployWebApp deploys testdata/apps' two-replica e2e-web with the flyte
// CLI and waits until both replicas serve.
func deployWebApp(t *testing.T, ctx context.Context, m *manager) (appsClient, *pb.App) {
	t.Helper()
	dir := t.TempDir()
	cliConfig(t, ctx, m, dir)
	copyTree(t, filepath.Join("testdata", "apps"), dir)
	c := appsClient{t: t, apps: appconnect.NewAppServiceClient(http.DefaultClient, m.URL), logs: appconnect.NewAppLogsServiceClient(http.DefaultClient, m.URL)}
	mustFlyte(t, ctx, dir, "deploy", "--version", "e2e-1", "apps.py", "web")
	c.waitApp(ctx, "e2e-web", pb.Status_DEPLOYMENT_STATUS_ACTIVE, pb.Status_RUNNING)
	var web *pb.App
	testkit.Eventually(t, "both replicas of e2e-web to serve", 2*time.Minute, func() bool {
		web = c.get(ctx, "e2e-web")
		return web.GetStatus().GetCurrentReplicas() == 2
	})
	return c, web
}

// setDesired stops or starts an app as the official console does: the app
// as Get returns it, with another desired state.
func (c appsClient) setDesired(ctx context.Context, name string, st pb.Spec_DesiredState) {
	c.t.Helper()
	a := c.get(ctx, name)
	a.Spec.DesiredState = st
	if _, err := c.apps.Update(ctx, connect.NewRequest(&pb.UpdateRequest{App: a, Reason: "e2e"})); err != nil {
		c.t.Fatalf("update app %s to %v: %v", name, st, err)
	}
}

// The apps view lists a project's apps with their status, URL, replicas
// and revision, live (a stop made elsewhere shows without a reload); an
// app's page shows its conditions and its replicas' log, and its Stop and
// Start buttons stop the app (its URL then answers 503) and start it.
func TestConsoleApps(t *testing.T) {
	ctx := scenarioContext(t, 10*time.Minute)
	m := startSDKManager(t, dbtest.SQLiteDSN(t))
	c, web := deployWebApp(t, ctx, m)
	url := web.GetStatus().GetIngress().GetPublicUrl()

	b := newBrowser(t, 0)
	b.open(m.URL + "/v2/projects")
	b.waitText("#projects", "flytesnacks")
	b.run("follow the project's apps link", chromedp.Click(css(`[data-project="flytesnacks"] a[href$="/development/project/flytesnacks/apps"]`)))
	row := `#apps [data-app="e2e-web"]`
	b.waitText(row+" .status", "Active")
	b.waitText(row+" .replicas", "2 of 2")
	if href := eval[string](b, `document.querySelector('`+row+` .url a').href`); href != url {
		t.Errorf("the app's link goes to %q, want its public URL %q", href, url)
	}
	b.waitText(row+" .revision", "1")
	b.screenshot("apps")

	// Live: stopped through the API, the row follows.
	c.setDesired(ctx, "e2e-web", pb.Spec_DESIRED_STATE_STOPPED)
	b.waitText(row+" .status", "Stopped")
	c.setDesired(ctx, "e2e-web", pb.Spec_DESIRED_STATE_ACTIVE)
	b.waitText(row+" .status", "Active")

	b.run("open the app", chromedp.Click(css(row+" a[href$='/apps/e2e-web']")))
	b.waitText("#app-facts", "Active")
	b.waitText("#app-conditions", "Stopped")
	b.waitText("#app-log", "web listening on")
	// Each line names its replica: both of the running revision printed.
	b.waitJS("the log names the replicas", `new Set([...document.querySelectorAll('#app-log .log-line')]
		.filter((l) => l.textContent.includes('web listening on')).map((l) => l.dataset.replica)).size >= 2`)
	b.screenshot("app")

	b.run("stop it", chromedp.WaitVisible(css(`#app-toggle[data-op="stop"]:not([disabled])`)), chromedp.Click(css("#app-toggle")))
	b.waitText("#app-facts", "Stopped")
	b.waitJS("the button offers Start", `document.getElementById('app-toggle').dataset.op === 'start'`)
	if st := c.get(ctx, "e2e-web").GetSpec().GetDesiredState(); st != pb.Spec_DESIRED_STATE_STOPPED {
		t.Fatalf("after Stop the app's desired state is %v", st)
	}
	if code, body := httpGet(t, url); code != http.StatusServiceUnavailable || !strings.Contains(body, "e2e-web is stopped") {
		t.Errorf("an app stopped from the console answered %d %q, want 503 saying it is stopped", code, body)
	}

	b.run("start it", chromedp.WaitVisible(css(`#app-toggle[data-op="start"]:not([disabled])`)), chromedp.Click(css("#app-toggle")))
	c.waitApp(ctx, "e2e-web", pb.Status_DEPLOYMENT_STATUS_ACTIVE, pb.Status_RUNNING)
	b.waitText("#app-facts", "Active")
	if code, body := httpGet(t, url+"again"); code != http.StatusOK || !strings.HasSuffix(body, "path=/again") {
		t.Errorf("an app started from the console answered %d %q", code, body)
	}

	// Back to the list: the page's Watch and log streams are closed, the
	// list's Watch is open.
	b.run("back to the apps", chromedp.Click(css(`#crumbs a[href$="/apps"]`)))
	b.waitText(row+" .status", "Active")
	waitStreams(t, m, "after leaving the app's page", map[string]int{"Watch": 1})
	assertSameOrigin(t, b)

	narrow := newPhone(t)
	narrow.open(m.URL + consoleProject + "/apps")
	narrow.waitText(row+" .status", "Active")
	shootThemes(narrow, "apps-390")
	narrow.open(m.URL + consoleProject + "/apps/e2e-web")
	narrow.waitText("#app-log", "web listening on")
	shootThemes(narrow, "app-390")
	if over := eval[bool](narrow, `document.documentElement.scrollWidth > window.innerWidth + 1`); over {
		t.Error("the app page scrolls sideways at 390 px")
	}

	// Deleted elsewhere: the list drops it and its page says so, live.
	if _, err := c.apps.Delete(ctx, connect.NewRequest(&pb.DeleteRequest{AppId: e2eAppID("e2e-web")})); err != nil {
		t.Fatal(err)
	}
	b.waitText("#apps tbody", "No apps deployed here yet.")
	narrow.waitText("#app-status", "This app was deleted.")
	narrow.waitJS("no Start or Stop of a deleted app", `document.getElementById('app-toggle').disabled`)
}

// With console.app set, /v2 is the app's: a request for /v2/... reaches
// the app as /v2/... through the apps proxy; before the app is deployed
// and while it is stopped, /v2 answers 503 naming it; the APIs stay the
// manager's.
func TestConsoleServedByApp(t *testing.T) {
	ctx := scenarioContext(t, 10*time.Minute)
	m := startSDKManager(t, dbtest.SQLiteDSN(t), "FLYTE_MANAGER_CONSOLE_APP=flytesnacks/development/e2e-web")
	if code, body := httpGet(t, m.URL+"/v2/projects"); code != http.StatusServiceUnavailable ||
		!strings.Contains(body, "app e2e-web") || !strings.Contains(body, "not deployed") {
		t.Fatalf("/v2 before its app is deployed: %d %q, want 503 naming the app", code, body)
	}

	c, _ := deployWebApp(t, ctx, m)
	for path, want := range map[string]string{"/v2/projects?x=1": "path=/v2/projects?x=1", "/v2": "path=/v2", "/v2/": "path=/v2/"} {
		code, body := httpGet(t, m.URL+path)
		if code != http.StatusOK || !strings.HasPrefix(body, "web pid=") || !strings.HasSuffix(body, want) {
			t.Errorf("GET %s: %d %q, want the app's answer ending %q", path, code, body, want)
		}
	}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get(m.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || loc != "/v2/" {
		t.Errorf("GET /: %d to %q, want a redirect to /v2/", resp.StatusCode, loc)
	}

	c.setDesired(ctx, "e2e-web", pb.Spec_DESIRED_STATE_STOPPED)
	if code, body := httpGet(t, m.URL+"/v2/"); code != http.StatusServiceUnavailable || !strings.Contains(body, "app e2e-web") ||
		!strings.Contains(body, "stopped") {
		t.Errorf("/v2 while its app is stopped: %d %q, want 503 naming the app", code, body)
	}
}
