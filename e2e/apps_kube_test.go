package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"fmgr.dev/executor/testcluster"
	pb "fmgr.dev/gen/go/flyteidl2/app"
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
	c, dir := deployTestApps(t, ctx, m)
	_, url, _ := c.webServesFromBoth(ctx, m)
	// Each Pod has an address of its own on the test cluster's node.
	c.tailShows(ctx, "e2e-web", "web listening on 127.1.")

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

	c.crashLoops(ctx)
}

func deploymentReplicas(t *testing.T, ctx context.Context, c *testcluster.Cluster, name string) int32 {
	t.Helper()
	d, err := c.Client.AppsV1().Deployments(kubeNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return *d.Spec.Replicas
}
