package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
	"fmgr.dev/internal/mgrproc"
)

// kubeLogLink names the log link TestSDKKubernetes configures besides the
// default: a stand-in for a log system's URL, rendered per Pod, served by
// the test from the node agent's log files (logServer).
const kubeLogLink = "node"

// kubePresetLinks are the links of the preset kinds every kubernetes
// manager of the tests also reports (kubeLogLinksConfig), and the Flyte
// shaped template using the Pod's finish time; localLinks are the links
// every local manager reports besides "logs" (localLogLinksConfig). None
// is opened: they are checked to be complete URLs.
var (
	kubePresetLinks = []string{"Kubernetes Logs", "Cloudwatch Logs", "Google Cloud Logs", "Grafana Loki", "Flyte"}
	localLinks      = []string{"host", "Grafana Loki"}
)

// logLinkNames are the log links every attempt reports on m, in order.
func logLinkNames(m *manager) []string {
	if m.Kubernetes {
		return append([]string{"logs", kubeLogLink}, kubePresetLinks...)
	}
	return append([]string{"logs"}, localLinks...)
}

type logLink struct{ Name, URI string }

// Every log link an attempt reports has a name and an absolute URL on the
// address the client used, and opening it answers that attempt's own log:
// a task that prints a line per attempt and fails once, read through the
// SDK's Action.details(), each link fetched with plain HTTP.
func testLogLinks(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 8*time.Minute)
	marker := fmt.Sprintf("m%d", time.Now().UnixNano())
	var res struct {
		Run, Phase string
		Attempts   []struct {
			Attempt       int
			LogsAvailable bool `json:"logs_available"`
			Links         []logLink
		}
		LinkedRun   string `json:"linked_run"`
		LinkedPhase string `json:"linked_phase"`
		ChildLinks  []struct {
			Name, URI, Action string
		} `json:"child_links"`
	}
	driver(t, ctx, &res, "drive_loglinks.py", sdkEndpoint(m), marker)
	if res.Phase != "SUCCEEDED" || len(res.Attempts) != 2 {
		t.Fatalf("run %s is %s with %d attempts, want SUCCEEDED on attempt 2", res.Run, res.Phase, len(res.Attempts))
	}
	sdkBase := "http://" + sdkEndpoint(m)
	for i, at := range res.Attempts {
		n := i + 1
		if at.Attempt != n || !at.LogsAvailable {
			t.Errorf("attempt %d: number %d, logs available %v", n, at.Attempt, at.LogsAvailable)
		}
		var names []string
		for _, l := range at.Links {
			names = append(names, l.Name)
		}
		if !slices.Equal(names, logLinkNames(m)) {
			t.Errorf("attempt %d: log links %v, want %v", n, names, logLinkNames(m))
		}
		for _, l := range at.Links {
			if !checkLinkURL(t, n, l) {
				continue
			}
			if l.Name == "logs" || l.Name == kubeLogLink {
				checkLogLink(t, m, res.Run, n, l, marker)
			}
			checkPresetLink(t, m, res.Run, n, l)
			if l.Name == "logs" {
				// On the manager: at the address the SDK used.
				if want := fmt.Sprintf("%s/logs/local/%s/%s/%s/a0/%d", sdkBase, testProject, testDomain, res.Run, n); l.URI != want {
					t.Errorf("attempt %d: link %q, want %q", n, l.URI, want)
				}
			}
		}
	}

	// A task's own links (links=) come after the configured ones, their
	// placeholders filled in: the action, and its Pod on kubernetes.
	if res.LinkedPhase != "SUCCEEDED" || len(res.ChildLinks) == 0 {
		t.Fatalf("linked run %s is %s, child links %v", res.LinkedRun, res.LinkedPhase, res.ChildLinks)
	}
	last := res.ChildLinks[len(res.ChildLinks)-1]
	pod := ""
	if m.Kubernetes {
		pod = ".+"
	}
	wantLink := regexp.MustCompile("^" + regexp.QuoteMeta(fmt.Sprintf("https://links.example.com/%s/%s/%s/%s?pod=", testProject, testDomain, res.LinkedRun, last.Action)) +
		pod + regexp.QuoteMeta("&parent=a0") + "$")
	if len(res.ChildLinks) != len(logLinkNames(m))+1 || last.Name != "run link" || !wantLink.MatchString(last.URI) {
		t.Errorf("the child's links %+v; want %v then %q matching %s", res.ChildLinks, logLinkNames(m), "run link", wantLink)
	}
	for _, l := range res.ChildLinks {
		checkLinkURL(t, 1, logLink{l.Name, l.URI})
	}

	// A client that reached the manager by another address gets links on
	// that address.
	runs := workflowconnect.NewRunServiceClient(rpcClient, m.URL)
	d, err := runs.GetActionDetails(ctx, connect.NewRequest(&workflow.GetActionDetailsRequest{ActionId: &common.ActionIdentifier{
		Run: &common.RunIdentifier{Project: testProject, Domain: testDomain, Name: res.Run}, Name: "a0"}}))
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range d.Msg.GetDetails().GetAttempts() {
		for _, l := range at.GetLogInfo() {
			if l.GetName() == "logs" && !strings.HasPrefix(l.GetUri(), m.URL+"/logs/") {
				t.Errorf("attempt %d read at %s: link %q", at.GetAttempt(), m.URL, l.GetUri())
			}
		}
	}

	// What cannot be served says why, with TailLogs' code as the status.
	for path, want := range map[string]int{
		fmt.Sprintf("/logs/local/%s/%s/%s/a0/9", testProject, testDomain, res.Run):    http.StatusNotFound,
		fmt.Sprintf("/logs/local/%s/%s/nosuchrun/a0/1", testProject, testDomain):      http.StatusNotFound,
		fmt.Sprintf("/logs/local/%s/%s/%s/a0/0", testProject, testDomain, res.Run):    http.StatusBadRequest,
		fmt.Sprintf("/logs/local/%s/%s/%s/a%%21/1", testProject, testDomain, res.Run): http.StatusBadRequest,
	} {
		resp, err := mgrproc.HTTPClient.Get(m.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || len(strings.TrimSpace(string(body))) == 0 {
			t.Errorf("GET %s: %d %q, want %d with a reason", path, resp.StatusCode, body, want)
		}
	}

	// The log endpoint is behind the host guard, as every route.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/logs/local/%s/%s/%s/a0/1", m.URL, testProject, testDomain, res.Run), nil)
	req.Host = "rebound.example.com"
	if resp, err := mgrproc.HTTPClient.Do(req); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusForbidden {
		t.Errorf("the log endpoint answered Host %s with %d, want 403", req.Host, resp.StatusCode)
	}
}

