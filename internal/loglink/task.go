package loglink

import (
	"net/url"
	"strings"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
)

// ForAttempt is every link attempt a of spec reports: the configured
// templates ts rendered with v and the task's name and version (the
// manager's log endpoint of a when there are none), then the task's own
// links (TaskMetadata.log_links, which the SDK writes with placeholders
// such as {{.podName}} for the executor to fill in) rendered alike. A
// task's link named as one before it is left out.
func ForAttempt(a Attempt, ts []Template, spec *task.TaskSpec, v Values) []*core.TaskLog {
	tmpl := spec.GetTaskTemplate()
	v[TaskID], v[TaskVersion] = tmpl.GetId().GetName(), tmpl.GetId().GetVersion()
	out := make([]*core.TaskLog, 0, len(ts)+len(tmpl.GetMetadata().GetLogLinks())+1)
	for _, t := range ts {
		out = append(out, t.TaskLog(v))
	}
	if len(out) == 0 {
		out = append(out, &core.TaskLog{Name: DefaultName, Uri: Path(a)})
	}
	seen := map[string]bool{}
	for _, l := range out {
		seen[l.GetName()] = true
	}
	for _, l := range tmpl.GetMetadata().GetLogLinks() {
		r := renderTaskLink(l, v)
		if r == nil || seen[r.GetName()] {
			continue
		}
		seen[r.GetName()] = true
		out = append(out, r)
	}
	return out
}

// renderTaskLink fills in a task's link: each known placeholder (any
// spelling Parse accepts) becomes its value, escaped as a path segment,
// and any other {{ }} is removed, so nothing unrendered reaches a client.
// A link that is then not an http(s) URL or a rooted path is left out
// (nil), as is one without a name.
func renderTaskLink(l *core.TaskLog, v Values) *core.TaskLog {
	name := strings.TrimSpace(renderLoose(l.GetName(), v, false))
	uri := renderLoose(l.GetUri(), v, true)
	if name == "" || !linkable(uri) {
		return nil
	}
	out := proto.CloneOf(l)
	out.Name, out.Uri = name, uri
	return out
}

func renderLoose(raw string, v Values, escape bool) string {
	s := token.ReplaceAllStringFunc(raw, func(tok string) string {
		m := placeholder.FindStringSubmatch(token.FindStringSubmatch(tok)[1])
		if m == nil {
			return ""
		}
		key := canonical(m[1])
		if key == "" || key == ManagerURL {
			return ""
		}
		if escape {
			return url.PathEscape(v[key])
		}
		return v[key]
	})
	// A stray brace pair left by malformed input is removed too.
	return strings.NewReplacer("{{", "", "}}", "").Replace(s)
}

// linkable: an absolute http(s) URL, or a path on the manager.
func linkable(uri string) bool {
	if strings.HasPrefix(uri, "/") && !strings.HasPrefix(uri, "//") {
		return true
	}
	u, err := url.Parse(uri)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
