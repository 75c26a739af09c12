package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"fmgr.dev/executor/testcluster"
	"fmgr.dev/internal/mgrproc"
	"fmgr.dev/internal/testkit"
)

// TestDevLoop runs the executor development loop as docs/kubernetes.md gives it, on
// the test cluster: the dev binary with nothing but the current kubeconfig,
// `kubectl apply -k config/samples/` with the real kubectl, and `kubectl get
// taskactions -o wide` until the sample shows Completed, SUCCEEDED True.
func TestDevLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts a cluster")
	}
	c := testcluster.ForTest(t)
	bin := filepath.Join(t.TempDir(), "manager")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	env := append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)

	mgr, err := mgrproc.Start(context.Background(), mgrproc.Options{Bin: bin, Env: []string{"KUBECONFIG=" + c.Kubeconfig},
		Args: []string{"--home", filepath.Join(t.TempDir(), "home"), "--port", "0"}, StartTimeout: testcluster.Patience})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mgr.Kill()
		if t.Failed() {
			t.Logf("manager output:\n%s", mgr.Output())
		}
	})
	// exited is an error once the manager has ended (Stop then only
	// returns its exit status).
	exited := func() error {
		if mgr.Running() {
			return nil
		}
		return fmt.Errorf("the manager exited (%v):\n%s", mgr.Stop(), mgr.Output())
	}
	// The kubeconfig names no namespace: kubectl and the manager both use
	// "default".
	if log := mgr.Output(); !strings.Contains(log, "namespace=default") || !strings.Contains(log, "Pods must see the home directory") {
		t.Errorf("the manager's log names neither its namespace nor the shared storage:\n%s", log)
	}

	kubectl := func(args ...string) (string, error) {
		cmd := exec.Command(testcluster.Kubectl(), args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	if out, err := kubectl("apply", "-k", filepath.Join("..", "..", "config", "samples")); err != nil {
		t.Fatal(err)
	} else if !strings.Contains(out, "taskaction.flyte.org/"+sampleName+" created") {
		t.Fatalf("kubectl apply: %s", out)
	}

	var last map[string]string
	testkit.EventuallyErr(t, "the sample to complete", testcluster.Patience, func() (bool, error) {
		if err := exited(); err != nil {
			return false, err
		}
		out, err := kubectl("get", "taskactions", "-o", "wide")
		if err != nil {
			return false, err
		}
		// One TaskAction: the manager takes the sample as its run's root
		// action instead of creating another beside it.
		rows := parseTable(out)
		if len(rows) != 1 || rows[0]["NAME"] != sampleName {
			t.Fatalf("want the sample alone, got:\n%s", out)
		}
		last = rows[0]
		if last["FAILED"] == "True" {
			t.Fatalf("the sample failed:\n%s\nmanager log:\n%s", out, mgr.Output())
		}
		return last["STATUS"] == "Completed" && last["SUCCEEDED"] == "True", fmt.Errorf("last:\n%s", out)
	})
	for col, want := range map[string]string{"RUN": "sample", "ACTION": "a0", "TASKTYPE": "raw-container", "PROGRESSING": "False", "FAILED": "False"} {
		if last[col] != want {
			t.Errorf("%s = %q, want %q (row %v)", col, last[col], want, last)
		}
	}
	// and one Pod: the task ran once.
	if out, err := kubectl("get", "pods", "-o", "name"); err != nil {
		t.Fatal(err)
	} else if strings.TrimSpace(out) != "pod/"+sampleName+"-1" {
		t.Errorf("pods:\n%s\nwant the sample's one attempt", out)
	}
	// SIGTERM: a clean exit.
	if err := mgr.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-mgr.Exited():
	case <-time.After(2 * time.Minute):
		t.Fatal("the manager did not stop after SIGTERM")
	}
	if err := mgr.Stop(); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
}

// sampleName is the TaskAction of config/samples.
const sampleName = "flytesnacks-development-sample-a0"

// TestDeploymentMatchesFlags: the Deployment of config/manager runs the
// binary with flags it accepts, and probes the port it listens on at the
// paths it serves.
func TestDeploymentMatchesFlags(t *testing.T) {
	dep := deployment(t)
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("containers %+v", dep.Spec.Template.Spec.Containers)
	}
	ctr := dep.Spec.Template.Spec.Containers[0]
	f, err := parse(ctr.Args, io.Discard)
	if err != nil {
		t.Fatalf("the Deployment's args %q: %v", ctr.Args, err)
	}
	if !f.leaderElect || f.host != "0.0.0.0" || f.endpoint == "" {
		t.Errorf("the Deployment's flags %+v: want --leader-elect, every interface, an endpoint for the Pods", f)
	}
	for path, probe := range map[string]*corev1.Probe{"/healthz": ctr.LivenessProbe, "/readyz": ctr.ReadinessProbe} {
		switch {
		case probe == nil || probe.HTTPGet == nil:
			t.Errorf("no HTTP probe for %s", path)
		case probe.HTTPGet.Path != path:
			t.Errorf("probe at %s, want %s", probe.HTTPGet.Path, path)
		case containerPort(ctr, probe.HTTPGet.Port) != int32(f.port):
			t.Errorf("probe of %s on port %s, the binary listens on %d", path, probe.HTTPGet.Port.String(), f.port)
		}
	}
}

// deployment is the Deployment of config/manager/manager.yaml.
func deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var head struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatal(err)
		}
		if head.Kind != "Deployment" {
			continue
		}
		dep := &appsv1.Deployment{}
		if err := yaml.UnmarshalStrict(doc, dep); err != nil {
			t.Fatal(err)
		}
		return dep
	}
	t.Fatal("config/manager/manager.yaml has no Deployment")
	return nil
}

// containerPort resolves a probe's port, by number or by name.
func containerPort(c corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return 0
}

// parseTable reads kubectl's table output: each cell starts where its
// header does (empty cells stay empty instead of shifting the row).
func parseTable(out string) []map[string]string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 {
		return nil
	}
	header := lines[0]
	cols := regexp.MustCompile(`\S+`).FindAllStringIndex(header, -1)
	var rows []map[string]string
	for _, line := range lines[1:] {
		row := map[string]string{}
		for i, c := range cols {
			end := len(line)
			if i+1 < len(cols) && cols[i+1][0] < end {
				end = cols[i+1][0]
			}
			if c[0] < end {
				row[header[c[0]:c[1]]] = strings.TrimSpace(line[c[0]:end])
			}
		}
		rows = append(rows, row)
	}
	return rows
}