// checkLinkURL checks that link l of attempt n is named and rendered
// completely: an absolute http(s) URL with no {{ or }} left.
func checkLinkURL(t *testing.T, n int, l logLink) bool {
	t.Helper()
	u, err := url.Parse(l.URI)
	if l.Name == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		strings.Contains(l.URI, "{{") || strings.Contains(l.URI, "}}") {
		t.Errorf("attempt %d: link %q → %q is not a named absolute http(s) URL", n, l.Name, l.URI)
		return false
	}
	return true
}

// checkPresetLink checks what the configured links not opened say about
// attempt n of run: its identity, and on kubernetes its Pod's times, the
// finish time too (the attempts ended).
func checkPresetLink(t *testing.T, m *manager, run string, n int, l logLink) {
	t.Helper()
	host, _ := os.Hostname()
	var want *regexp.Regexp
	switch {
	case !m.Kubernetes && l.Name == "host":
		want = regexp.MustCompile("^" + regexp.QuoteMeta(fmt.Sprintf("https://logs.example.com/%s/%s/%s/%s/a0/%d", url.PathEscape(host), testProject, testDomain, run, n-1)) + "$")
	case !m.Kubernetes && l.Name == "Grafana Loki":
		want = regexp.MustCompile(regexp.QuoteMeta(url.QueryEscape(fmt.Sprintf(`{run=\"%s\", action=\"a0\"}`, run))))
	case m.Kubernetes && l.Name == "Flyte":
		want = regexp.MustCompile(fmt.Sprintf(`^https://logs\.example\.com/%s/a0/%d/\?start=\d{4}-\d\d-\d\dT[^&]+Z&end=(\d+)$`, run, n-1))
		if g := want.FindStringSubmatch(l.URI); g == nil || g[1] == "0" {
			t.Errorf("attempt %d: %s %q has no finish time", n, l.Name, l.URI)
		}
	case m.Kubernetes && l.Name == "Cloudwatch Logs":
		want = regexp.MustCompile(`;stream=var\.log\.containers\.[a-z0-9-]+_[a-z0-9-]+_task-[0-9a-f]+\.log$`)
	}
	if want != nil && !want.MatchString(l.URI) {
		t.Errorf("attempt %d: %s is %q, want it to match %s", n, l.Name, l.URI, want)
	}
}

