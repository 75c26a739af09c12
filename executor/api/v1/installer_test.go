package v1_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// TestBuildInstaller runs `make build-installer` with the test's kubectl and
// applies the one-file installer it writes to the API server: every object
// of config/default (namespace, CRD, the Role from the RBAC markers in the
// manager's namespace, ServiceAccount, binding, Deployment of IMG) must be
// there and valid, and nothing cluster-wide but the namespace and the CRD.
func TestBuildInstaller(t *testing.T) {
	needKubectl(t)
	dist := t.TempDir()
	const img = "registry.example.com/flyte-manager:test"
	mk := exec.Command("make", "-C", filepath.Join("..", ".."), "build-installer",
		"KUBECTL="+kubectlBin, "DIST="+dist, "IMG="+img)
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make build-installer: %v\n%s", err, out)
	}
	installer := filepath.Join(dist, "install.yaml")
	raw, err := os.ReadFile(installer)
	if err != nil {
		t.Fatal(err)
	}

	kinds := map[string]bool{}
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatalf("installer document: %v", err)
		}
		kinds[head.Kind+"/"+head.Metadata.Name] = true
	}
	for _, want := range []string{
		"Namespace/flyte-executor", "CustomResourceDefinition/taskactions.flyte.org",
		"Role/flyte-executor", "ServiceAccount/flyte-executor",
		"RoleBinding/flyte-executor", "Deployment/flyte-executor",
	} {
		if !kinds[want] {
			t.Errorf("installer lacks %s (has %v)", want, kinds)
		}
	}
	for _, unwanted := range []string{"ClusterRole/flyte-executor", "ClusterRoleBinding/flyte-executor"} {
		if kinds[unwanted] {
			t.Errorf("the single-namespace installer grants cluster-wide rights: %s", unwanted)
		}
	}

	out := kubectl(t, "apply", "-f", installer)
	if strings.Count(out, "\n") < len(kinds) {
		t.Errorf("kubectl apply applied fewer objects than the installer holds:\n%s", out)
	}

	ctx := context.Background()
	var dep appsv1.Deployment
	if err := cluster.client.Get(ctx, types.NamespacedName{Namespace: "flyte-executor", Name: "flyte-executor"}, &dep); err != nil {
		t.Fatal(err)
	}
	if c := dep.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Image != img {
		t.Errorf("Deployment containers %+v, want image %s", c, img)
	}
	if sa := dep.Spec.Template.Spec.ServiceAccountName; sa != "flyte-executor" {
		t.Errorf("Deployment runs as %q", sa)
	}
	var role rbacv1.Role
	if err := cluster.client.Get(ctx, types.NamespacedName{Namespace: "flyte-executor", Name: "flyte-executor"}, &role); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ group, resource, verb string }{
		{"flyte.org", "taskactions", "create"},
		{"flyte.org", "taskactions/status", "update"},
		{"flyte.org", "taskactions/finalizers", "update"},
		{"", "pods", "create"},
		{"events.k8s.io", "events", "create"},
	} {
		if !allows(role.Rules, want.group, want.resource, want.verb) {
			t.Errorf("Role does not allow %s %s/%s", want.verb, want.group, want.resource)
		}
	}
	var binding rbacv1.RoleBinding
	if err := cluster.client.Get(ctx, types.NamespacedName{Namespace: "flyte-executor", Name: "flyte-executor"}, &binding); err != nil {
		t.Fatal(err)
	}
	if s := binding.Subjects; len(s) != 1 || s[0].Name != "flyte-executor" || s[0].Namespace != "flyte-executor" || binding.RoleRef.Name != "flyte-executor" {
		t.Errorf("binding %+v", binding)
	}
}

func allows(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && (slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) {
			return true
		}
	}
	return false
}
