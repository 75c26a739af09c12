package loglink

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/ident"
)

// Placeholders a log link template may use, as {{ .name }} or {{ $name }}
// (spaces optional, names case-insensitive). Pod placeholders are the names
// Flyte's log templates use, and Flyte's other names are accepted as
// aliases (Aliases), so an operator's existing URLs carry over.
const (
	// ManagerURL is the base URL the reading client used (or
	// server.externalURL); only at the start of a template.
	ManagerURL = "managerURL"

	Org        = "org" // "local" for the empty org, as in Path
	Project    = "project"
	Domain     = "domain"
	RunName    = "runName"
	ActionName = "actionName"
	AttemptNum = "attempt" // from 1
	// TaskRetryAttempt counts from 0, as Flyte's log templates do.
	TaskRetryAttempt = "taskRetryAttempt"
	// TaskID and TaskVersion are the task's name and version, as in
	// Flyte's log templates.
	TaskID      = "taskID"
	TaskVersion = "taskVersion"
	// Hostname is the host the attempt runs on: the Pod's host name on
	// Kubernetes, the manager's host locally.
	Hostname = "hostname"

	Namespace           = "namespace"
	PodName             = "podName"
	PodUID              = "podUID"
	ContainerName       = "containerName"
	ContainerID         = "containerID"
	NodeName            = "nodeName"
	PodRFC3339StartTime = "podRFC3339StartTime"
	PodUnixStartTime    = "podUnixStartTime"
	// The finish times are rendered once the Pod's task container ended;
	// the links an attempt reports while it runs have them empty.
	PodRFC3339FinishTime = "podRFC3339FinishTime"
	PodUnixFinishTime    = "podUnixFinishTime"
)

// Placeholders lists every placeholder, for messages and documentation.
var Placeholders = []string{ManagerURL, Org, Project, Domain, RunName, ActionName, AttemptNum, TaskRetryAttempt, TaskID, TaskVersion, Hostname,
	Namespace, PodName, PodUID, ContainerName, ContainerID, NodeName, PodRFC3339StartTime, PodUnixStartTime,
	PodRFC3339FinishTime, PodUnixFinishTime}

// Aliases are Flyte's names for placeholders, each standing for ours.
var Aliases = map[string]string{
	"executionName":    RunName,
	"executionProject": Project,
	"executionDomain":  Domain,
	"executionOrg":     Org,
	"taskOrg":          Org,
	"taskProject":      Project,
	"taskDomain":       Domain,
	"nodeID":           ActionName,
}

// Scope is where an attempt runs, which decides the placeholders that have
// a value.
type Scope int

const (
	// Kubernetes attempts run in Pods: every placeholder.
	Kubernetes Scope = iota
	// Local attempts run as processes of the manager's host: no Pod
	// placeholders.
	Local
)

func (s Scope) has(p string) bool {
	if s == Kubernetes {
		return true
	}
	switch p {
	case ManagerURL, Org, Project, Domain, RunName, ActionName, AttemptNum, TaskRetryAttempt, TaskID, TaskVersion, Hostname:
		return true
	}
	return false
}

// String names the scope as its executor type.
func (s Scope) String() string {
	if s == Local {
		return "local"
	}
	return "kubernetes"
}

// Values are what placeholders stand for, by name as in Placeholders.
type Values map[string]string

// IdentityValues are the placeholders a fills in.
func IdentityValues(a Attempt) Values {
	org := a.Org
	if org == "" {
		org = ident.LocalOrg
	}
	return Values{Org: org, Project: a.Project, Domain: a.Domain, RunName: a.Run, ActionName: a.Action,
		AttemptNum: fmt.Sprint(a.Number), TaskRetryAttempt: fmt.Sprint(max(a.Number-1, 0))}
}

// Template is one configured log link: a name and a URL template.
type Template struct {
	Name string
	// Format is how the linked log's lines are written, as Flyte's
	// messageFormat (unknown when not said).
	Format core.TaskLog_MessageFormat
	// parts alternate literal text (even indexes) and placeholder names
	// (odd indexes).
	parts []string
	// onManager: the template starts with {{ .managerURL }}; it renders to a
	// rooted path that Resolve completes per client.
	onManager bool
}

var (
	token       = regexp.MustCompile(`\{\{(.*?)\}\}`)
	placeholder = regexp.MustCompile(`^\s*[.$]([A-Za-z][A-Za-z0-9]*)\s*$`)
)

