package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"fmgr.dev/executor/local/netns"
	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/gen/go/flyteidl2/app/appconnect"
	"fmgr.dev/internal/testkit"
)

// TestApps deploys the apps of testdata/apps with the flyte CLI on each
// database, against the local executor: a two-replica app becomes ACTIVE
// and its public URL answers through the manager from both replicas; an
// unchanged deploy keeps its revision; a scale-to-zero app scales to zero
// when idle and the next request wakes it; `flyte update app --deactivate`
// stops an app (its URL then answers 503) and --activate starts it again;
// a crashing app ends FAILED with CRASH_LOOP and its last line; TailLogs
// streams what the replicas printed.
func TestApps(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { testApps(t, startSDKManager(t, b.dsn(t))) })
	}
}

type appsClient struct {
	t    *testing.T
	apps appconnect.AppServiceClient
	logs appconnect.AppLogsServiceClient
}

func (c appsClient) get(ctx context.Context, name string) *pb.App {
	c.t.Helper()
	resp, err := c.apps.Get(ctx, connect.NewRequest(&pb.GetRequest{Identifier: &pb.GetRequest_AppId{AppId: e2eAppID(name)}}))
	if err != nil {
		c.t.Fatalf("get app %s: %v", name, err)
	}
	return resp.Msg.GetApp()
}

func e2eAppID(name string) *pb.Identifier {
	return &pb.Identifier{Project: testProject, Domain: testDomain, Name: name}
}

func lastCondition(a *pb.App) *pb.Condition {
	c := a.GetStatus().GetConditions()
	if len(c) == 0 {
		return nil
	}
	return c[len(c)-1]
}

// waitApp waits until the app's newest condition has the status and
// substate (any substate when sub is 0), and returns the app.
func (c appsClient) waitApp(ctx context.Context, name string, st pb.Status_DeploymentStatus, sub pb.Status_Substate) *pb.App {
	c.t.Helper()
	var a *pb.App
	testkit.Eventually(c.t, fmt.Sprintf("app %s to be %v %v", name, st, sub), 3*time.Minute, func() bool {
		a = c.get(ctx, name)
		last := lastCondition(a)
		return last.GetDeploymentStatus() == st && (sub == 0 || last.GetSubstate() == sub)
	})
	return a
}

// deployTestApps deploys testdata/apps' web, lazy and crashy with the
// flyte CLI, in a directory configured for m, and returns a client of m's
// app services and the directory.
func deployTestApps(t *testing.T, ctx context.Context, m *manager) (appsClient, string) {
	t.Helper()
	dir := t.TempDir()
	cliConfig(t, ctx, m, dir)
	copyTree(t, filepath.Join("testdata", "apps"), dir)
	c := appsClient{t: t, apps: appconnect.NewAppServiceClient(http.DefaultClient, m.URL), logs: appconnect.NewAppLogsServiceClient(http.DefaultClient, m.URL)}
	// e2e-web with a version of its own: without one the SDK derives it
	// from a pickle of the environments, which differs from one process
	// to the next, and every deploy would be a new spec.
	mustFlyte(t, ctx, dir, "deploy", "--version", "e2e-1", "apps.py", "web")
	for _, env := range []string{"lazy", "crashy"} {
		mustFlyte(t, ctx, dir, "deploy", "apps.py", env)
	}
	return c, dir
}

