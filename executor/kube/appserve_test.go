package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/executor/testcluster"
	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	"fmgr.dev/internal/appruntime"
	"fmgr.dev/internal/sdktest"
	"fmgr.dev/internal/testkit"
)

// podServer answers with its Pod's name, on the Pod's own address.
const podServer = `
import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("pod=%s path=%s" % (os.environ["HOSTNAME"], self.path)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
print("serving on", os.environ["POD_IP"], os.environ["PORT"], flush=True)
http.server.ThreadingHTTPServer((os.environ["POD_IP"], int(os.environ["PORT"])), H).serve_forever()
`

type latestReports struct {
	mu   sync.Mutex
	last map[appruntime.Key]appruntime.Report
}

func (r *latestReports) Report(_ context.Context, rep appruntime.Report) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last[rep.Key] = rep
	return nil
}

func (r *latestReports) of(k appruntime.Key) appruntime.Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[k]
}

type appsCluster struct {
	t     *testing.T
	c     *testcluster.Cluster
	k     client.Client
	rt    *Apps
	rep   *latestReports
	proxy string
}

func newAppsCluster(t *testing.T) *appsCluster {
	c := testcluster.ForTest(t)
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	k, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	rep := &latestReports{last: map[appruntime.Key]appruntime.Report{}}
	rt := NewApps(AppsConfig{Client: k, Clientset: c.Client, Placement: v1.Placement{Namespace: "flyte"},
		Endpoint: func() string { return "127.0.0.1:1" }, Reporter: rep, Tick: 200 * time.Millisecond})
	rt.Synced() // the apps are the test's: none to load
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rt.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	srv := httptest.NewServer(rt.Proxy("/apps"))
	t.Cleanup(srv.Close)
	return &appsCluster{t: t, c: c, k: k, rt: rt, rep: rep, proxy: srv.URL}
}

func (h *appsCluster) target(name string, rev uint64, min, max uint32, script string) appruntime.Target {
	tg := appTarget(name, &core.Container{Image: "unused", Command: []string{sdktest.Python(h.t), "-c", script}})
	tg.Revision = rev
	tg.Spec.DesiredState = pb.Spec_DESIRED_STATE_ACTIVE
	tg.Spec.Autoscaling = &pb.AutoscalingConfig{Replicas: &pb.Replicas{Min: min, Max: max}}
	return tg
}

func (h *appsCluster) wait(k appruntime.Key, st pb.Status_DeploymentStatus, sub pb.Status_Substate) appruntime.Report {
	h.t.Helper()
	var got appruntime.Report
	testkit.EventuallyErr(h.t, fmt.Sprintf("app %s to be %v %v", k.Name, st, sub), testcluster.Patience, func() (bool, error) {
		got = h.rep.of(k)
		return got.Status == st && got.Substate == sub, fmt.Errorf("last report %+v", got)
	})
	return got
}