// Parse checks a template for Kubernetes attempts (see Scope.Parse).
func Parse(name, raw string) (Template, error) { return Kubernetes.Parse(name, raw) }

// Parse checks a template: a name, and a URL that is either absolute
// http(s) or starts with {{ .managerURL }}/..., using only placeholders
// known in s. Errors say what to change.
func (s Scope) Parse(name, raw string) (Template, error) {
	t := Template{Name: strings.TrimSpace(name)}
	if t.Name == "" {
		return Template{}, errors.New("name: must not be empty (it labels the link)")
	}
	if strings.Contains(t.Name, "{{") || strings.Contains(t.Name, "}}") {
		return Template{}, fmt.Errorf("name: %q must be plain text (placeholders are rendered in the url only)", t.Name)
	}
	rest := raw
	for {
		loc := token.FindStringSubmatchIndex(rest)
		if loc == nil {
			break
		}
		lit, inner := rest[:loc[0]], rest[loc[2]:loc[3]]
		m := placeholder.FindStringSubmatch(inner)
		key := ""
		if m != nil {
			key = canonical(m[1])
		}
		if key == "" {
			return Template{}, fmt.Errorf("url: unknown placeholder %q; known are %s", rest[loc[0]:loc[1]], s.known())
		}
		if !s.has(key) {
			return Template{}, fmt.Errorf("url: placeholder %q has no value for %s attempts; known are %s", rest[loc[0]:loc[1]], s, s.known())
		}
		t.parts = append(t.parts, lit, key)
		rest = rest[loc[1]:]
	}
	t.parts = append(t.parts, rest)
	for i := 0; i < len(t.parts); i += 2 {
		if strings.Contains(t.parts[i], "{{") || strings.Contains(t.parts[i], "}}") {
			return Template{}, fmt.Errorf("url: %q has an unclosed or stray {{ }}; placeholders look like {{ .podName }}", raw)
		}
	}
	for i := 1; i < len(t.parts); i += 2 {
		if t.parts[i] == ManagerURL && (i != 1 || t.parts[0] != "") {
			return Template{}, errors.New("url: {{ .managerURL }} may only begin the URL")
		}
	}
	t.onManager = len(t.parts) > 1 && t.parts[1] == ManagerURL
	sample := t.render(sampleValues())
	if t.onManager {
		if !strings.HasPrefix(sample, "/") || strings.HasPrefix(sample, "//") {
			return Template{}, errors.New("url: {{ .managerURL }} must be followed by a path starting with /")
		}
		if _, err := url.Parse(sample); err != nil {
			return Template{}, fmt.Errorf("url: %q is not a URL path: %v", raw, err)
		}
		return t, nil
	}
	u, err := url.Parse(sample)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Template{}, fmt.Errorf("url: %q must be an absolute http:// or https:// URL, or start with {{ .managerURL }}/", raw)
	}
	return t, nil
}

// TaskLog is the link t renders with v, as an attempt reports it.
func (t Template) TaskLog(v Values) *core.TaskLog {
	name, uri := t.Render(v)
	return &core.TaskLog{Name: name, Uri: uri, MessageFormat: t.Format}
}

// Render fills the template in with v (missing values are empty, each
// value escaped as one path segment): an absolute URL, or for a template on
// the manager a rooted path for Resolve.
func (t Template) Render(v Values) (name, uri string) {
	return t.Name, t.render(v)
}

func (t Template) render(v Values) string {
	var b strings.Builder
	for i, p := range t.parts {
		switch {
		case i%2 == 0:
			b.WriteString(p)
		case p == ManagerURL:
			// The client's base URL comes in front of the rooted rest.
		default:
			b.WriteString(url.PathEscape(v[p]))
		}
	}
	return b.String()
}

// canonical is the placeholder named s (any case, or one of its Aliases),
// "" when there is none.
func canonical(s string) string {
	for _, p := range Placeholders {
		if strings.EqualFold(p, s) {
			return p
		}
	}
	for a, p := range Aliases {
		if strings.EqualFold(a, s) {
			return p
		}
	}
	return ""
}

func (s Scope) known() string {
	var names []string
	for _, p := range Placeholders {
		if s.has(p) {
			names = append(names, "{{ ."+p+" }}")
		}
	}
	return strings.Join(names, ", ")
}

// sampleValues fill every placeholder with a typical value, to check what
// a template renders to.
func sampleValues() Values {
	v := Values{}
	for _, p := range Placeholders {
		v[p] = "x"
	}
	return v
}