// webServesFromBoth waits until e2e-web is ACTIVE with two replicas and
// checks that 20 concurrent requests to its public URL, under m's, reach
// both; it returns the app, its URL and the pids that answered.
func (c appsClient) webServesFromBoth(ctx context.Context, m *manager) (*pb.App, string, map[string]bool) {
	t := c.t
	t.Helper()
	web := c.waitApp(ctx, "e2e-web", pb.Status_DEPLOYMENT_STATUS_ACTIVE, pb.Status_RUNNING)
	testkit.Eventually(t, "both replicas of e2e-web to serve", 2*time.Minute, func() bool {
		web = c.get(ctx, "e2e-web")
		return web.GetStatus().GetCurrentReplicas() == 2
	})
	url := web.GetStatus().GetIngress().GetPublicUrl()
	if !strings.HasPrefix(url, m.URL+"/apps/flytesnacks/development/e2e-web/") {
		t.Fatalf("public_url %q is not under the manager's %s", url, m.URL)
	}
	pids := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			code, body := httpGet(t, url+"hello?x=1")
			if code != http.StatusOK || !strings.HasPrefix(body, "web pid=") || !strings.HasSuffix(body, "path=/hello?x=1") {
				t.Errorf("GET %shello?x=1: %d %q", url, code, body)
				return
			}
			mu.Lock()
			pids[strings.Fields(body)[1]] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(pids) != 2 {
		t.Errorf("20 concurrent requests reached %d replicas of e2e-web, want 2: %v", len(pids), pids)
	}
	return web, url, pids
}

// tailShows checks that TailLogs of the app lists its replicas first,
// then streams a line containing want.
func (c appsClient) tailShows(ctx context.Context, name, want string) {
	t := c.t
	t.Helper()
	logs, err := c.logs.TailLogs(ctx, connect.NewRequest(&pb.TailLogsRequest{Target: &pb.TailLogsRequest_AppId{AppId: e2eAppID(name)}}))
	if err != nil {
		t.Fatal(err)
	}
	if !logs.Receive() || len(logs.Msg().GetReplicas().GetReplicas()) < 2 {
		t.Fatalf("TailLogs: no replica list first: %v %v", logs.Msg(), logs.Err())
	}
	var printed strings.Builder
	for !strings.Contains(printed.String(), want) && logs.Receive() {
		for _, l := range logs.Msg().GetBatches().GetLogs() {
			for _, line := range l.GetStructuredLines() {
				printed.WriteString(line.GetMessage())
			}
		}
	}
	_ = logs.Close()
	if !strings.Contains(printed.String(), want) {
		t.Errorf("TailLogs did not show what %s printed (%q): %v\n%s", name, want, logs.Err(), printed.String())
	}
}

