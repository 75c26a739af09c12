package testcluster_test

import (
	"bufio"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"fmgr.dev/executor/testcluster"
)

// Pod logs reach clients through the API server, as from a kubelet: the
// real `kubectl logs`, and a follower that sees lines while the container
// runs and its stream end when it does.
func TestPodLogs(t *testing.T) {
	c := testcluster.ForTest(t)
	ctx := context.Background()

	create(t, c, pod("logs-done", `echo first; echo second >&2; echo third`))
	waitPod(t, c, "logs-done", "to end", terminal)
	out, err := exec.Command(testcluster.Kubectl(), "--kubeconfig", c.Kubeconfig, "-n", ns, "logs", "logs-done").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "first\n") || !strings.Contains(string(out), "second\n") || !strings.Contains(string(out), "third\n") {
		t.Fatalf("kubectl logs: %v\n%s", err, out)
	}

	// Followed, with timestamps: the first line arrives while the
	// container still waits for its release file, the stream ends with it.
	dir := t.TempDir()
	create(t, c, pod("logs-follow", `echo started; while [ ! -e `+dir+`/release ]; do sleep 0.05; done; echo released`))
	waitPod(t, c, "logs-follow", "to run", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	stream, err := c.Client.CoreV1().Pods(ns).GetLogs("logs-follow", &corev1.PodLogOptions{Container: "task", Follow: true, Timestamps: true}).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	sc := bufio.NewScanner(stream)
	var got []string
	for sc.Scan() {
		ts, msg, _ := strings.Cut(sc.Text(), " ")
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
			t.Errorf("line %q has no timestamp", sc.Text())
		}
		got = append(got, msg)
		if msg == "started" {
			if err := exec.Command("touch", dir+"/release").Run(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "started,released" {
		t.Errorf("followed log %q, want started then released", got)
	}
}
