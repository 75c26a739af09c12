package v1_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"fmgr.dev/internal/testkit"
)

// TestMakeInstallDeploy drives the executor Makefile's cluster targets against
// an API server of its own (it installs and removes the CRD, which would
// disturb the shared one): install, install again, uninstall, uninstall of
// nothing, deploy, undeploy. After each step it checks the cluster.
func TestMakeInstallDeploy(t *testing.T) {
	needKubectl(t)
	tc, err := startCluster(t.TempDir()) // no CRD: make install puts it there
	if err != nil {
		t.Fatal(err)
	}
	defer tc.stop()
	ctx := context.Background()
	crd := types.NamespacedName{Name: "taskactions.flyte.org"}
	deployment := types.NamespacedName{Namespace: "flyte-executor", Name: "flyte-executor"}
	const img = "registry.example.com/flyte-manager:deploy-test"

	exists := func(key types.NamespacedName, obj client.Object) func() bool {
		return func() bool { return tc.client.Get(ctx, key, obj) == nil && obj.GetDeletionTimestamp() == nil }
	}
	gone := func(key types.NamespacedName, obj client.Object) func() bool {
		return func() bool {
			err := tc.client.Get(ctx, key, obj)
			// Without a controller manager nothing finishes a namespace's
			// deletion: being deleted counts as gone.
			return apierrors.IsNotFound(err) || (err == nil && obj.GetDeletionTimestamp() != nil)
		}
	}
	steps := []struct {
		target string
		args   []string
		done   func() bool // the condition the step must reach
	}{
		{"install", nil, exists(crd, &apiextensionsv1.CustomResourceDefinition{})},
		{"install", nil, exists(crd, &apiextensionsv1.CustomResourceDefinition{})},
		{"uninstall", nil, gone(crd, &apiextensionsv1.CustomResourceDefinition{})},
		{"uninstall", nil, gone(crd, &apiextensionsv1.CustomResourceDefinition{})},
		{"deploy", []string{"IMG=" + img}, func() bool {
			var d appsv1.Deployment
			return exists(crd, &apiextensionsv1.CustomResourceDefinition{})() &&
				exists(deployment, &d)() && d.Spec.Template.Spec.Containers[0].Image == img
		}},
		// The test cluster has no controller manager to finish deleting
		// the namespace: do not wait for it.
		{"undeploy", []string{"WAIT=false"}, func() bool {
			return gone(crd, &apiextensionsv1.CustomResourceDefinition{})() &&
				gone(deployment, &appsv1.Deployment{})() &&
				gone(types.NamespacedName{Name: "flyte-executor"}, &corev1.Namespace{})()
		}},
	}
	for i, s := range steps {
		args := append([]string{"-C", filepath.Join("..", ".."), s.target, "KUBECTL=" + kubectlBin}, s.args...)
		mctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(mctx, "make", args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+tc.kubeconfig)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("step %d: make %s: %v\n%s", i, s.target, err, out)
		}
		// Deletions finish asynchronously (the CRD's instances are removed
		// first), so wait for the condition, generously.
		if testkit.Poll(60*time.Second, 100*time.Millisecond, func() string {
			if !s.done() {
				return "not yet"
			}
			return ""
		}) != "" {
			t.Fatalf("step %d: make %s did not take effect", i, s.target)
		}
	}
}