// crashLoops checks that e2e-crashy ends FAILED with CRASH_LOOP, its
// condition and its URL saying how it crashed.
func (c appsClient) crashLoops(ctx context.Context) {
	t := c.t
	t.Helper()
	crashy := c.waitApp(ctx, "e2e-crashy", pb.Status_DEPLOYMENT_STATUS_FAILED, pb.Status_CRASH_LOOP)
	if msg := lastCondition(crashy).GetMessage(); !strings.Contains(msg, "exited with code 3") || !strings.Contains(msg, "crashy-boom: no config file") {
		t.Errorf("e2e-crashy's condition does not say how it crashed: %q", msg)
	}
	if code, body := httpGet(t, crashy.GetStatus().GetIngress().GetPublicUrl()); code != http.StatusServiceUnavailable || !strings.Contains(body, "crashy-boom") {
		t.Errorf("a crash-looping app answered %d %q", code, body)
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func testApps(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 10*time.Minute)
	c, dir := deployTestApps(t, ctx, m)
	web, url, pids := c.webServesFromBoth(ctx, m)

	// Deploying it unchanged keeps its revision.
	rev := web.GetMetadata().GetRevision()
	mustFlyte(t, ctx, dir, "deploy", "--version", "e2e-1", "apps.py", "web")
	if again := c.get(ctx, "e2e-web"); again.GetMetadata().GetRevision() != rev {
		t.Errorf("an unchanged deploy moved e2e-web from revision %d to %d", rev, again.GetMetadata().GetRevision())
	}

	// Its logs: the replicas, then what they printed.
	c.tailShows(ctx, "e2e-web", "web listening on")

	// Stop and start it as the CLI does.
	mustFlyte(t, ctx, dir, "update", "app", "e2e-web", "--deactivate", "--wait")
	c.waitApp(ctx, "e2e-web", pb.Status_DEPLOYMENT_STATUS_STOPPED, 0)
	if code, body := httpGet(t, url); code != http.StatusServiceUnavailable || !strings.Contains(body, "e2e-web is stopped") {
		t.Errorf("a deactivated app answered %d %q, want 503 saying it is stopped", code, body)
	}
	mustFlyte(t, ctx, dir, "update", "app", "e2e-web", "--activate", "--wait")
	if code, body := httpGet(t, url); code != http.StatusOK || !strings.HasPrefix(body, "web pid=") {
		t.Errorf("a reactivated app answered %d %q", code, body)
	}

	// Scale to zero after its 2 s idle, then a request wakes it.
	lazy := c.waitApp(ctx, "e2e-lazy", pb.Status_DEPLOYMENT_STATUS_ACTIVE, pb.Status_SCALED_TO_ZERO)
	if n := lazy.GetStatus().GetCurrentReplicas(); n != 0 {
		t.Errorf("e2e-lazy scaled to zero reports %d replicas", n)
	}
	if code, body := httpGet(t, lazy.GetStatus().GetIngress().GetPublicUrl()+"wake"); code != http.StatusOK || !strings.HasSuffix(body, "path=/wake") {
		t.Errorf("the request that woke e2e-lazy got %d %q", code, body)
	}

	// The example in examples/ deploys and answers as its docstring says.
	copyTree(t, filepath.Join("..", "examples"), filepath.Join(dir, "examples"))
	mustFlyte(t, ctx, dir, "deploy", "examples/app.py", "env")
	hello := c.waitApp(ctx, "hello-app", pb.Status_DEPLOYMENT_STATUS_ACTIVE, pb.Status_RUNNING)
	if code, body := httpGet(t, hello.GetStatus().GetIngress().GetPublicUrl()); code != http.StatusOK || !strings.Contains(body, "Hello from replica") {
		t.Errorf("examples/app.py answered %d %q", code, body)
	}

	// A crash loop, with the line it printed.
	c.crashLoops(ctx)

	// A manager that crashed starts the apps that should run again: the
	// replicas died with it, new ones answer.
	m.Kill()
	m.Restart()
	c = appsClient{t: t, apps: appconnect.NewAppServiceClient(http.DefaultClient, m.URL), logs: appconnect.NewAppLogsServiceClient(http.DefaultClient, m.URL)}
	url = c.get(ctx, "e2e-web").GetStatus().GetIngress().GetPublicUrl()
	// The new process takes the executor lease once the killed one's
	// expires; until then it answers that another manager runs the apps.
	var code int
	var body string
	testkit.Eventually(t, "the restarted manager to take the executor lease and serve e2e-web", 3*time.Minute, func() bool {
		code, body = httpGet(t, url+"after-restart")
		return code != http.StatusServiceUnavailable || !strings.Contains(body, "holds the executor lease")
	})
	if code != http.StatusOK || !strings.HasSuffix(body, "path=/after-restart") {
		t.Fatalf("e2e-web after a manager restart answered %d %q", code, body)
	}
	if pid := strings.Fields(body)[1]; pids[pid] {
		t.Errorf("e2e-web answered from %s, a replica of before the restart", pid)
	}
	c.waitApp(ctx, "e2e-web", pb.Status_DEPLOYMENT_STATUS_ACTIVE, pb.Status_RUNNING)
}

// TestAppsIsolated deploys an app whose two replicas both bind
// 127.0.0.1:8080 and read a secret, on each database: both serve (each
// replica has a network namespace of its own, reached through the
// manager's forwarders), neither reaches a listener on the host's
// loopback, each has the app's secret, and its storage key writes the
// app's own prefix and nothing else.
func TestAppsIsolated(t *testing.T) {
	if err := netns.Supported(); err != nil {
		t.Skipf("this host makes no network namespaces (run as root): %v", err)
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { testAppsIsolated(t, startSDKManager(t, b.dsn(t))) })
	}
}