// checkLogLink opens one link of attempt n of run and checks it answers
// that attempt's log (and not the other attempt's).
func checkLogLink(t *testing.T, m *manager, run string, n int, l logLink, marker string) {
	t.Helper()
	resp, err := mgrproc.HTTPClient.Get(l.URI)
	if err != nil {
		t.Errorf("attempt %d: GET %s: %v", n, l.URI, err)
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Errorf("attempt %d: reading %s: %v", n, l.URI, err)
		return
	}
	want := fmt.Sprintf("loglinks %s attempt %d", marker, n)
	other := fmt.Sprintf("loglinks %s attempt %d", marker, 3-n)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) || strings.Contains(string(body), other) {
		t.Errorf("attempt %d of run %s: %s %s answered %d:\n%s\nwant the line %q (and not %q)", n, run, l.Name, l.URI, resp.StatusCode, body, want, other)
	}
	if l.Name == "logs" && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("attempt %d: %s is served as %q, want text/plain", n, l.URI, resp.Header.Get("Content-Type"))
	}
}

// kubeLogLinksConfig writes executor.kubernetes.logLinks for the test
// cluster: the default link to the manager, and kubeLogLink, the URL of a
// log system rendered per Pod (namespace, Pod name and UID, container).
// The log system is logServer.
func kubeLogLinksConfig(t *testing.T, clusterDir string) string {
	t.Helper()
	srv := logServer(t, clusterDir)
	path := filepath.Join(t.TempDir(), "loglinks.yaml")
	yaml := fmt.Sprintf(`executor:
  kubernetes:
    logLinks:
      - name: logs
        url: "{{ .managerURL }}/logs/{{ .org }}/{{ .project }}/{{ .domain }}/{{ .runName }}/{{ .actionName }}/{{ .attempt }}"
      - name: %s
        url: "%s/pods/{{ .namespace }}/{{ .podName }}_{{ .podUID }}/{{ .containerName }}.log"
      - kind: kubernetes
        baseURL: http://localhost:30082
      - kind: cloudwatch
        region: us-east-1
        logGroup: /aws/containerinsights/test/application
      - kind: stackdriver
        gcpProject: flyte-test-1
        resourceName: k8s_container
      - kind: grafana-loki
        baseURL: https://grafana.example.com
        dataSource: loki-test
      - displayName: Flyte
        messageFormat: json
        templateUris:
          - "https://logs.example.com/{{ .executionName }}/{{ .nodeID }}/{{ .taskRetryAttempt }}/?start={{ .podRFC3339StartTime }}&end={{ $podUnixFinishTime }}"
`, kubeLogLink, srv)
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// localLogLinksConfig writes executor.local.logLinks for every manager of
// the tests: the default link to the manager, a template with Flyte's
// names and the host, and a Loki preset selecting the run's labels.
func localLogLinksConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "local-loglinks.yaml")
	yaml := `executor:
  local:
    logLinks:
      - name: logs
        url: "{{ .managerURL }}/logs/{{ .org }}/{{ .project }}/{{ .domain }}/{{ .runName }}/{{ .actionName }}/{{ .attempt }}"
      - name: host
        url: "https://logs.example.com/{{ .hostname }}/{{ .executionProject }}/{{ .executionDomain }}/{{ .executionName }}/{{ .nodeID }}/{{ .taskRetryAttempt }}"
      - kind: grafana-loki
        baseURL: https://grafana.example.com/
        dataSource: loki-test
        selector: '{run="{{ .runName }}", action="{{ .actionName }}"}'
`
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// logServer serves the test cluster's Pod logs over HTTP, as a log system
// would: the node agent writes each container's output to
// <dir>/pods/<namespace>/<pod>_<uid>/<container>.log (nodeagent.PodDir).
func logServer(t *testing.T, clusterDir string) string {
	t.Helper()
	srv := httptest.NewServer(http.StripPrefix("/pods/", http.FileServer(http.Dir(filepath.Join(clusterDir, "pods")))))
	t.Cleanup(srv.Close)
	return srv.URL
}
