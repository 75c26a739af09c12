package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"fmgr.dev/executor/testcluster"
	"fmgr.dev/internal/testkit"
)

// kubectlEnv is kubectl against one manager's Kubernetes-style API, with a
// kubeconfig from `flyte-manager kubeconfig`.
type kubectlEnv struct {
	t          *testing.T
	bin        string
	kubeconfig string
	cacheDir   string
}

func newKubectl(t *testing.T, m *manager) *kubectlEnv {
	t.Helper()
	dir := testcluster.RequireAssets(t)
	if m.proc.KubeURL == "" {
		t.Fatalf("the manager announced no kube API address:\n%s", m.output.Tail(40))
	}
	out, err := exec.Command(managerBin, "kubeconfig", "--home", m.Home, "--server", m.proc.KubeURL).Output()
	if err != nil {
		t.Fatalf("flyte-manager kubeconfig: %v", err)
	}
	path := filepath.Join(t.TempDir(), "flyte.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return &kubectlEnv{t: t, bin: filepath.Join(dir, "kubectl"), kubeconfig: path, cacheDir: t.TempDir()}
}

func (k *kubectlEnv) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig, "--cache-dir", k.cacheDir}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+k.cacheDir, "KUBECONFIG=")
	return cmd
}

// run runs kubectl and returns its stdout; a failure ends the test.
func (k *kubectlEnv) run(args ...string) string {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := k.command(ctx, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		k.t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// header is the first line of a table with its spacing collapsed.
func header(out string) string {
	line, _, _ := strings.Cut(out, "\n")
	return strings.Join(strings.Fields(line), " ")
}

// rows are a table's lines after the header, each split into fields.
func rows(out string) [][]string {
	var r [][]string
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines[1:] {
		r = append(r, strings.Fields(l))
	}
	return r
}

// kubectl, the real client, against a manager on its embedded default
// (SQLite, local executor) while an SDK fan-out run holds its children
// running: every get form, describe, a live watch, delete (an abort that
// ends the whole tree), api-resources and version, with golden output
// shapes.
func TestKubectlAPI(t *testing.T) {
	m := startSDKManager(t, "")
	k := newKubectl(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// Without the token, or without TLS, nothing is served.
	insecure := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for _, token := range []string{"", "not-the-token"} {
		req, _ := http.NewRequest("GET", m.proc.KubeURL+"/apis/flyte.org/v1/taskactions", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := insecure.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), `"reason":"Unauthorized"`) {
			t.Errorf("token %q: %d %s, want 401 Unauthorized", token, resp.StatusCode, body)
		}
	}
	plain := "http://" + strings.TrimPrefix(m.proc.KubeURL, "https://") + "/apis/flyte.org/v1/taskactions"
	if resp, err := insecure.Get(plain); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(body), "TaskAction") {
			t.Errorf("plain http: %d %s", resp.StatusCode, body)
		}
	}

	if got := header(k.run("api-resources")); got != "NAME SHORTNAMES APIVERSION NAMESPACED KIND" {
		t.Errorf("api-resources header: %q", got)
	}
	if out := k.run("api-resources"); !regexp.MustCompile(`(?m)^taskactions\s+flyte\.org/v1\s+true\s+TaskAction$`).MatchString(out) {
		t.Errorf("api-resources:\n%s", out)
	}
	if out := k.run("version"); !strings.Contains(out, "Server Version: v1.35.0-flyte-manager+") {
		t.Errorf("version:\n%s", out)
	}

	// A watch from before the run: it sees the actions appear and their
	// phases change.
	var watched testkit.Buffer
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	w := k.command(wctx, "get", "taskactions", "-w", "--output-watch-events")
	w.Stdout, w.Stderr = &watched, &watched
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stopWatch(); _ = w.Wait() }()

	const children = 3
	work := testkit.TaskDir(t)
	defer os.WriteFile(filepath.Join(work, "release"), nil, 0o644)
	var started struct {
		Run     string
		Actions []actionInfo
	}
	driver(t, ctx, &started, "drive_abort.py", "start", sdkEndpoint(m), work, "kubectl-"+t.Name(), fmt.Sprint(children))
	run := started.Run
	root := "flytesnacks-development-" + run + "-a0"

	select {
	case <-watched.Await(func(s string) string {
		if strings.Contains(s, "Queued") && strings.Count(s, "Executing") >= children+1 {
			return "ok"
		}
		return ""
	}):
	case <-time.After(2 * time.Minute):
		t.Fatalf("the watch did not see the run's actions queue and execute:\n%s", watched.String())
	}
	// The ADDED event carries the root as the watch read it: Queued, or
	// already further when the executor claimed it first.
	if !regexp.MustCompile(`(?m)^ADDED\s+` + regexp.QuoteMeta(root) + `\s+` + run + `\s+a0\s+python\s+(Queued|Initializing|Executing)`).MatchString(watched.String()) {
		t.Errorf("watch output lacks the root's ADDED row:\n%s", watched.String())
	}

	testkit.Eventually(t, "every action of the run executing", time.Minute, func() bool {
		return strings.Count(k.run("get", "taskactions", "-l", "flyte.org/run="+run), "Executing") == children+1
	})
	out := k.run("get", "taskactions")
	if got := header(out); got != "NAME RUN ACTION TASKTYPE STATUS AGE" {
		t.Errorf("get header: %q", got)
	}
	if r := rows(out); len(r) != children+1 || r[0][0] != root || r[0][1] != run || r[0][2] != "a0" || r[0][3] != "python" || r[0][4] != "Executing" ||
		!regexp.MustCompile(`^\d+[sm]$`).MatchString(r[0][5]) {
		t.Errorf("get rows:\n%s", out)
	}
	out = k.run("get", "taskactions", "-o", "wide")
	if got := header(out); got != "NAME RUN ACTION TASKTYPE STATUS AGE PROGRESSING SUCCEEDED FAILED" {
		t.Errorf("wide header: %q", got)
	}
	// Succeeded and Failed are unset while the action runs: empty cells.
	if r := rows(out); len(r) != children+1 || strings.Join(r[0][6:], " ") != "True" {
		t.Errorf("wide rows:\n%s", out)
	}
	out = k.run("get", "taskactions", "-A")
	if got := header(out); got != "NAMESPACE NAME RUN ACTION TASKTYPE STATUS AGE" || rows(out)[0][0] != "flyte" {
		t.Errorf("-A:\n%s", out)
	}
	out = k.run("get", "taskactions", "-l", "flyte.org/run="+run+",flyte.org/is-root=false", "-o", "name")
	if n := strings.Count(out, "taskaction.flyte.org/flytesnacks-development-"+run+"-"); n != children {
		t.Errorf("children by label: %d, want %d:\n%s", n, children, out)
	}
	sorted := k.run("get", "taskactions", "--sort-by=.spec.actionName", "-o", "custom-columns=ACTION:.spec.actionName", "--no-headers")
	actions := strings.Fields(sorted)
	for i := 1; i < len(actions); i++ {
		if actions[i-1] > actions[i] {
			t.Errorf("--sort-by=.spec.actionName is not sorted: %v", actions)
		}
	}
	if chunked := k.run("get", "taskactions", "--chunk-size=2", "-o", "name"); strings.Count(chunked, "\n") != children+1 {
		t.Errorf("--chunk-size=2 listed:\n%s", chunked)
	}

	yaml := k.run("get", "taskaction", root, "-o", "yaml")
	for _, want := range []string{"apiVersion: flyte.org/v1", "kind: TaskAction", "name: " + root, "namespace: flyte",
		"flyte.org/run: " + run, "runName: " + run, "actionName: a0", "type: Progressing", "reason: Executing", "phaseHistory:", "phase: RUNNING"} {
		if !strings.Contains(yaml, want) {
			t.Errorf("get -o yaml lacks %q:\n%s", want, yaml)
		}
	}
	desc := k.run("describe", "taskaction", root)
	for _, want := range []string{"Name:         " + root, "Namespace:    flyte", "Kind:         TaskAction", "Phase History:", "Events:", "Normal  Running"} {
		if !strings.Contains(desc, want) {
			t.Errorf("describe lacks %q:\n%s", want, desc)
		}
	}

	// delete aborts the run: kubectl waits until the object is gone, and
	// then the root and every child are ABORTED.
	if out := k.run("delete", "taskaction", root); !strings.Contains(out, `taskaction.flyte.org "`+root+`" deleted`) {
		t.Errorf("delete:\n%s", out)
	}
	var after struct {
		Phase   string
		Actions []actionInfo
	}
	testkit.Eventually(t, "the run and its children ABORTED", time.Minute, func() bool {
		driver(t, ctx, &after, "drive_abort.py", "inspect", sdkEndpoint(m), run)
		n := 0
		for _, a := range after.Actions {
			if a.Phase == "ABORTED" {
				n++
			}
		}
		return after.Phase == "ABORTED" && n == children+1
	})
	if out := k.run("get", "taskactions", "-l", "flyte.org/run="+run); strings.TrimSpace(out) != "" {
		t.Errorf("the aborted run's objects are still listed:\n%s", out)
	}
	select {
	case <-watched.AwaitText("DELETED"):
	case <-time.After(time.Minute):
		t.Errorf("the watch saw no DELETED event:\n%s", watched.String())
	}
}
