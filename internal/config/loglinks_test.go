package config

import (
	"strings"
	"testing"

	"fmgr.dev/internal/loglink"
)

// The default kubernetes log link is the manager's own log endpoint, the
// one the local executor's attempts link to.
func TestDefaultKubernetesLogLinkIsTheLogEndpoint(t *testing.T) {
	isolate(t)
	c, err := Load(Sources{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Executor.Kubernetes.LogLinks) != 1 {
		t.Fatalf("executor.kubernetes.logLinks = %v", c.Executor.Kubernetes.LogLinks)
	}
	l := c.Executor.Kubernetes.LogLinks[0]
	tmpl, err := loglink.Parse(l.Name, l.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []loglink.Attempt{
		{Project: "p", Domain: "d", Run: "r", Action: "a0", Number: 1},
		{Org: "acme", Project: "p", Domain: "d", Run: "r", Action: "n3", Number: 4},
	} {
		name, uri := tmpl.Render(loglink.IdentityValues(a))
		if name != loglink.DefaultName || uri != loglink.Path(a) {
			t.Errorf("default link for %+v = %q %q, want %q %q", a, name, uri, loglink.DefaultName, loglink.Path(a))
		}
	}
}

func TestLogLinksSection(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	const base = "executor:\n  type: kubernetes\n  kubernetes:\n    sharedFileStorage: true\n    logLinks:\n"
	good := writeFile(t, dir, "good.yaml", base+
		"      - name: dashboard\n        url: https://dash.example.com/#/log/{{ .namespace }}/{{ .podName }}/pod?container={{ .containerName }}\n"+
		"      - name: logs\n        url: \"{{ .managerURL }}/logs/{{ .org }}/{{ .project }}/{{ .domain }}/{{ .runName }}/{{ .actionName }}/{{ .attempt }}\"\n")
	c, err := Load(Sources{Files: []string{good}})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Executor.Kubernetes.LogLinks; len(got) != 2 || got[0].Name != "dashboard" || got[1].Name != "logs" {
		t.Errorf("logLinks = %v; want the file's two, replacing the default", got)
	}

	for _, c := range []struct{ entry, want string }{
		{"      - name: x\n        url: https://e.com/{{ .podNme }}\n", `executor.kubernetes.logLinks[0]: url: unknown placeholder "{{ .podNme }}"`},
		{"      - name: x\n        url: e.com/{{ .podName }}\n", "executor.kubernetes.logLinks[0]: url:"},
		{"      - url: https://e.com/\n", "executor.kubernetes.logLinks[0]: name: must not be empty"},
		{"      - name: x\n        url: https://e.com/a\n      - name: x\n        url: https://e.com/b\n", "executor.kubernetes.logLinks[1].name: link \"x\" is declared twice"},
		{"      - name: x\n        url: https://e.com/a\n        template: y\n", "template"},
	} {
		f := writeFile(t, dir, "bad.yaml", base+c.entry)
		if _, err := Load(Sources{Files: []string{f}}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want an error with %q", c.entry, err, c.want)
		}
	}
}
