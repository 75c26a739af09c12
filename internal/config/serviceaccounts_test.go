package config

import (
	"strings"
	"testing"
)

// executor.kubernetes.serviceAccounts loads per project and domain, refuses
// unknown keys and names that are no service account, and is empty by
// default (tasks may name only executor.kubernetes.serviceAccount).
func TestServiceAccountGrants(t *testing.T) {
	if got := Default().Executor.Kubernetes.ServiceAccounts; len(got) != 0 {
		t.Fatalf("default grants %+v, want none", got)
	}
	dir := t.TempDir()
	const head = "storage:\n  url: s3://b/p\nexecutor:\n  type: kubernetes\n  kubernetes:\n    serviceAccounts:\n"
	good := writeFile(t, dir, "good.yaml", head+"    - project: My_Proj\n      domain: development\n      allow: [trainer, loader]\n    - allow: [reader]\n")
	c, err := Load(Sources{Files: []string{good}})
	if err != nil {
		t.Fatal(err)
	}
	g := c.Executor.Kubernetes.ServiceAccounts
	if len(g) != 2 || g[0].Project != "My_Proj" || g[0].Domain != "development" || strings.Join(g[0].Allow, ",") != "trainer,loader" ||
		g[1].Project != "" || g[1].Domain != "" || strings.Join(g[1].Allow, ",") != "reader" {
		t.Fatalf("grants %+v", g)
	}
	for name, body := range map[string]string{
		"unknown key":  "    - project: p\n      allowed: [x]\n",
		"no names":     "    - project: p\n",
		"invalid name": "    - allow: [Not_A_Name]\n",
	} {
		f := writeFile(t, dir, strings.ReplaceAll(name, " ", "-")+".yaml", head+body)
		if _, err := Load(Sources{Files: []string{f}}); err == nil || !strings.Contains(strings.ToLower(err.Error()), "serviceaccounts[0]") {
			t.Errorf("%s: err = %v, want one naming executor.kubernetes.serviceAccounts[0]", name, err)
		}
	}
}
