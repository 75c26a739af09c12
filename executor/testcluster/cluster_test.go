package testcluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"fmgr.dev/executor/local/process"
	"fmgr.dev/executor/testcluster"
	"fmgr.dev/executor/testcluster/nodeagent"
	"fmgr.dev/internal/testkit"
)

const ns = "flyte"

// pod is a Pod as a controller creates it: no node (the agent schedules
// it), restartPolicy Never, one container running sh -c script.
func pod(name, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "task", Image: "unused", Command: []string{"sh", "-c", script}}},
		},
	}
}

func create(t *testing.T, c *testcluster.Cluster, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	got, err := c.Client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", p.Name, err)
	}
	return got
}

// waitPod polls the Pod until cond holds and returns it.
func waitPod(t *testing.T, c *testcluster.Cluster, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	testkit.EventuallyErr(t, "pod "+name+" "+what, testcluster.Patience, func() (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = p
		return cond(p), fmt.Errorf("phase %s, status %+v", p.Status.Phase, p.Status.ContainerStatuses)
	})
	return last
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func terminatedState(t *testing.T, p *corev1.Pod) *corev1.ContainerStateTerminated {
	t.Helper()
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Fatalf("pod %s: want one terminated container status, got %+v", p.Name, p.Status.ContainerStatuses)
	}
	return p.Status.ContainerStatuses[0].State.Terminated
}

