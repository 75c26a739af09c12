package charts

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"fmgr.dev/executor/testcluster"
	"fmgr.dev/executor/testcluster/nodeagent"
	"fmgr.dev/internal/helmtest"
)

// startCluster is a test cluster without the TaskAction CRD (the chart
// installs it) whose Pods never run.
func startCluster(t *testing.T) *testcluster.Cluster {
	t.Helper()
	return testcluster.ForTest(t, testcluster.Options{CRDDirs: []string{t.TempDir()}, Runner: nodeagent.RunNoop})
}

// Every object each variant renders is accepted by a real API server: a
// server-side dry run checks it against the server's schemas (the CRD
// itself, Deployments, RBAC, Ingress, PodDisruptionBudget, PodTemplate).
func TestChartServerDryRun(t *testing.T) {
	c := startCluster(t)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			out, err := render(t, v.args()...)
			if err != nil {
				t.Fatal(err)
			}
			f := filepath.Join(t.TempDir(), "manifests.yaml")
			if err := os.WriteFile(f, []byte(out), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(testcluster.Kubectl(), "--kubeconfig", c.Kubeconfig, "apply", "--server-side",
				"--field-manager", "helm-test", "--dry-run=server", "-f", f)
			res, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("the API server refuses the rendered objects: %v\n%s", err, res)
			}
			if n := strings.Count(string(res), "(server dry run)"); n != len(helmtest.Split(t, out)) {
				t.Errorf("%d objects applied, %d rendered:\n%s", n, len(helmtest.Split(t, out)), res)
			}
		})
	}
}

// helm install, then helm upgrade: unchanged values keep the Pod template
// (the generated secrets key survives the upgrade), changed configuration
// changes its checksum annotation, which rolls the Pods.
func TestChartUpgradeRollsPods(t *testing.T) {
	c := startCluster(t)
	kube := []string{"--kubeconfig", c.Kubeconfig, "--namespace", "flyte"}
	helm := func(args ...string) {
		t.Helper()
		if out, err := helmtest.Run(t, append(append(args, kube...), chart)...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	annotations := func() map[string]string {
		t.Helper()
		d, err := c.Client.AppsV1().Deployments("flyte").Get(context.Background(), "flyte-flyte-binary", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Annotations
	}
	helm("install", "flyte")
	first := annotations()
	if first["checksum/config"] == "" || first["checksum/secret"] == "" {
		t.Fatalf("the Pod template has no checksums: %v", first)
	}
	helm("upgrade", "flyte")
	if again := annotations(); again["checksum/config"] != first["checksum/config"] || again["checksum/secret"] != first["checksum/secret"] {
		t.Errorf("an upgrade with the same values changed the Pod template: %v, then %v", first, again)
	}
	helm("upgrade", "flyte", "--set", "configuration.inline.log.level=debug")
	changed := annotations()
	if changed["checksum/config"] == first["checksum/config"] {
		t.Errorf("a changed configuration kept checksum/config %s: the Pods would not roll", first["checksum/config"])
	}
	helm("upgrade", "flyte", "--reuse-values", "--set", "configuration.database.postgres.host=db.example", "--set", "configuration.database.postgres.password=pw")
	if last := annotations(); last["checksum/secret"] == changed["checksum/secret"] {
		t.Errorf("a changed database password kept checksum/secret: the Pods would not roll")
	}
}
