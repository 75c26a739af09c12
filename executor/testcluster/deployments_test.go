package testcluster_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"fmgr.dev/executor/testcluster"
	"fmgr.dev/internal/sdktest"
	"fmgr.dev/internal/testkit"
)

// webServer answers with the Pod's name, on the Pod's own address.
const webServer = `
import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = os.environ["HOSTNAME"].encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
print("serving on", os.environ["POD_IP"], flush=True)
http.server.ThreadingHTTPServer((os.environ["POD_IP"], 8080), H).serve_forever()
`

func deployment(name string, replicas int32, command ...string) *appsv1.Deployment {
	sel := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "unused", Command: command,
					Env:                      []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
					Ports:                    []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
						TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}}},
				}}},
			},
		},
	}
}

func deploymentPods(t *testing.T, c *testcluster.Cluster, name string) []corev1.Pod {
	t.Helper()
	list, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func scale(t *testing.T, c *testcluster.Cluster, name string, n int32) {
	t.Helper()
	ctx := context.Background()
	s, err := c.Client.AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.Replicas = n
	if _, err := c.Client.AppsV1().Deployments(ns).UpdateScale(ctx, name, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitDeployment waits until the Deployment has want Pods, all ready and
// of its current template, and says so in its status.
func waitDeployment(t *testing.T, c *testcluster.Cluster, name string, want int32) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	testkit.EventuallyErr(t, fmt.Sprintf("deployment %s to have %d ready pods", name, want), testcluster.Patience, func() (bool, error) {
		d, err := c.Client.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pods = deploymentPods(t, c, name)
		available := false
		for _, cond := range d.Status.Conditions {
			if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
				available = true
			}
		}
		st := d.Status
		return len(pods) == int(want) && st.Replicas == want && st.ReadyReplicas == want && st.AvailableReplicas == want &&
				st.UpdatedReplicas == want && st.ObservedGeneration == d.Generation && available,
			fmt.Errorf("%d pods, status %+v", len(pods), st)
	})
	return pods
}

// A Deployment's Pods: created to its replicas, each on an address of its
// own where its server listens (two on port 8080 at once), Ready by their
// probe, scaled down to zero and up again, replaced when the template
// changes.
func TestDeploymentScalesAndServes(t *testing.T) {
	c := testcluster.ForTest(t)
	ctx := context.Background()
	dep := deployment("web", 2, sdktest.Python(t), "-c", webServer)
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := waitDeployment(t, c, "web", 2)
	ips := map[string]bool{}
	for _, p := range pods {
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.Kind != "Deployment" || ref.Name != "web" {
			t.Errorf("pod %s is not controlled by the deployment: %+v", p.Name, p.OwnerReferences)
		}
		if p.Labels[testcluster.LabelPodTemplateHash] == "" {
			t.Errorf("pod %s has no %s label", p.Name, testcluster.LabelPodTemplateHash)
		}
		ips[p.Status.PodIP] = true
		resp, err := http.Get("http://" + net.JoinHostPort(p.Status.PodIP, "8080") + "/")
		if err != nil {
			t.Fatalf("pod %s at %s: %v", p.Name, p.Status.PodIP, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != p.Name {
			t.Errorf("pod %s at %s answered %q", p.Name, p.Status.PodIP, body)
		}
	}
	if len(ips) != 2 || ips["127.0.0.1"] {
		t.Fatalf("the pods' addresses %v are not two of their own", ips)
	}

	scale(t, c, "web", 0)
	waitDeployment(t, c, "web", 0)
	scale(t, c, "web", 1)
	first := waitDeployment(t, c, "web", 1)[0]

	// A new template replaces the Pod.
	cur, err := c.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Template.Labels["rev"] = "2"
	if _, err := c.Client.AppsV1().Deployments(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the pod of the old template to be replaced", testcluster.Patience, func() bool {
		pods := deploymentPods(t, c, "web")
		return len(pods) == 1 && pods[0].Name != first.Name && pods[0].Labels["rev"] == "2" && pods[0].DeletionTimestamp == nil
	})
	waitDeployment(t, c, "web", 1)
}

// A container that keeps exiting is restarted, and waits in
// CrashLoopBackOff between restarts with its last end and output.
func TestDeploymentCrashLoop(t *testing.T) {
	c := testcluster.ForTest(t)
	dep := deployment("crashy", 1, "sh", "-c", "echo about to fail; echo boom >&2; exit 3")
	if _, err := c.Client.AppsV1().Deployments(ns).Create(context.Background(), dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyErr(t, "the pod to crash-loop", testcluster.Patience, func() (bool, error) {
		pods := deploymentPods(t, c, "crashy")
		if len(pods) != 1 || len(pods[0].Status.ContainerStatuses) != 1 {
			return false, fmt.Errorf("%d pods", len(pods))
		}
		cs := pods[0].Status.ContainerStatuses[0]
		last := cs.LastTerminationState.Terminated
		return cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" && cs.RestartCount >= 2 &&
				last != nil && last.ExitCode == 3 && strings.Contains(last.Message, "boom") && pods[0].Status.Phase == corev1.PodRunning,
			fmt.Errorf("phase %s, status %+v", pods[0].Status.Phase, cs)
	})
}