func (h *appsCluster) get(name, path string) (int, string) {
	h.t.Helper()
	resp, err := http.Get(h.proxy + "/apps/flytesnacks/development/" + name + path)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (h *appsCluster) deploymentReplicas(k appruntime.Key) int32 {
	h.t.Helper()
	var dep appsv1.Deployment
	if err := h.k.Get(context.Background(), types.NamespacedName{Namespace: "flyte", Name: appObjectName(k)}, &dep); err != nil {
		h.t.Fatal(err)
	}
	return *dep.Spec.Replicas
}

// An app on the test cluster, served through the manager's proxy: two
// replicas both serve; its Pods' logs stream; stopping it scales its
// Deployment to zero and its URL answers 503.
func TestAppsOnClusterServeAndStop(t *testing.T) {
	h := newAppsCluster(t)
	tg := h.target("web", 1, 2, 2, podServer)
	h.rt.Apply(tg)
	h.wait(tg.Key, pb.Status_DEPLOYMENT_STATUS_ACTIVE, pb.Status_RUNNING)
	testkit.Eventually(t, "both replicas to serve", testcluster.Patience, func() bool { return h.rep.of(tg.Key).Replicas == 2 })
	pods := map[string]bool{}
	for range 20 {
		code, body := h.get("web", "/hello?x=1")
		if code != http.StatusOK || !strings.HasSuffix(body, " path=/hello?x=1") {
			t.Fatalf("GET: %d %q", code, body)
		}
		pod, _, _ := strings.Cut(strings.TrimPrefix(body, "pod="), " ")
		pods[pod] = true
	}
	if len(pods) != 2 {
		t.Fatalf("requests reached pods %v, want two", pods)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var lines []string
	err := h.rt.TailLogs(ctx, tg.Key, "", func(pod string, ls []*dataplane.LogLine) error {
		for _, l := range ls {
			lines = append(lines, pod+": "+l.GetMessage())
		}
		if len(lines) >= 2 {
			cancel()
		}
		return nil
	})
	cancel()
	if err != nil || len(lines) < 2 || !strings.Contains(lines[0], "serving on 127.1.") {
		t.Fatalf("TailLogs: %v, lines %q", err, lines)
	}

	stopped := tg
	stopped.Spec = &pb.Spec{DesiredState: pb.Spec_DESIRED_STATE_STOPPED, AppPayload: tg.Spec.AppPayload, Autoscaling: tg.Spec.Autoscaling}
	h.rt.Apply(stopped)
	h.wait(tg.Key, pb.Status_DEPLOYMENT_STATUS_STOPPED, 0)
	if n := h.deploymentReplicas(tg.Key); n != 0 {
		t.Fatalf("a stopped app's Deployment asks for %d Pods", n)
	}
	if code, body := h.get("web", "/"); code != http.StatusServiceUnavailable || !strings.Contains(body, "stopped") {
		t.Fatalf("a stopped app answered %d %q", code, body)
	}
}

// An idle app scales its Deployment to zero after scaledown_after, and a
// request wakes it; a crashing app is FAILED with CRASH_LOOP and its last
// lines; one that goes over its memory limit with OOM_KILLED.
func TestAppsOnClusterScaleToZeroAndCrash(t *testing.T) {
	h := newAppsCluster(t)
	lazy := h.target("lazy", 1, 0, 1, podServer)
	lazy.Spec.Autoscaling.ScaledownPeriod = durationpb.New(time.Second)
	crashy := h.target("crashy", 1, 1, 1, `import sys; print("about to fail"); sys.exit("boom: no config")`)
	hungry := h.target("hungry", 1, 1, 1, `import time; b = bytearray(512 << 20); b[::4096] = b"x" * len(b[::4096]); time.sleep(60)`)
	hungry.Spec.GetContainer().Resources = &core.Resources{Limits: []*core.Resources_ResourceEntry{{Name: core.Resources_MEMORY, Value: "64Mi"}}}
	h.rt.Apply(lazy)
	h.rt.Apply(crashy)
	h.rt.Apply(hungry)

	h.wait(lazy.Key, pb.Status_DEPLOYMENT_STATUS_ACTIVE, pb.Status_SCALED_TO_ZERO)
	if n := h.deploymentReplicas(lazy.Key); n != 0 {
		t.Fatalf("scaled to zero, the Deployment asks for %d Pods", n)
	}
	if code, body := h.get("lazy", "/wake"); code != http.StatusOK || !strings.HasSuffix(body, "path=/wake") {
		t.Fatalf("waking GET: %d %q", code, body)
	}

	r := h.wait(crashy.Key, pb.Status_DEPLOYMENT_STATUS_FAILED, pb.Status_CRASH_LOOP)
	if !strings.Contains(r.Message, "boom: no config") {
		t.Fatalf("crash loop message %q lacks the app's last line", r.Message)
	}
	if code, body := h.get("crashy", "/"); code != http.StatusServiceUnavailable || !strings.Contains(body, "failed") {
		t.Fatalf("a failed app answered %d %q", code, body)
	}
	h.wait(hungry.Key, pb.Status_DEPLOYMENT_STATUS_FAILED, pb.Status_OOM_KILLED)
}
