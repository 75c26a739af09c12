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

// Presets and Flyte's template entries load beside URL templates, for each
// executor with the placeholders its attempts have; errors name the entry.
func TestLogLinkKindsPerExecutor(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	c, err := Load(Sources{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Executor.Local.LogLinks; len(got) != 1 || got[0].URL != DefaultLogLink.URL || got[0].Name != "logs" {
		t.Errorf("executor.local.logLinks default = %v", got)
	}
	good := writeFile(t, dir, "good.yaml", `executor:
  local:
    logLinks:
      - name: host
        url: "https://logs.example.com/{{ .hostname }}/{{ .executionName }}/{{ .taskRetryAttempt }}"
  type: kubernetes
  kubernetes:
    sharedFileStorage: true
    logLinks:
      - kind: cloudwatch
        region: us-east-1
        logGroup: /aws/containerinsights/prod/application
      - kind: grafana-loki
        baseURL: https://grafana.example.com
        dataSource: loki-1
      - displayName: Flyte
        messageFormat: json
        templateUris:
          - "https://logs.example.com/{{ $podName }}/{{ .podUnixFinishTime }}"
`)
	c, err = Load(Sources{Files: []string{good}})
	if err != nil {
		t.Fatal(err)
	}
	if k := c.Executor.Kubernetes.LogLinks; len(k) != 3 || k[0].Kind != loglink.KindCloudWatch || k[0].LogGroup == "" || len(k[2].TemplateURIs) != 1 {
		t.Errorf("kubernetes logLinks = %+v", k)
	}
	if l := c.Executor.Local.LogLinks; len(l) != 1 || l[0].Name != "host" {
		t.Errorf("local logLinks = %+v", l)
	}
	for _, c := range []struct{ yaml, want string }{
		{"executor:\n  local:\n    logLinks:\n      - name: x\n        url: https://e.com/{{ .podName }}\n",
			`executor.local.logLinks[0]: url: placeholder "{{ .podName }}" has no value for local attempts`},
		{"executor:\n  local:\n    logLinks:\n      - kind: stackdriver\n        gcpProject: my-project\n        resourceName: k8s_container\n",
			"executor.local.logLinks[0]: kind: stackdriver links a Pod's log"},
		{"executor:\n  type: kubernetes\n  kubernetes:\n    sharedFileStorage: true\n    logLinks:\n      - kind: cloudwatch\n        region: us-east-1\n",
			"executor.kubernetes.logLinks[0]: logGroup:"},
		{"executor:\n  type: kubernetes\n  kubernetes:\n    sharedFileStorage: true\n    logLinks:\n      - kind: stackdriver\n        gcpProject: my-project\n        resourceName: k8s_container\n      - name: Google Cloud Logs\n        url: https://e.com/\n",
			`executor.kubernetes.logLinks[1].name: link "Google Cloud Logs" is declared twice`},
	} {
		f := writeFile(t, dir, "bad.yaml", c.yaml)
		if _, err := Load(Sources{Files: []string{f}}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want an error with %q", c.yaml, err, c.want)
		}
	}
}
