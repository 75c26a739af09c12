package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/executor/testcluster"
	"fmgr.dev/internal/mgrproc"
)

// TestSDKKubernetesTaskCannotStart: on a node whose PATH has no `a0` (the
// SDK's virtualenv is not there), a task's container cannot start. The
// node reports it as a kubelet does (StartError, the runtime's message);
// the run fails with that message, naming the missing executable, after
// the attempts the system retry budget pays for (not the task's retries),
// and nothing blames the task for exiting without error.pb. One cluster,
// a manager on each database in a namespace of its own.
func TestSDKKubernetesTaskCannotStart(t *testing.T) {
	venv(t)
	ctrllog.SetLogger(logr.Discard())
	c := testcluster.ForTest(t, testcluster.Options{
		Namespaces: []string{"nostart-sqlite", "nostart-postgres"},
		Env:        []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "LANG=C.UTF-8"},
	})
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			namespace := "nostart-" + b.name
			m := startManagerWith(t, mgrproc.Options{Bin: managerBin, DSN: b.dsn(t), Env: []string{
				"FLYTE_MANAGER_EXECUTOR_TYPE=kubernetes",
				"FLYTE_MANAGER_EXECUTOR_KUBERNETES_KUBECONFIG=" + c.Kubeconfig,
				"FLYTE_MANAGER_EXECUTOR_KUBERNETES_NAMESPACE=" + namespace,
				"FLYTE_MANAGER_EXECUTOR_KUBERNETES_SHAREDFILESTORAGE=true",
				// One system retry: the task's own retries (2) would make
				// three attempts, the system budget makes two.
				"FLYTE_MANAGER_EXECUTOR_KUBERNETES_SYSTEMRETRIES=1",
			}})
			m.Kubernetes, m.Kubeconfig = true, c.Kubeconfig
			ctx := scenarioContext(t, 6*time.Minute)
			counter := t.TempDir()
			var res struct {
				Run, Phase, Error string
				StatusAttempts    int `json:"status_attempts"`
				Attempts          []attemptInfo
				TaskRan           bool `json:"task_ran"`
			}
			driver(t, ctx, &res, "drive_nostart.py", sdkEndpoint(m), counter)

			const missing = `exec: "a0": executable file not found in $PATH`
			if res.Phase != "FAILED" || !strings.Contains(res.Error, missing) || !strings.Contains(res.Error, "system retry budget is spent") {
				t.Errorf("run %s: %s with error %q; want FAILED saying %s and that the system retry budget is spent", res.Run, res.Phase, res.Error, missing)
			}
			if res.StatusAttempts != 2 || len(res.Attempts) != 2 {
				t.Errorf("run %s: %d attempts (%d in its history), want 2: one, and one system retry (the task's retries=2 would make 3)",
					res.Run, res.StatusAttempts, len(res.Attempts))
			}
			for _, a := range res.Attempts {
				if a.Phase != "FAILED" || !strings.Contains(a.Error, missing) {
					t.Errorf("run %s attempt %d: %s with error %q; want FAILED naming the missing executable", res.Run, a.Attempt, a.Phase, a.Error)
				}
			}
			if res.TaskRan {
				t.Errorf("run %s: the task's code ran, on a node without a0", res.Run)
			}
			raw, _ := json.Marshal(res)
			for _, wrong := range []string{"without writing error.pb", "exited with code 128"} {
				if strings.Contains(string(raw), wrong) {
					t.Errorf("run %s says %q: %s", res.Run, wrong, raw)
				}
			}
			checkStartErrorPods(t, c, namespace, res.Run)
		})
	}
}

// checkStartErrorPods checks that run's Pods in namespace, one per
// attempt, ended as a kubelet reports a container that could not start.
func checkStartErrorPods(t *testing.T, c *testcluster.Cluster, namespace, run string) {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{
		LabelSelector: fmt.Sprintf("%s=%s", v1.LabelRun, v1.LabelValue(run))})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Errorf("run %s has %d Pods, want 2 (one per attempt)", run, len(pods.Items))
	}
	for _, p := range pods.Items {
		if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Terminated == nil {
			t.Errorf("Pod %s: container statuses %+v, want one terminated", p.Name, p.Status.ContainerStatuses)
			continue
		}
		st := p.Status.ContainerStatuses[0].State.Terminated
		if st.Reason != "StartError" || st.ExitCode != 128 || !strings.Contains(st.Message, `exec: "a0"`) ||
			!strings.Contains(st.Message, "PATH=/usr/bin:/bin") {
			t.Errorf("Pod %s: terminated %+v; want StartError, exit 128, the runtime's message with the PATH searched", p.Name, st)
		}
	}
}
