package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"fmgr.dev/executor/testcluster"
	"fmgr.dev/internal/helmtest"
	"fmgr.dev/internal/sdktest"
)

// The chart's service account as the API server knows it: release "flyte"
// in namespace kubeNamespace.
const (
	chartServiceAccount = "flyte-flyte-binary"
	chartUser           = "system:serviceaccount:" + kubeNamespace + ":" + chartServiceAccount
)

// TestSDKKubernetesChartRBAC proves the chart's RBAC sufficient: the chart's
// ServiceAccount and Role are installed into the test cluster (whose API
// server enforces RBAC) and the manager reaches the API server as that
// ServiceAccount only (impersonation), through the SDK smoke test: a run, an
// abort, a secret, a cache hit and a fan-out.
func TestSDKKubernetesChartRBAC(t *testing.T) {
	c, clusterDir := startKubeCluster(t)
	m := startKubeManager(t, c, clusterDir, chartKubeconfig(t, c), kubeSharedFiles)
	// One after the other: the cache's runs do not queue behind the
	// fan-out's hundred Pods.
	for _, s := range []struct {
		name string
		run  func(*testing.T, *manager)
	}{
		{"quickstart", testQuickStart},
		{"abort", testAbort},
		{"secrets", testSecrets},
		{"cache", testCacheRepeat},
		{"tree", testTree},
	} {
		t.Run(s.name, func(t *testing.T) { s.run(t, m) })
	}
}

// chartKubeconfig installs the chart's ServiceAccount and RBAC as `helm
// template` renders them for release "flyte" and returns a kubeconfig that
// acts as that ServiceAccount (the administrator's credentials, impersonating
// it), so the API server grants the manager exactly the chart's rules.
func chartKubeconfig(t *testing.T, c *testcluster.Cluster) string {
	t.Helper()
	chart := filepath.Join(sdktest.RepoRoot(), "charts", "flyte-binary")
	out, err := helmtest.Run(t, "template", "flyte", chart, "--namespace", kubeNamespace,
		"--show-only", "templates/serviceaccount.yaml", "--show-only", "templates/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	manifests := filepath.Join(t.TempDir(), "rbac.yaml")
	if err := os.WriteFile(manifests, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if res, err := exec.Command(testcluster.Kubectl(), "--kubeconfig", c.Kubeconfig, "apply", "-f", manifests).CombinedOutput(); err != nil {
		t.Fatalf("applying the chart's RBAC: %v\n%s", err, res)
	}
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range cfg.AuthInfos {
		user.Impersonate = chartUser
		user.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + kubeNamespace, "system:authenticated"}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	// The impersonated account may do what the chart grants and no more.
	for _, check := range []struct {
		args []string
		want string
	}{
		{[]string{"auth", "can-i", "create", "taskactions.flyte.org", "-n", kubeNamespace}, "yes"},
		{[]string{"auth", "can-i", "get", "secrets", "-n", kubeNamespace}, "no"},
		{[]string{"auth", "can-i", "list", "pods", "-n", "default"}, "no"},
	} {
		res, _ := exec.Command(testcluster.Kubectl(), append([]string{"--kubeconfig", path}, check.args...)...).CombinedOutput()
		if got := string(res); len(got) < len(check.want) || got[:len(check.want)] != check.want {
			t.Fatalf("kubectl %v as %s: %q, want %s", check.args, chartUser, got, check.want)
		}
	}
	return path
}
