package testcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"fmgr.dev/internal/sdktest"
)

// EnvAssets names a directory holding kube-apiserver, etcd and kubectl; it
// is envtest's own variable. Unset, the assets are bin/k8s of the
// repository, where `make envtest-assets` builds them.
const EnvAssets = "KUBEBUILDER_ASSETS"

// BuildCommand builds the assets.
const BuildCommand = "make envtest-assets"

// binaries are the assets the cluster runs (kubectl for the tests that use
// the real client).
var binaries = []string{"kube-apiserver", "etcd", "kubectl"}

// AssetsDir is the directory of the cluster's binaries: $KUBEBUILDER_ASSETS,
// else bin/k8s of the repository.
func AssetsDir() string {
	dir, _ := locateAssets(os.Getenv, sdktest.RepoRoot())
	return dir
}

// locateAssets applies the rule of the package comment: which directory,
// and whether its absence is a failure (it is configured when named
// explicitly, when CI is set, or when bin/k8s exists at all).
func locateAssets(getenv func(string) string, root string) (dir string, configured bool) {
	if d := getenv(EnvAssets); d != "" {
		return d, true
	}
	dir = filepath.Join(root, "bin", "k8s")
	if _, err := os.Stat(dir); err == nil {
		return dir, true
	}
	return dir, getenv("CI") != ""
}

// checkAssets says what is missing from dir, "" when nothing is.
func checkAssets(dir string) string {
	for _, b := range binaries {
		fi, err := os.Stat(filepath.Join(dir, b))
		if err != nil || fi.Mode()&0o111 == 0 {
			return fmt.Sprintf("%s is missing", filepath.Join(dir, b))
		}
	}
	return ""
}

// Kubectl is the path of the assets' kubectl.
func Kubectl() string { return filepath.Join(AssetsDir(), "kubectl") }

// RequireAssets is ForTest's check of the binaries, for a suite that starts
// one cluster (with Start) for many tests: it returns the assets directory
// or skips or fails t.
func RequireAssets(t testing.TB) string {
	t.Helper()
	return requireAssets(t)
}

// requireAssets returns the assets directory for a test: a test fails when
// the assets are configured but incomplete, and is skipped when nothing is
// configured (a plain `go test` on a checkout that never built them).
func requireAssets(t testing.TB) string {
	t.Helper()
	dir, configured := locateAssets(os.Getenv, sdktest.RepoRoot())
	problem := checkAssets(dir)
	switch {
	case problem == "":
		return dir
	case configured:
		t.Fatalf("the test cluster's binaries are configured but unusable: %s; run `%s` (or point %s at a directory with %v)", problem, BuildCommand, EnvAssets, binaries)
	default:
		t.Skipf("the test cluster's binaries are not built (%s unset, no %s): run `%s` to run this test", EnvAssets, dir, BuildCommand)
	}
	return ""
}
