package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"fmgr.dev/executor/testcluster"
	"fmgr.dev/internal/testkit"
)

// TestStartStop drives the command as `make test-cluster` and
// `make test-cluster-stop` do: start returns once the cluster serves and
// has written its kubeconfig and manager.yaml; a second start leaves it be;
// stop ends it, its Pod processes and its directory, also when the cluster
// process was killed without cleaning up; a second stop is harmless.
func TestStartStop(t *testing.T) {
	assets := testcluster.RequireAssets(t)
	bin := filepath.Join(t.TempDir(), "test-cluster")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := filepath.Join(t.TempDir(), "cluster")
	cmd := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append(args, "--dir", dir, "--assets", assets)...).CombinedOutput()
		if err != nil {
			t.Fatalf("test-cluster %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	t.Cleanup(func() { _ = exec.Command(bin, "stop", "--dir", dir).Run() })

	for _, step := range []struct {
		name string
		kill bool // SIGKILL the cluster process before stop
	}{{name: "stop"}, {name: "stop after the cluster process was killed", kill: true}} {
		t.Run(step.name, func(t *testing.T) {
			out := cmd("start")
			if !strings.Contains(out, "export KUBECONFIG="+filepath.Join(dir, "kubeconfig")) {
				t.Errorf("start does not say how to use the cluster:\n%s", out)
			}
			// Which Python runs tasks, or a warning that none will, as the
			// PATH this test runs with decides.
			if !strings.Contains(out, "Node agent: tasks run ") && !strings.Contains(out, "WARNING: no `a0`") {
				t.Errorf("start does not say what the node agent runs tasks with:\n%s", out)
			}
			manager, err := os.ReadFile(filepath.Join(dir, "manager.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"type: kubernetes", "kubeconfig: " + filepath.Join(dir, "kubeconfig"), "namespace: flyte", "sharedFileStorage: true"} {
				if !strings.Contains(string(manager), want) {
					t.Errorf("manager.yaml lacks %q:\n%s", want, manager)
				}
			}
			if out := cmd("start"); !strings.Contains(out, "running already") {
				t.Errorf("a second start: %s", out)
			}

			pid := runPod(t, filepath.Join(dir, "kubeconfig"))
			if step.kill {
				b, err := os.ReadFile(filepath.Join(dir, pidFile))
				if err != nil {
					t.Fatal(err)
				}
				daemon, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				if err := syscall.Kill(daemon, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				if !waitGone(daemon, stopTimeout) {
					t.Fatalf("the cluster process %d survived SIGKILL", daemon)
				}
			}
			cmd("stop")
			if !waitGone(pid, stopTimeout) {
				t.Errorf("the pod's process %d survived stop", pid)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("stop left %s (%v)", dir, err)
			}
			if leftovers := naming(dir + "/"); len(leftovers) > 0 {
				t.Errorf("stop left processes of the cluster: %v", leftovers)
			}
			if out := cmd("stop"); !strings.Contains(out, "no test cluster is running") {
				t.Errorf("a second stop: %s", out)
			}
		})
	}
}

// runPod runs a long Pod on the cluster and returns its process id.
func runPod(t *testing.T, kubeconfig string) int {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	_, err = client.CoreV1().Pods("flyte").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "unused", Command: []string{"sleep", "600"}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	testkit.EventuallyErr(t, "the pod to run", testcluster.Patience, func() (bool, error) {
		p, err := client.CoreV1().Pods("flyte").Get(ctx, "sleeper", metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning {
			return false, err
		}
		pid, err = strconv.Atoi(strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "process://"))
		return err == nil, err
	})
	return pid
}

// naming lists the live processes whose flags name a path below dir, as
// etcd's and the API server's do.
func naming(dir string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		args, err := cmdline(pid)
		if err != nil || gone(pid) {
			continue
		}
		for _, a := range args {
			if strings.HasPrefix(a, "--data-dir="+dir) || strings.HasPrefix(a, "--cert-dir="+dir) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