// TestPodsRunToTheirEnd runs Pods through the agent and checks the status a
// kubelet would report at their end.
func TestPodsRunToTheirEnd(t *testing.T) {
	c := testcluster.ForTest(t)
	podDir := func(p *corev1.Pod) string { return nodeagent.PodDir(filepath.Join(c.Dir, "pods"), p) }
	one := int64(1)
	// OnFailure is not supported (Always is: deployments_test.go).
	always := pod("restart-onfailure", "exit 0")
	always.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	deadline := pod("deadline", "sleep 600")
	deadline.Spec.ActiveDeadlineSeconds = &one
	withEnv := pod("env", `env > env.txt`)
	withEnv.Spec.Containers[0].Env = []corev1.EnvVar{
		{Name: "GREETING", Value: "hello"},
		{Name: "DERIVED", Value: "$(GREETING)-world"},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
	}
	notFound := pod("not-found", "")
	notFound.Spec.Containers[0].Command = []string{"fmgr-no-such-command"}

	steps := []struct {
		pod      *corev1.Pod
		phase    corev1.PodPhase
		exitCode int32
		reason   string // the container's
		check    func(t *testing.T, p *corev1.Pod)
	}{
		{pod: pod("exit-0", "echo fine"), phase: corev1.PodSucceeded, exitCode: 0, reason: "Completed"},
		{pod: pod("exit-3", "echo hi; exit 3"), phase: corev1.PodFailed, exitCode: 3, reason: "Error",
			check: func(t *testing.T, p *corev1.Pod) {
				lines, err := process.ReadLog(filepath.Join(podDir(p), "task.log"))
				if err != nil {
					t.Fatal(err)
				}
				var out []string
				for _, l := range lines {
					if l.Stream == process.Stdout {
						out = append(out, l.Message)
					}
				}
				if len(out) != 1 || strings.TrimSpace(out[0]) != "hi" {
					t.Errorf("stdout in the container log = %q, want [hi]", out)
				}
			}},
		{pod: withEnv, phase: corev1.PodSucceeded, exitCode: 0, reason: "Completed",
			check: func(t *testing.T, p *corev1.Pod) {
				b, err := os.ReadFile(filepath.Join(podDir(p), "task", "env.txt"))
				if err != nil {
					t.Fatal(err)
				}
				env := strings.Split(string(b), "\n")
				for _, want := range []string{"GREETING=hello", "DERIVED=hello-world", "POD_NAME=env", "POD_NAMESPACE=flyte", "HOSTNAME=env"} {
					if !contains(env, want) {
						t.Errorf("the process's environment lacks %s:\n%s", want, b)
					}
				}
			}},
		{pod: deadline, phase: corev1.PodFailed, exitCode: 128 + int32(syscall.SIGTERM), reason: "Error",
			check: func(t *testing.T, p *corev1.Pod) {
				if p.Status.Reason != "DeadlineExceeded" {
					t.Errorf("pod reason = %q, want DeadlineExceeded", p.Status.Reason)
				}
			}},
		{pod: always, phase: corev1.PodFailed, exitCode: 128, reason: "Unsupported"},
		{pod: notFound, phase: corev1.PodFailed, exitCode: 128, reason: "StartError",
			check: func(t *testing.T, p *corev1.Pod) {
				// As containerd words it, so that executors read what a
				// kubelet would report.
				if msg := terminatedState(t, p).Message; !strings.Contains(msg, `exec: "fmgr-no-such-command": executable file not found in $PATH`) {
					t.Errorf("message %q does not say the command was not found as a container runtime does", msg)
				}
			}},
	}
	// A container whose environment names a missing Secret cannot be
	// created: the Pod stays Pending, waiting with
	// CreateContainerConfigError, until it is deleted.
	t.Run("config-error", func(t *testing.T) {
		t.Parallel()
		p := pod("config-error", "exit 0")
		p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Key: "token"}}}}
		create(t, c, p)
		got := waitPod(t, c, p.Name, "to wait for its configuration", func(p *corev1.Pod) bool {
			return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil
		})
		if w := got.Status.ContainerStatuses[0].State.Waiting; got.Status.Phase != corev1.PodPending ||
			w.Reason != "CreateContainerConfigError" || !strings.Contains(w.Message, "secret absent not found") {
			t.Errorf("phase %s, waiting %+v; want Pending, CreateContainerConfigError naming the secret", got.Status.Phase, w)
		}
		if err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testkit.EventuallyErr(t, "the agent to confirm the deletion of "+p.Name, testcluster.Patience, func() (bool, error) {
			_, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), p.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), err
		})
	})
	for _, s := range steps {
		t.Run(s.pod.Name, func(t *testing.T) {
			t.Parallel()
			create(t, c, s.pod)
			p := waitPod(t, c, s.pod.Name, "to end", terminal)
			if p.Spec.NodeName != c.Agent.NodeName() {
				t.Errorf("node = %q, want %q", p.Spec.NodeName, c.Agent.NodeName())
			}
			if p.Status.Phase != s.phase {
				t.Errorf("phase = %s, want %s", p.Status.Phase, s.phase)
			}
			st := terminatedState(t, p)
			if st.ExitCode != s.exitCode || st.Reason != s.reason {
				t.Errorf("terminated = exit %d reason %q (%s), want exit %d reason %q", st.ExitCode, st.Reason, st.Message, s.exitCode, s.reason)
			}
			if st.StartedAt.IsZero() || st.FinishedAt.Before(&st.StartedAt) {
				t.Errorf("terminated at %v after starting at %v", st.FinishedAt, st.StartedAt)
			}
			if p.Status.PodIP != "127.0.0.1" || p.Status.StartTime == nil {
				t.Errorf("podIP %q, startTime %v", p.Status.PodIP, p.Status.StartTime)
			}
			if s.check != nil {
				s.check(t, p)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// pidOf reads the process id from a running container's ID (process://<pid>).
func pidOf(t *testing.T, p *corev1.Pod) int {
	t.Helper()
	id, ok := strings.CutPrefix(p.Status.ContainerStatuses[0].ContainerID, "process://")
	pid, err := strconv.Atoi(id)
	if !ok || err != nil {
		t.Fatalf("container ID %q names no process", p.Status.ContainerStatuses[0].ContainerID)
	}
	return pid
}

func alive(pid int) bool {
	// A zombie still answers signal 0; /proc tells it apart.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// TestDeleteRunningPod: deleting a running Pod stops its process (SIGTERM,
// and SIGKILL after the deletion's grace period) and the agent then removes
// the object, as a kubelet confirms a deletion.
func TestDeleteRunningPod(t *testing.T) {
	c := testcluster.ForTest(t)
	for _, s := range []struct {
		name, script string
		podGrace     int64
		deleteGrace  *int64 // nil: the Pod's own
	}{
		{name: "stops-on-sigterm", script: "sleep 600", podGrace: 30},
		// Ignored signals stay ignored across exec: sleep ignores SIGTERM.
		{name: "ignores-sigterm", script: "trap '' TERM; sleep 600", podGrace: 600, deleteGrace: ptr(int64(1))},
	} {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			p := pod(s.name, s.script)
			p.Spec.TerminationGracePeriodSeconds = &s.podGrace
			create(t, c, p)
			running := waitPod(t, c, s.name, "to run", func(p *corev1.Pod) bool {
				cs := p.Status.ContainerStatuses
				return p.Status.Phase == corev1.PodRunning && len(cs) == 1 && cs[0].State.Running != nil && cs[0].Ready
			})
			for _, want := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodReady, corev1.ContainersReady} {
				if !hasCondition(running, want) {
					t.Errorf("a running pod lacks condition %s=True: %+v", want, running.Status.Conditions)
				}
			}
			pid := pidOf(t, running)
			if !alive(pid) {
				t.Fatalf("process %d of the running pod is not alive", pid)
			}
			if err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), s.name, metav1.DeleteOptions{GracePeriodSeconds: s.deleteGrace}); err != nil {
				t.Fatal(err)
			}
			testkit.EventuallyErr(t, "the pod object to be gone", testcluster.Patience, func() (bool, error) {
				_, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), s.name, metav1.GetOptions{})
				return apierrors.IsNotFound(err), err
			})
			// The agent deletes the object only after the process ended.
			if alive(pid) {
				t.Errorf("process %d still runs after its pod was deleted", pid)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func hasCondition(p *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// TestMemoryLimit: a container over its memory limit is killed and ends
// OOMKilled, where the host gives the agent a cgroup to enforce it.
func TestMemoryLimit(t *testing.T) {
	for _, enforcer := range []struct {
		name      string
		noCgroups bool
	}{{name: "cgroup"}, {name: "rss", noCgroups: true}} {
		t.Run(enforcer.name, func(t *testing.T) {
			if r := process.NewRunner(process.Config{}); !enforcer.noCgroups && (!r.Cgroups() || os.Geteuid() != 0) {
				t.Skipf("this host gives no cgroup: %s", r.Containment())
			}
			c := testcluster.ForTest(t, testcluster.Options{NoCgroups: enforcer.noCgroups})
			// tail keeps the one endless line it reads in memory.
			p := pod("hungry", "head -c 4000000000 /dev/zero | tail")
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
			create(t, c, p)
			got := waitPod(t, c, "hungry", "to end", terminal)
			st := terminatedState(t, got)
			if got.Status.Phase != corev1.PodFailed || st.Reason != "OOMKilled" || st.ExitCode != 137 {
				t.Errorf("phase %s, terminated exit %d reason %q (%s), want Failed, 137, OOMKilled", got.Status.Phase, st.ExitCode, st.Reason, st.Message)
			}
		})
	}
}

// TestNoopRunner: Pods complete without a process, with exactly the writes
// a kubelet needs: bind, Running, Succeeded.
func TestNoopRunner(t *testing.T) {
	c := testcluster.ForTest(t, testcluster.Options{Runner: nodeagent.RunNoop})
	p := pod("noop", "")
	p.Spec.Containers[0].Command = []string{"fmgr-no-such-command"} // would fail to start
	w, err := c.Client.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=noop"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	create(t, c, p)
	var phases []string
	for ev := range w.ResultChan() {
		got, ok := ev.Object.(*corev1.Pod)
		if !ok {
			t.Fatalf("watch: %v", ev.Object)
		}
		if ev.Type == watch.Modified {
			phases = append(phases, fmt.Sprintf("%s/%s", got.Spec.NodeName, got.Status.Phase))
		}
		if terminal(got) {
			st := terminatedState(t, got)
			if got.Status.Phase != corev1.PodSucceeded || st.ExitCode != 0 || st.Reason != "Completed" {
				t.Errorf("phase %s, exit %d, reason %q: want Succeeded, 0, Completed", got.Status.Phase, st.ExitCode, st.Reason)
			}
			break
		}
	}
	node := c.Agent.NodeName()
	want := []string{node + "/Pending", node + "/Running", node + "/Succeeded"}
	if strings.Join(phases, " ") != strings.Join(want, " ") {
		t.Errorf("updates of the pod = %v, want %v (bind, running, terminated)", phases, want)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "pods", ns)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the noop runner made a working directory (%v)", err)
	}
}

// TestKubectl: the real kubectl reaches the cluster through the kubeconfig
// and sees the agent's node Ready.
func TestKubectl(t *testing.T) {
	c := testcluster.ForTest(t)
	out, err := exec.Command(testcluster.Kubectl(), "--kubeconfig", c.Kubeconfig, "get", "nodes", "--no-headers").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get nodes: %v\n%s", err, out)
	}
	fields := strings.Fields(string(out))
	if len(fields) < 2 || fields[0] != c.Agent.NodeName() || fields[1] != "Ready" {
		t.Errorf("kubectl get nodes = %q, want %s Ready", out, c.Agent.NodeName())
	}
}

// TestStopKillsPods: stopping the cluster stops the Pods' processes without
// waiting out their grace period (here 10 minutes, for a process that
// ignores SIGTERM).
func TestStopKillsPods(t *testing.T) {
	c := testcluster.ForTest(t)
	p := pod("stubborn", "trap '' TERM; sleep 600")
	p.Spec.TerminationGracePeriodSeconds = ptr(int64(600))
	create(t, c, p)
	pid := pidOf(t, waitPod(t, c, "stubborn", "to run", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }))
	stopped := make(chan error, 1)
	go func() { stopped <- c.Stop() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("stop: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the cluster did not stop within 2 minutes: it waits out the pod's grace period")
	}
	if alive(pid) {
		t.Errorf("process %d of a pod survived the cluster", pid)
	}
}
