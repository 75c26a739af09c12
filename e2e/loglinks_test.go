package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
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

// logLinkNames are the log links every attempt reports on m, in order.
func logLinkNames(m *manager) []string {
	if m.Kubernetes {
		return []string{"logs", kubeLogLink}
	}
	return []string{"logs"}
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
			checkLogLink(t, m, res.Run, n, l, marker)
			if l.Name == "logs" {
				// On the manager: at the address the SDK used.
				if want := fmt.Sprintf("%s/logs/local/%s/%s/%s/a0/%d", sdkBase, testProject, testDomain, res.Run, n); l.URI != want {
					t.Errorf("attempt %d: link %q, want %q", n, l.URI, want)
				}
			}
		}
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

// checkLogLink opens one link of attempt n of run and checks it answers
// that attempt's log (and not the other attempt's).
func checkLogLink(t *testing.T, m *manager, run string, n int, l logLink, marker string) {
	t.Helper()
	u, err := url.Parse(l.URI)
	if l.Name == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		strings.Contains(l.URI, "{{") || strings.Contains(l.URI, "}}") {
		t.Errorf("attempt %d: link %q → %q is not a named absolute http(s) URL", n, l.Name, l.URI)
		return
	}
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
`, kubeLogLink, srv)
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
