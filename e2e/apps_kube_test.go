package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"fmgr.dev/executor/testcluster"
	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/gen/go/flyteidl2/app/appconnect"
	"fmgr.dev/internal/testkit"
)

// TestAppsKubernetes deploys the apps of testdata/apps with the flyte CLI
// on a manager with the kubernetes executor, on the test cluster (its
// deployment controller, and its node agent running each Pod as a process
// on an address of its own): a two-replica app becomes ACTIVE and its
// public URL answers through the manager from both Pods; TailLogs streams
// what they printed; deactivating it scales its Deployment to zero and its
// URL answers 503; a scale-to-zero app scales its Deployment to zero when
// idle and the next request wakes it; a crashing app ends FAILED with
// CRASH_LOOP and its last line.
func TestAppsKubernetes(t *testing.T) {
	cl, clusterDir := startKubeCluster(t)
	m := startKubeManager(t, cl, clusterDir, cl.Kubeconfig, kubeSharedFiles)
	ctx := scenarioContext(t, 10*time.Minute)
	dir := t.TempDir()
	cliConfig(t, ctx, m, dir)
	copyTree(t, filepath.Join("testdata", "apps"), dir)
	c := appsClient{t: t, apps: appconnect.NewAppServiceClient(http.DefaultClient, m.URL), logs: appconnect.NewAppLogsServiceClient(http.DefaultClient, m.URL)}

	mustFlyte(t, ctx, dir, "deploy", "--version", "e2e-1", "apps.py", "web")
	for _, env := range []string{"lazy", "crashy"} {
		mustFlyte(t, ctx, dir, "deploy", "apps.py", env)
	}

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
		t.Errorf("20 concurrent requests reached %d Pods of e2e-web, want 2: %v", len(pids), pids)
	}

	logs, err := c.logs.TailLogs(ctx, connect.NewRequest(&pb.TailLogsRequest{Target: &pb.TailLogsRequest_AppId{AppId: e2eAppID("e2e-web")}}))
	if err != nil {
		t.Fatal(err)
	}
	if !logs.Receive() || len(logs.Msg().GetReplicas().GetReplicas()) < 2 {
		t.Fatalf("TailLogs: no replica list first: %v %v", logs.Msg(), logs.Err())
	}
	var printed strings.Builder
	for !strings.Contains(printed.String(), "web listening on 127.1.") && logs.Receive() {
		for _, l := range logs.Msg().GetBatches().GetLogs() {
			for _, line := range l.GetStructuredLines() {
				printed.WriteString(line.GetMessage())
			}
		}
	}
	_ = logs.Close()
	if !strings.Contains(printed.String(), "web listening on 127.1.") {
		t.Errorf("TailLogs did not show what e2e-web's Pods printed: %v\n%s", logs.Err(), printed.String())
	}

	mustFlyte(t, ctx, dir, "update", "app", "e2e-web", "--deactivate", "--wait")
	c.waitApp(ctx, "e2e-web", pb.Status_DEPLOYMENT_STATUS_STOPPED, 0)
	if n := deploymentReplicas(t, ctx, cl, "app-e2e-web"); n != 0 {
		t.Errorf("a deactivated app's Deployment asks for %d Pods", n)
	}
	if code, body := httpGet(t, url); code != http.StatusServiceUnavailable || !strings.Contains(body, "e2e-web is stopped") {
		t.Errorf("a deactivated app answered %d %q, want 503 saying it is stopped", code, body)
	}

	lazy := c.waitApp(ctx, "e2e-lazy", pb.Status_DEPLOYMENT_STATUS_ACTIVE, pb.Status_SCALED_TO_ZERO)
	if n := deploymentReplicas(t, ctx, cl, "app-e2e-lazy"); n != 0 {
		t.Errorf("e2e-lazy scaled to zero, its Deployment asks for %d Pods", n)
	}
	if code, body := httpGet(t, lazy.GetStatus().GetIngress().GetPublicUrl()+"wake"); code != http.StatusOK || !strings.HasSuffix(body, "path=/wake") {
		t.Errorf("the request that woke e2e-lazy got %d %q", code, body)
	}

	crashy := c.waitApp(ctx, "e2e-crashy", pb.Status_DEPLOYMENT_STATUS_FAILED, pb.Status_CRASH_LOOP)
	if msg := lastCondition(crashy).GetMessage(); !strings.Contains(msg, "exited with code 3") || !strings.Contains(msg, "crashy-boom: no config file") {
		t.Errorf("e2e-crashy's condition does not say how it crashed: %q", msg)
	}
	if code, body := httpGet(t, crashy.GetStatus().GetIngress().GetPublicUrl()); code != http.StatusServiceUnavailable || !strings.Contains(body, "crashy-boom") {
		t.Errorf("a crash-looping app answered %d %q", code, body)
	}
}

func deploymentReplicas(t *testing.T, ctx context.Context, c *testcluster.Cluster, name string) int32 {
	t.Helper()
	d, err := c.Client.AppsV1().Deployments(kubeNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return *d.Spec.Replicas
}