func testAppsIsolated(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 6*time.Minute)
	dir := t.TempDir()
	cliConfig(t, ctx, m, dir)
	copyTree(t, filepath.Join("testdata", "apps"), dir)
	c := appsClient{t: t, apps: appconnect.NewAppServiceClient(http.DefaultClient, m.URL)}
	mustFlyte(t, ctx, dir, "create", "secret", "e2e-app-secret", "--value", "app-s3cr3t")
	mustFlyte(t, ctx, dir, "deploy", "apps.py", "iso")

	iso := c.waitApp(ctx, "e2e-iso", pb.Status_DEPLOYMENT_STATUS_ACTIVE, pb.Status_RUNNING)
	testkit.Eventually(t, "both replicas of e2e-iso to serve", 2*time.Minute, func() bool {
		iso = c.get(ctx, "e2e-iso")
		return iso.GetStatus().GetCurrentReplicas() == 2
	})
	url := iso.GetStatus().GetIngress().GetPublicUrl()
	pids := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			code, body := httpGet(t, url+"hi")
			if code != http.StatusOK || !strings.HasPrefix(body, "iso pid=") {
				t.Errorf("GET %shi: %d %q", url, code, body)
				return
			}
			mu.Lock()
			pids[strings.Fields(body)[1]] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(pids) != 2 {
		t.Errorf("20 concurrent requests reached %d replicas of e2e-iso (both bind 127.0.0.1:8080), want 2: %v", len(pids), pids)
	}

	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	_, port, _ := net.SplitHostPort(host.Addr().String())
	if code, body := httpGet(t, url+"reach?port="+port); code != http.StatusOK || !strings.HasPrefix(body, "unreachable") {
		t.Errorf("a replica reached a listener on the host's loopback: %d %q", code, body)
	}
	if code, body := httpGet(t, url+"secret"); code != http.StatusOK || body != "secret=app-s3cr3t" {
		t.Errorf("e2e-iso's secret: %d %q", code, body)
	}
	for key, want := range map[string]string{
		"apps/" + testProject + "/" + testDomain + "/e2e-iso/written.txt": "put ok",
		"apps/" + testProject + "/" + testDomain + "/e2e-web/written.txt": "put refused",
		"runs/_/" + testProject + "/" + testDomain + "/somerun/x.txt":     "put refused",
	} {
		if code, body := httpGet(t, url+"put?key="+key); code != http.StatusOK || !strings.HasPrefix(body, want) {
			t.Errorf("e2e-iso writing %s: %d %q, want %q", key, code, body, want)
		}
	}
}

// TestAppsOnS3 deploys examples/app.py on a manager whose storage is S3:
// fserve downloads the code bundle with the store's keys the manager gives
// replicas as it gives attempts.
func TestAppsOnS3(t *testing.T) {
	m := startSDKManagerOnS3(t, backends[0].dsn(t))
	ctx := scenarioContext(t, 5*time.Minute)
	dir := t.TempDir()
	cliConfig(t, ctx, m, dir)
	copyTree(t, filepath.Join("..", "examples"), filepath.Join(dir, "examples"))
	mustFlyte(t, ctx, dir, "deploy", "examples/app.py", "env")
	c := appsClient{t: t, apps: appconnect.NewAppServiceClient(http.DefaultClient, m.URL)}
	hello := c.waitApp(ctx, "hello-app", pb.Status_DEPLOYMENT_STATUS_ACTIVE, pb.Status_RUNNING)
	if code, body := httpGet(t, hello.GetStatus().GetIngress().GetPublicUrl()); code != http.StatusOK || !strings.Contains(body, "Hello from replica") {
		t.Errorf("examples/app.py on S3 storage answered %d %q", code, body)
	}
}
