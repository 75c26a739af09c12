package loglink

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"fmgr.dev/gen/go/flyteidl2/core"
)

// Kinds of configured links: a template written out, or a preset that
// expands to the template for a well-known log system.
const (
	KindTemplate    = "template"
	KindKubernetes  = "kubernetes"   // the Kubernetes dashboard's Pod log view
	KindCloudWatch  = "cloudwatch"   // CloudWatch Logs, streams as Fluent Bit/fluentd name them
	KindStackdriver = "stackdriver"  // Google Cloud Logging, filtered to the Pod
	KindGrafanaLoki = "grafana-loki" // Grafana's Explore on a Loki data source
)

// Kinds lists every kind, for messages and documentation.
var Kinds = []string{KindTemplate, KindKubernetes, KindCloudWatch, KindStackdriver, KindGrafanaLoki}

// Link is one configured log link (an entry of executor.<type>.logLinks).
// A template names its URL (url, or Flyte's templateUris: one link each);
// a preset kind takes its few settings and makes the URL.
type Link struct {
	// Name labels the link; a preset has a default. DisplayName is Flyte's
	// spelling of it.
	Name        string `mapstructure:"name" yaml:"name,omitempty"`
	DisplayName string `mapstructure:"displayName" yaml:"displayName,omitempty"`
	// Kind is one of Kinds; "" is template.
	Kind string `mapstructure:"kind" yaml:"kind,omitempty"`
	// URL is a template's URL; TemplateURIs are Flyte's, one link each.
	URL          string   `mapstructure:"url" yaml:"url,omitempty"`
	TemplateURIs []string `mapstructure:"templateUris" yaml:"templateUris,omitempty"`
	// MessageFormat is how the linked log's lines are written: json, csv
	// or unknown (the default).
	MessageFormat string `mapstructure:"messageFormat" yaml:"messageFormat,omitempty"`

	// BaseURL: kubernetes, the dashboard's; grafana-loki, Grafana's.
	BaseURL string `mapstructure:"baseURL" yaml:"baseURL,omitempty"`
	// Region and LogGroup: cloudwatch.
	Region   string `mapstructure:"region" yaml:"region,omitempty"`
	LogGroup string `mapstructure:"logGroup" yaml:"logGroup,omitempty"`
	// GCPProject and ResourceName (the monitored resource type, e.g.
	// k8s_container): stackdriver.
	GCPProject   string `mapstructure:"gcpProject" yaml:"gcpProject,omitempty"`
	ResourceName string `mapstructure:"resourceName" yaml:"resourceName,omitempty"`
	// DataSource is the Loki data source's uid and Selector the LogQL
	// stream selector (placeholders allowed): grafana-loki.
	DataSource string `mapstructure:"dataSource" yaml:"dataSource,omitempty"`
	Selector   string `mapstructure:"selector" yaml:"selector,omitempty"`
}

// DefaultLokiSelector selects a Pod's task container in Loki, by the
// labels Promtail and Grafana Alloy give Kubernetes logs.
const DefaultLokiSelector = `{namespace="{{ .namespace }}", pod="{{ .podName }}", container="{{ .containerName }}"}`

