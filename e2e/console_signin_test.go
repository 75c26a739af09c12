package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"fmgr.dev/gen/go/flyteidl2/project"
	"fmgr.dev/gen/go/flyteidl2/project/projectconnect"
	"fmgr.dev/internal/consoleauth"
	"fmgr.dev/internal/mgrproc"
	"fmgr.dev/internal/oidctest"
	"fmgr.dev/internal/testkit"
)

// The console signs in, with auth.mode required over TLS, on both
// databases: a person signs in through the identity provider's
// authorization page (the test provider approves at once) and, bound as a
// viewer of flytesnacks, sees that project's runs but not another
// project's, follows a log stream and opens its log link, and is refused
// when aborting a run; after signing out the API refuses the page and the
// old cookie alike. Then an API key signs in, and revoking it ends the
// session.
func TestConsoleSignIn(t *testing.T) {
	venv(t)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { consoleSignIn(t, b) })
	}
}

func consoleSignIn(t *testing.T, db backend) {
	if ln, err := net.Listen("tcp", "127.0.0.1:443"); err != nil {
		t.Skipf("port 443 is not available (the SDK takes an API key's endpoint as https://<host>:443): %v", err)
	} else {
		ln.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	iss := oidctest.New(t)
	mm := startOIDCManager(t, iss, mgrproc.Options{DSN: db.dsn(t), Port: 443}, fmt.Sprintf(`console:
  providerName: Test IdP
bindings:
  - {subject: vic, role: viewer, project: %s}
`, testProject))
	m := authManager{manager: mm, t: t, ctx: ctx}
	admin, _ := m.newKey("--role", "admin")
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback test
	req := connect.NewRequest(&project.CreateProjectRequest{Project: &project.Project{Id: "otherproject", Name: "otherproject"}})
	req.Header().Set("Authorization", "Bearer "+bearerOf(t, admin))
	if _, err := projectconnect.NewProjectServiceClient(insecure, m.URL).CreateProject(ctx, req); err != nil {
		t.Fatalf("CreateProject with an admin key: %v", err)
	}
	// A run held RUNNING in flytesnacks (to abort), one in otherproject.
	dir := t.TempDir()
	copyTree(t, filepath.Join("testdata", "cli"), dir)
	hold := testkit.TaskDir(t)
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(hold, "release"), nil, 0o644) })
	run := func(project string, args ...string) string {
		cmd := venvCommand(t, ctx, dir, "flyte", append([]string{"run", "--project", project, "--domain", testDomain, "cli_tasks.py"}, args...)...)
		cmd.Env = append(cmd.Env, m.keyEnv(admin)...)
		raw, err := cmd.CombinedOutput()
		out := ansiEscape.ReplaceAllString(string(raw), "")
		match := createdRun.FindStringSubmatch(out)
		if match == nil || (err != nil && !abortedAtExit(err)) {
			t.Fatalf("flyte run in %s: %v\n%s", project, err, out)
		}
		return match[1]
	}
	held := run(testProject, "second_try", "--dir", hold)
	logged := run(testProject, "double", "--x", "3")
	other := run("otherproject", "double", "--x", "1")

	b := newBrowser(t, 0, chromedp.Flag("ignore-certificate-errors", true))
	runs := m.URL + consoleProject + "/runs"
	b.open(runs)
	b.waitText("#main h1", "Sign in")
	b.waitText("#signin-provider", "Sign in with Test IdP")
	b.screenshot("sign-in")

	// The provider's authorization page approves vic at once and sends
	// the browser back to the page it signed in from.
	iss.SetUser(oidctest.User{Subject: "vic", Email: "vic@example.com"})
	b.run("sign in through the provider", chromedp.Click(css("#signin-provider")),
		chromedp.WaitVisible(css(fmt.Sprintf(`#runs [data-run=%q]`, held))))
	b.waitText("#who", "vic@example.com")
	if n := iss.GrantsServed("authorization_code"); n != 1 {
		t.Errorf("the provider served %d code exchanges, want 1", n)
	}
	cookies := eval[string](b, `document.cookie`)
	if strings.Contains(cookies, consoleauth.CookieName) {
		t.Errorf("the page's script can read the session cookie: %q", cookies)
	}
	session := sessionCookie(t, b)
	if !session.HTTPOnly || !session.Secure || session.SameSite != network.CookieSameSiteLax || session.Path != "/" {
		t.Errorf("session cookie %+v: want HttpOnly, Secure, SameSite=Lax, Path=/", session)
	}
	if status := replayCookie(t, m.URL, session.Value); status != http.StatusOK {
		t.Fatalf("the session cookie, replayed as the console sends it: %d", status)
	}

	// Only the bound project: another project's runs are refused, and the
	// projects list leaves it out.
	b.open(m.URL + "/v2/domain/" + testDomain + "/project/otherproject/runs")
	b.waitText("#main .error", "permission denied")
	if eval[bool](b, fmt.Sprintf(`!!document.querySelector('[data-run=%q]')`, other)) {
		t.Errorf("a viewer of %s sees run %s of otherproject", testProject, other)
	}
	b.open(m.URL + "/v2/projects")
	b.waitText("#main", testProject)
	if eval[bool](b, `document.getElementById("main").textContent.includes("otherproject")`) {
		t.Error("the projects list shows otherproject to a viewer of flytesnacks")
	}

	// The log stream works with the session.
	b.open(m.URL + consoleProject + "/runs/" + logged + "?tab=logs")
	b.waitText("#log-lines", "double got x=3")
	b.waitText("#log-state", "End of log")
	// Its log link, opened as a page, reads with the session; without
	// one the endpoint refuses.
	logURL := eval[string](b, `[...document.querySelectorAll("#log-links a")].map((a) => a.href).find((u) => u.includes("/logs/")) || ""`)
	if logURL == "" {
		t.Fatal("the run has no link to the manager's log endpoint")
	}
	b.run("open the log link", chromedp.Navigate(logURL))
	if text := eval[string](b, `document.body.textContent`); !strings.Contains(text, "double got x=3") {
		t.Errorf("the log page with the session: %.300q", text)
	}
	if resp, err := insecure.Get(logURL); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the log page without a credential: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}

	// A viewer may not abort.
	b.open(m.URL + consoleProject + "/runs/" + held)
	eval[bool](b, `(window.confirm = () => true, true)`)
	b.run("abort as a viewer", chromedp.WaitVisible(css("#abort-run")), chromedp.Click(css("#abort-run")))
	b.waitText("#main .error", "permission denied")

	// Sign out: the sign-in page, the API refuses the page, and the old
	// cookie replayed is refused too.
	b.run("sign out", chromedp.Click(css("#signout")), chromedp.WaitVisible(css("#signin-key")))
	status := eval[float64](b, `fetch("/flyteidl2.auth.IdentityService/UserInfo", {method: "POST",
		headers: {"Content-Type": "application/json", "X-Flyte-Console": "1"}, body: "{}"}).then((r) => r.status)`)
	if status != http.StatusUnauthorized {
		t.Errorf("UserInfo after sign-out: %v, want 401", status)
	}
	if status := replayCookie(t, m.URL, session.Value); status != http.StatusUnauthorized {
		t.Errorf("the signed-out cookie, replayed: %d, want 401", status)
	}

	// An API key: a viewer of flytesnacks, shown by its name.
	key, keyID := m.newKey("--role", "viewer", "--project", testProject, "--domain", testDomain)
	b.run("sign in with an API key", chromedp.SendKeys(css("#apikey"), key), chromedp.Click(css(`#signin-key button[type="submit"]`)),
		chromedp.WaitVisible(css("#signout")))
	b.waitText("#who", "Signed in as")
	if v := eval[string](b, `document.getElementById("apikey")?.value || ""`); v != "" {
		t.Error("the key is left in the page")
	}
	b.open(runs)
	b.run("the key's runs", chromedp.WaitVisible(css(fmt.Sprintf(`#runs [data-run=%q]`, held))))

	// Revoking the key ends its session at once: the next call the page
	// makes (moving to the tasks view, without a reload) is refused, and
	// the sign-in page comes back.
	eval[bool](b, `window.__sameDocument = true`)
	m.apikey("revoke", keyID)
	b.run("move to the tasks", chromedp.Click(css(`#main a.button[href$="/tasks"]`)))
	b.waitText("#main h1", "Sign in")
	if !eval[bool](b, `window.__sameDocument === true`) {
		t.Error("the page reloaded to show the sign-in page")
	}
}

// sessionCookie is the browser's console session cookie.
func sessionCookie(t *testing.T, b *browser) *network.Cookie {
	t.Helper()
	var found *network.Cookie
	b.run("read the session cookie", func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
		res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{})
		for _, c := range res.Cookies {
			if c.Name == consoleauth.CookieName {
				found = c
			}
		}
		return chromedp.Void{}, err
	})
	if found == nil {
		t.Fatal("no session cookie after sign-in")
	}
	return found
}

// replayCookie calls UserInfo with the session cookie as the console's
// page does, and answers the HTTP status.
func replayCookie(t *testing.T, base, value string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/flyteidl2.auth.IdentityService/UserInfo", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(consoleauth.Header, "1")
	req.Header.Set("Origin", base)
	req.AddCookie(&http.Cookie{Name: consoleauth.CookieName, Value: value})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback test
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
