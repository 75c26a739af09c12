package loglink

import (
	"net/http"
	"strings"
	"testing"
)

var att = Attempt{Project: "flytesnacks", Domain: "development", Run: "r1", Action: "a0", Number: 2}

func TestPathRoundTripsThroughThePattern(t *testing.T) {
	for _, a := range []Attempt{att, {Org: "acme", Project: "p", Domain: "d", Run: "r", Action: "n-1", Number: 7}} {
		mux := http.NewServeMux()
		var got Attempt
		var err error
		mux.HandleFunc(Pattern, func(_ http.ResponseWriter, r *http.Request) { got, err = FromPath(r.PathValue) })
		req, _ := http.NewRequest(http.MethodGet, "http://h"+Path(a), nil)
		if _, pat := mux.Handler(req); pat != Pattern {
			t.Fatalf("%s does not match %s", Path(a), Pattern)
		}
		mux.ServeHTTP(nil, req)
		if err != nil || got != a {
			t.Errorf("%s read back as %+v, %v; want %+v", Path(a), got, err, a)
		}
	}
	if Path(att) != "/logs/local/flytesnacks/development/r1/a0/2" {
		t.Errorf("the empty org: %s", Path(att))
	}
	for _, n := range []string{"0", "-1", "x", "99999999999"} {
		if _, err := FromPath(func(k string) string {
			if k == "attempt" {
				return n
			}
			return "x"
		}); err == nil {
			t.Errorf("attempt %q accepted", n)
		}
	}
}

func TestResolve(t *testing.T) {
	for _, c := range []struct{ base, name, uri, wantName, wantURI string }{
		// Rooted paths are on the manager, at the client's base URL.
		{"http://localhost:8090", "logs", "/logs/local/p/d/r/a0/1", "logs", "http://localhost:8090/logs/local/p/d/r/a0/1"},
		{"https://flyte.example.com/prefix/", "logs", "/logs/x", "logs", "https://flyte.example.com/prefix/logs/x"},
		// Outside a request they stay rooted.
		{"", "logs", "/logs/x", "logs", "/logs/x"},
		// Stored before links had addresses: the attempt's log endpoint.
		{"http://h:1", "logs", "", "logs", "http://h:1" + Path(att)},
		{"http://h:1", "", "", DefaultName, "http://h:1" + Path(att)},
		// Someone else's URLs are theirs.
		{"http://h:1", "grafana", "https://grafana.example.com/x?y=1", "grafana", "https://grafana.example.com/x?y=1"},
		{"http://h:1", "odd", "//other/x", "odd", "//other/x"},
	} {
		name, uri := Resolve(c.base, att, c.name, c.uri)
		if name != c.wantName || uri != c.wantURI {
			t.Errorf("Resolve(%q, %q, %q) = %q, %q; want %q, %q", c.base, c.name, c.uri, name, uri, c.wantName, c.wantURI)
		}
	}
}

func TestTemplates(t *testing.T) {
	v := IdentityValues(att)
	v[Namespace], v[PodName], v[PodUID], v[ContainerName] = "flyte", "r1-a0-2", "uid-1", "task"
	v[PodRFC3339StartTime] = "2026-01-02T03:04:05Z"
	for _, c := range []struct{ url, want string }{
		{"{{ .managerURL }}/logs/{{ .org }}/{{ .project }}/{{ .domain }}/{{ .runName }}/{{ .actionName }}/{{ .attempt }}", Path(att)},
		{"https://dash.example.com/#/log/{{.namespace}}/{{ .podName }}/pod?container={{ .containerName }}&uid={{ .PODUID }}",
			"https://dash.example.com/#/log/flyte/r1-a0-2/pod?container=task&uid=uid-1"},
		// A value is one path segment: it cannot change the URL's shape.
		{"https://logs.example.com/q?from={{ .podRFC3339StartTime }}", "https://logs.example.com/q?from=2026-01-02T03:04:05Z"},
		{"http://logs.example.com/plain", "http://logs.example.com/plain"},
	} {
		tmpl, err := Parse("link", c.url)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.url, err)
		}
		if name, got := tmpl.Render(v); name != "link" || got != c.want {
			t.Errorf("Render(%q) = %q, %q; want %q", c.url, name, got, c.want)
		}
	}
	tmpl, _ := Parse("x", "https://e.com/{{ .podName }}")
	if _, got := tmpl.Render(Values{PodName: "a/b?c#d"}); got != "https://e.com/a%2Fb%3Fc%23d" {
		t.Errorf("a value with URL syntax rendered as %q", got)
	}

	for _, c := range []struct{ name, url, want string }{
		{"", "https://e.com/", "name: must not be empty"},
		{"x", "https://e.com/{{ .podname2 }}", `unknown placeholder "{{ .podname2 }}"`},
		{"x", "https://e.com/{{ podName }}", "unknown placeholder"},
		{"x", "https://e.com/{{ .podName }", "unclosed or stray"},
		{"x", "https://e.com/{{ .podName }}}}", "unclosed or stray"},
		{"x", "https://e.com/{{ .managerURL }}/x", "may only begin the URL"},
		{"x", "{{ .managerURL }}logs", "followed by a path starting with /"},
		{"x", "{{ .managerURL }}//other.example.com/x", "followed by a path starting with /"},
		{"x", "logs.example.com/{{ .podName }}", "absolute http:// or https://"},
		{"x", "/logs/{{ .podName }}", "absolute http:// or https://"},
		{"x", "ftp://e.com/{{ .podName }}", "absolute http:// or https://"},
	} {
		_, err := Parse(c.name, c.url)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q, %q) = %v; want an error saying %q", c.name, c.url, err, c.want)
		}
	}
	_, err := Parse("x", "https://e.com/{{ .nope }}")
	if err == nil || !strings.Contains(err.Error(), "{{ .podName }}") {
		t.Errorf("the error does not list the known placeholders: %v", err)
	}
}