var (
	awsRegion   = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
	awsLogGroup = regexp.MustCompile(`^[A-Za-z0-9._/#-]{1,512}$`)
	gcpProject  = regexp.MustCompile(`^[a-z][a-z0-9-]{4,28}[a-z0-9]$`)
	gcpResource = regexp.MustCompile(`^[a-z0-9_]{1,100}$`)
	grafanaUID  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,40}$`)
)

// Templates checks l for attempts of s and makes its templates: one, or
// one per templateUris entry (the second named "<name> (2)", ...).
// Errors name the setting to change.
func (l Link) Templates(s Scope) ([]Template, error) {
	name := l.Name
	if name == "" {
		name = l.DisplayName
	} else if l.DisplayName != "" && l.DisplayName != l.Name {
		return nil, errors.New("displayName: is another spelling of name: give one")
	}
	format, err := messageFormat(l.MessageFormat)
	if err != nil {
		return nil, err
	}
	kind := strings.ToLower(strings.TrimSpace(l.Kind))
	if kind == "" {
		kind = KindTemplate
	}
	var urls []string
	if kind == KindTemplate {
		if err := l.only("url", "templateUris"); err != nil {
			return nil, err
		}
		switch {
		case l.URL != "" && len(l.TemplateURIs) > 0:
			return nil, errors.New("url and templateUris: give one")
		case l.URL != "":
			urls = []string{l.URL}
		case len(l.TemplateURIs) > 0:
			urls = l.TemplateURIs
		default:
			return nil, errors.New("url: must not be empty")
		}
	} else {
		if name == "" {
			name = presetNames[kind]
		}
		u, err := l.preset(kind, s)
		if err != nil {
			return nil, err
		}
		urls = []string{u}
	}
	out := make([]Template, 0, len(urls))
	for i, raw := range urls {
		n := name
		if i > 0 {
			n = fmt.Sprintf("%s (%d)", name, i+1)
		}
		t, err := s.Parse(n, raw)
		if err != nil {
			if len(urls) > 1 {
				return nil, fmt.Errorf("templateUris[%d]: %w", i, err)
			}
			return nil, err
		}
		t.Format = format
		out = append(out, t)
	}
	return out, nil
}

var presetNames = map[string]string{
	KindKubernetes:  "Kubernetes Logs",
	KindCloudWatch:  "Cloudwatch Logs",
	KindStackdriver: "Google Cloud Logs",
	KindGrafanaLoki: "Grafana Loki",
}

// preset is the URL template kind makes of l's settings.
func (l Link) preset(kind string, s Scope) (string, error) {
	if kind != KindGrafanaLoki && s != Kubernetes {
		if _, ok := presetNames[kind]; ok {
			return "", fmt.Errorf("kind: %s links a Pod's log; for %s attempts use %s or %s", kind, s, KindTemplate, KindGrafanaLoki)
		}
	}
	switch kind {
	case KindKubernetes:
		if err := l.only("baseURL"); err != nil {
			return "", err
		}
		base, err := baseURL(l.BaseURL)
		if err != nil {
			return "", err
		}
		return base + "/#!/log/{{ .namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}", nil
	case KindCloudWatch:
		if err := l.only("region", "logGroup"); err != nil {
			return "", err
		}
		if !awsRegion.MatchString(l.Region) {
			return "", fmt.Errorf("region: %q is not an AWS region such as us-east-1", l.Region)
		}
		if !awsLogGroup.MatchString(l.LogGroup) {
			return "", fmt.Errorf("logGroup: %q is not a CloudWatch log group name", l.LogGroup)
		}
		return "https://console.aws.amazon.com/cloudwatch/home?region=" + l.Region +
			"#logEventViewer:group=" + l.LogGroup +
			";stream=var.log.containers.{{ .podName }}_{{ .namespace }}_{{ .containerName }}-{{ .containerID }}.log", nil
	case KindStackdriver:
		if err := l.only("gcpProject", "resourceName"); err != nil {
			return "", err
		}
		if !gcpProject.MatchString(l.GCPProject) {
			return "", fmt.Errorf("gcpProject: %q is not a Google Cloud project id", l.GCPProject)
		}
		if !gcpResource.MatchString(l.ResourceName) {
			return "", fmt.Errorf("resourceName: %q is not a monitored resource type such as k8s_container", l.ResourceName)
		}
		return "https://console.cloud.google.com/logs/viewer?project=" + l.GCPProject +
			"&angularJsUrl=" + url.QueryEscape("/logs/viewer?project="+l.GCPProject) +
			"&resource=" + l.ResourceName +
			"&advancedFilter=" + url.QueryEscape("resource.labels.pod_name=") + "{{ .podName }}", nil
	case KindGrafanaLoki:
		if err := l.only("baseURL", "dataSource", "selector"); err != nil {
			return "", err
		}
		base, err := baseURL(l.BaseURL)
		if err != nil {
			return "", err
		}
		if !grafanaUID.MatchString(l.DataSource) {
			return "", fmt.Errorf("dataSource: %q is not a Grafana data source uid", l.DataSource)
		}
		sel := l.Selector
		if sel == "" {
			if s != Kubernetes {
				return "", fmt.Errorf("selector: must be given for %s attempts, e.g. {job=\"flyte\", run=\"{{ .runName }}\"}", s)
			}
			sel = DefaultLokiSelector
		}
		sel = strings.TrimSpace(sel)
		if !strings.HasPrefix(sel, "{") || strings.HasPrefix(sel, "{{") || !strings.HasSuffix(sel, "}") {
			return "", fmt.Errorf("selector: %q is not a LogQL stream selector such as {namespace=\"x\"}", l.Selector)
		}
		from := "now-6h"
		if s == Kubernetes {
			from = "{{ .podUnixStartTime }}000"
		}
		return base + "/explore?orgId=1&left=" +
			url.QueryEscape(`{"datasource":"`+l.DataSource+`","queries":[{"refId":"A","expr":"`) +
			escapeSelector(sel) +
			url.QueryEscape(`"}],"range":{"from":"`) + from + url.QueryEscape(`","to":"now"}}`), nil
	}
	return "", fmt.Errorf("kind: %q is not one of %s", l.Kind, strings.Join(Kinds, ", "))
}

// escapeSelector writes a LogQL selector as the expr string of Grafana's
// JSON, query-escaped, keeping its placeholders (their values are escaped
// when rendered).
func escapeSelector(sel string) string {
	var b strings.Builder
	lit := func(s string) {
		q, _ := json.Marshal(s)
		b.WriteString(url.QueryEscape(string(q[1 : len(q)-1])))
	}
	rest := sel
	for {
		loc := token.FindStringIndex(rest)
		if loc == nil {
			break
		}
		lit(rest[:loc[0]])
		b.WriteString(rest[loc[0]:loc[1]])
		rest = rest[loc[1]:]
	}
	lit(rest)
	return b.String()
}

// only fails when l sets a setting its kind does not read (all but
// those named, name, displayName, kind and messageFormat).
func (l Link) only(allowed ...string) error {
	for _, f := range []struct {
		key string
		set bool
	}{
		{"url", l.URL != ""}, {"templateUris", len(l.TemplateURIs) > 0}, {"baseURL", l.BaseURL != ""},
		{"region", l.Region != ""}, {"logGroup", l.LogGroup != ""}, {"gcpProject", l.GCPProject != ""},
		{"resourceName", l.ResourceName != ""}, {"dataSource", l.DataSource != ""}, {"selector", l.Selector != ""},
	} {
		if f.set && !contains(allowed, f.key) {
			kind := l.Kind
			if kind == "" {
				kind = KindTemplate
			}
			return fmt.Errorf("%s: is not a setting of kind %s (it reads %s)", f.key, kind, strings.Join(allowed, ", "))
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// baseURL checks a preset's base URL: absolute http(s), no placeholders,
// no query or fragment; returned without a trailing slash.
func baseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" ||
		strings.Contains(raw, "{{") || strings.Contains(raw, "}}") {
		return "", fmt.Errorf("baseURL: %q must be an absolute http:// or https:// URL without a query", raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

// messageFormat reads Flyte's messageFormat setting.
func messageFormat(s string) (core.TaskLog_MessageFormat, error) {
	if s == "" {
		return core.TaskLog_UNKNOWN, nil
	}
	if v, ok := core.TaskLog_MessageFormat_value[strings.ToUpper(s)]; ok {
		return core.TaskLog_MessageFormat(v), nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if _, ok := core.TaskLog_MessageFormat_name[int32(n)]; ok {
			return core.TaskLog_MessageFormat(n), nil
		}
	}
	return 0, fmt.Errorf("messageFormat: %q is not one of json, csv, unknown", s)
}
