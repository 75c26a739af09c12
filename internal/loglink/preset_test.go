package loglink

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"fmgr.dev/gen/go/flyteidl2/core"
)

// podValues are an attempt's values as a Kubernetes executor fills them.
func podValues() Values {
	v := IdentityValues(att)
	v[Namespace], v[PodName], v[PodUID], v[ContainerName], v[ContainerID] = "flyte", "r1-a0-2", "uid-1", "task", "abc123"
	v[NodeName], v[Hostname] = "node-1", "r1-a0-2"
	v[PodRFC3339StartTime], v[PodUnixStartTime] = "2026-01-02T03:04:05Z", "1767323045"
	v[PodRFC3339FinishTime], v[PodUnixFinishTime] = "2026-01-02T03:05:05Z", "1767323105"
	return v
}

// Presets are listed in the test once for all: every kind, rendered for a
// real attempt, leaves nothing unrendered and parses as a URL.
var presets = []Link{
	{Kind: KindKubernetes, BaseURL: "http://localhost:30082/"},
	{Kind: KindCloudWatch, Region: "us-east-1", LogGroup: "/aws/containerinsights/prod/application"},
	{Kind: KindStackdriver, GCPProject: "my-project-1", ResourceName: "k8s_container"},
	{Kind: KindGrafanaLoki, BaseURL: "https://grafana.example.com", DataSource: "P8E80F9AEF21F6940"},
	{Name: "all", URL: "https://e.com/{{ .podName }}?from={{ .podRFC3339StartTime }}&to={{ .podRFC3339FinishTime }}&end={{ $podUnixFinishTime }}"},
}

func TestPresetsRenderCompletely(t *testing.T) {
	want := map[string]string{
		"Kubernetes Logs": "http://localhost:30082/#!/log/flyte/r1-a0-2/pod?namespace=flyte",
		"Cloudwatch Logs": "https://console.aws.amazon.com/cloudwatch/home?region=us-east-1#logEventViewer:group=/aws/containerinsights/prod/application;stream=var.log.containers.r1-a0-2_flyte_task-abc123.log",
		"Google Cloud Logs": "https://console.cloud.google.com/logs/viewer?project=my-project-1&angularJsUrl=%2Flogs%2Fviewer%3Fproject%3Dmy-project-1" +
			"&resource=k8s_container&advancedFilter=resource.labels.pod_name%3Dr1-a0-2",
		"all": "https://e.com/r1-a0-2?from=2026-01-02T03:04:05Z&to=2026-01-02T03:05:05Z&end=1767323105",
	}
	for _, l := range presets {
		ts, err := l.Templates(Kubernetes)
		if err != nil || len(ts) != 1 {
			t.Fatalf("%+v: %v, %d templates", l, err, len(ts))
		}
		tl := ts[0].TaskLog(podValues())
		if strings.Contains(tl.GetUri(), "{{") || strings.Contains(tl.GetUri(), "}}") {
			t.Errorf("%s: unrendered: %s", tl.GetName(), tl.GetUri())
		}
		u, err := url.Parse(tl.GetUri())
		if err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
			t.Errorf("%s: %q does not parse: %v", tl.GetName(), tl.GetUri(), err)
		}
		if w, ok := want[tl.GetName()]; ok && tl.GetUri() != w {
			t.Errorf("%s:\n got %s\nwant %s", tl.GetName(), tl.GetUri(), w)
		}
		if tl.GetName() == "Grafana Loki" {
			// Grafana reads its Explore state as JSON: the selector of the
			// Pod's container, from the Pod's start.
			var left struct {
				Datasource string
				Queries    []struct{ Expr string }
				Range      struct{ From, To string }
			}
			if err := json.Unmarshal([]byte(u.Query().Get("left")), &left); err != nil {
				t.Fatalf("loki: left=%q: %v", u.Query().Get("left"), err)
			}
			if left.Datasource != "P8E80F9AEF21F6940" || len(left.Queries) != 1 ||
				left.Queries[0].Expr != `{namespace="flyte", pod="r1-a0-2", container="task"}` ||
				left.Range.From != "1767323045000" || left.Range.To != "now" || u.Path != "/explore" {
				t.Errorf("loki: %+v from %s", left, tl.GetUri())
			}
		}
	}
}

// A template written for Flyte's log plugins works unchanged: its names,
// $-spelling and templateUris/displayName/messageFormat.
func TestFlyteTemplatesCarryOver(t *testing.T) {
	l := Link{DisplayName: "Flyte", MessageFormat: "json", TemplateURIs: []string{
		"https://logs.example.com/{{ .executionProject }}/{{ .executionDomain }}/{{ .executionName }}/{{ .nodeID }}/{{ .taskRetryAttempt }}?c={{ .containerId }}",
		"https://logs.example.com/h/{{ $hostname }}/{{.taskProject}}/{{ .taskDomain }}/{{ .executionOrg }}/{{ .taskOrg }}",
	}}
	ts, err := l.Templates(Kubernetes)
	if err != nil || len(ts) != 2 {
		t.Fatalf("%v, %d", err, len(ts))
	}
	a := ts[0].TaskLog(podValues())
	if a.GetName() != "Flyte" || a.GetMessageFormat() != core.TaskLog_JSON ||
		a.GetUri() != "https://logs.example.com/flytesnacks/development/r1/a0/1?c=abc123" {
		t.Errorf("first: %v", a)
	}
	b := ts[1].TaskLog(podValues())
	if b.GetName() != "Flyte (2)" || b.GetUri() != "https://logs.example.com/h/r1-a0-2/flytesnacks/development/local/local" {
		t.Errorf("second: %v", b)
	}
}

func TestLinkErrors(t *testing.T) {
	for _, c := range []struct {
		l    Link
		s    Scope
		want string
	}{
		{Link{Name: "x"}, Kubernetes, "url: must not be empty"},
		{Link{Name: "Logs {{ .podName }}", URL: "https://e.com/"}, Kubernetes, "must be plain text"},
		{Link{Name: "x", URL: "https://e.com/a", TemplateURIs: []string{"https://e.com/b"}}, Kubernetes, "give one"},
		{Link{Name: "x", DisplayName: "y", URL: "https://e.com/a"}, Kubernetes, "displayName"},
		{Link{Name: "x", URL: "https://e.com/a", Region: "us-east-1"}, Kubernetes, "region: is not a setting of kind template"},
		{Link{Name: "x", TemplateURIs: []string{"https://e.com/a", "https://e.com/{{ .nope }}"}}, Kubernetes, `templateUris[1]: url: unknown placeholder "{{ .nope }}"`},
		{Link{Name: "x", URL: "https://e.com/a", MessageFormat: "xml"}, Kubernetes, "messageFormat"},
		{Link{Kind: "splunk"}, Kubernetes, `kind: "splunk" is not one of template, kubernetes`},
		{Link{Kind: KindKubernetes}, Kubernetes, "baseURL"},
		{Link{Kind: KindKubernetes, BaseURL: "https://k.example.com/{{ .podName }}"}, Kubernetes, "baseURL"},
		{Link{Kind: KindKubernetes, BaseURL: "https://k.example.com", URL: "https://e.com"}, Kubernetes, "url: is not a setting of kind kubernetes"},
		{Link{Kind: KindCloudWatch, Region: "us east", LogGroup: "g"}, Kubernetes, "region:"},
		{Link{Kind: KindCloudWatch, Region: "eu-west-3", LogGroup: "a b"}, Kubernetes, "logGroup:"},
		{Link{Kind: KindStackdriver, GCPProject: "P", ResourceName: "k8s_container"}, Kubernetes, "gcpProject:"},
		{Link{Kind: KindStackdriver, GCPProject: "my-project", ResourceName: "a&b"}, Kubernetes, "resourceName:"},
		{Link{Kind: KindGrafanaLoki, BaseURL: "https://g.example.com", DataSource: "a\"b"}, Kubernetes, "dataSource:"},
		{Link{Kind: KindGrafanaLoki, BaseURL: "https://g.example.com", DataSource: "u", Selector: "pod=x"}, Kubernetes, "selector:"},
		{Link{Kind: KindGrafanaLoki, BaseURL: "https://g.example.com", DataSource: "u", Selector: `{pod="{{ .pod }}"}`}, Kubernetes, "unknown placeholder"},
		// Locally there is no Pod.
		{Link{Kind: KindCloudWatch, Region: "us-east-1", LogGroup: "g"}, Local, "kind: cloudwatch links a Pod's log; for local attempts"},
		{Link{Name: "x", URL: "https://e.com/{{ .podName }}"}, Local, `placeholder "{{ .podName }}" has no value for local attempts`},
		{Link{Kind: KindGrafanaLoki, BaseURL: "https://g.example.com", DataSource: "u"}, Local, "selector: must be given"},
	} {
		_, err := c.l.Templates(c.s)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v (%s): %v; want an error saying %q", c.l, c.s, err, c.want)
		}
	}
}

// Locally the identity, the host and the manager's address have values;
// a Loki selector on the run's labels renders completely.
func TestLocalLinks(t *testing.T) {
	v := IdentityValues(att)
	v[Hostname] = "build-1"
	for _, l := range []Link{
		{Name: "logs", URL: "{{ .managerURL }}/logs/{{ .org }}/{{ .project }}/{{ .domain }}/{{ .runName }}/{{ .actionName }}/{{ .attempt }}"},
		{Name: "host", URL: "https://logs.example.com/{{ .hostname }}/{{ .executionName }}/{{ .taskRetryAttempt }}"},
		{Kind: KindGrafanaLoki, BaseURL: "https://g.example.com", DataSource: "u", Selector: `{host="{{ .hostname }}", run="{{ .runName }}"}`},
	} {
		ts, err := l.Templates(Local)
		if err != nil {
			t.Fatalf("%+v: %v", l, err)
		}
		uri := ts[0].TaskLog(v).GetUri()
		if strings.Contains(uri, "{{") || strings.Contains(uri, "}}") {
			t.Errorf("unrendered: %s", uri)
		}
		if l.Name == "host" && uri != "https://logs.example.com/build-1/r1/1" {
			t.Errorf("host link %s", uri)
		}
	}
}
