package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/executor/testcluster"
	"fmgr.dev/internal/mgrproc"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/testkit"
)

// kubeNamespace is where the manager puts TaskActions and Pods: the
// kubernetes executor's default namespace, which the test cluster creates.
const kubeNamespace = "flyte"

// TestSDKKubernetes runs the SDK suite against `executor.type: kubernetes`
// on PostgreSQL, through one test cluster (API server, etcd, and a node
// agent that runs every Pod as a local process) and one manager: first the
// restarts of the manager mid-run and the kubectl view of a run (they need
// the manager to themselves), then the shared scenarios of TestSDK,
// unchanged, in parallel.
func TestSDKKubernetes(t *testing.T) {
	c, clusterDir := startKubeCluster(t)
	m := startKubeManager(t, c, clusterDir, c.Kubeconfig, kubeSharedFiles)

	t.Run("restart-graceful", func(t *testing.T) {
		runs := holdRuns(t, m, func(map[string]string) {
			t.Log("restarting the manager (SIGTERM) with every run in flight")
			m.Restart()
		})
		kubePods.checkOnePodPerAction(t, runs)
	})
	t.Run("restart-kill", func(t *testing.T) {
		runs := holdRuns(t, m, func(map[string]string) {
			t.Log("killing the manager (SIGKILL) with every run in flight")
			m.Kill()
			m.Restart()
		})
		kubePods.checkOnePodPerAction(t, runs)
	})

	// Alone too: its seven tasks must all run at once (kubeMaxRunning).
	t.Run("kubectl", func(t *testing.T) { testKubectl(t, m, c) })
	t.Run("cache-restart", func(t *testing.T) { testCacheHolderRestart(t, m) })

	runSDKScenarios(t, m)
}

// startKubeCluster starts the test cluster the kubernetes SDK tests share
// the shape of, and records its Pods (kubePods). It returns the cluster and
// its directory.
func startKubeCluster(t *testing.T) (*testcluster.Cluster, string) {
	t.Helper()
	bin := filepath.Join(venv(t), "bin")
	// envtest logs through controller-runtime's global logger, which
	// complains with a stack trace when nobody set it.
	ctrllog.SetLogger(logr.Discard())
	// The Pods' processes start from this environment, as from an image's:
	// the virtualenv's `a0` on PATH, a home and temporary directory of their
	// own, no telemetry.
	// The copilot of raw container Pods is the manager's own binary (on
	// PATH, as in the manager's image); its sidecar reads its Pod through
	// the cluster's kubeconfig, as one in a cluster would with its service
	// account's credentials.
	clusterDir := t.TempDir()
	c := testcluster.ForTest(t, testcluster.Options{Dir: clusterDir, MaxRunning: kubeMaxRunning, Env: []string{
		"PATH=" + bin + ":" + filepath.Dir(managerBin) + ":/usr/bin:/bin",
		"KUBECONFIG=" + filepath.Join(clusterDir, "kubeconfig"),
		"HOME=" + t.TempDir(),
		"TMPDIR=" + t.TempDir(),
		"LANG=C.UTF-8",
		"FLYTE_DISABLE_SENTRY=true",
		"FLYTE_DISABLE_TELEMETRY=true",
		"PYTHONUNBUFFERED=1",
		"PYTHONDONTWRITEBYTECODE=1",
	}})
	kubePods = watchPods(t, c)
	t.Cleanup(func() { showFailedPods(t, c) })
	return c, clusterDir
}

// kubeSharedFiles is the setting that lets the test cluster's Pods, local
// processes, use the manager's file:// storage under its home at the same
// path.
const kubeSharedFiles = "FLYTE_MANAGER_EXECUTOR_KUBERNETES_SHAREDFILESTORAGE=true"

// startKubeManager starts a manager on PostgreSQL in kubernetes mode on c,
// reaching the API server with kubeconfig (c's own, or one with fewer
// rights), with env added (its storage: kubeSharedFiles, or an S3 server's).
func startKubeManager(t *testing.T, c *testcluster.Cluster, clusterDir, kubeconfig string, env ...string) *manager {
	t.Helper()
	port, err := testkit.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	m := startManagerWith(t, mgrproc.Options{
		Bin:    managerBin,
		DSN:    pgtest.NewDatabase(t),
		Config: []string{kubeLogLinksConfig(t, clusterDir)},
		// Pods outlive a restart of the manager and keep the address they
		// were given, as they keep a Service's in a cluster: the manager
		// comes back on the same port.
		Port: port,
		Env: append([]string{
			"FLYTE_MANAGER_EXECUTOR_TYPE=kubernetes",
			"FLYTE_MANAGER_EXECUTOR_KUBERNETES_KUBECONFIG=" + kubeconfig,
			// The test cluster runs no images: the "image" names the binary.
			"FLYTE_MANAGER_EXECUTOR_KUBERNETES_COPILOTIMAGE=" + managerBin,
		}, env...),
	})
	// The scenarios' own kubectl checks use the administrator's kubeconfig.
	m.Kubernetes, m.Kubeconfig = true, c.Kubeconfig
	return m
}

// kubeMaxRunning bounds the Pods the test cluster's node runs at once, as
// executor.local.maxParallelism bounds the local executor's processes: a
// hundred Python processes starting together on two cores starve the SDK's
// runtime past its own start-up timeouts ("Controller thread failed to
// start in time"). Room for the restart scenario's seven tasks, which hold
// together, and for -parallel (GOMAXPROCS) scenarios of up to four.
var kubeMaxRunning = max(8, 4*runtime.GOMAXPROCS(0))

// restartActions are the actions each run of drive_restart.py has: slow<i>
// only its root, the fan-out its root and three children.
var restartActions = map[string]int{"slow1": 1, "slow2": 1, "slow3": 1, "fanout": 4}

// podLog records every Pod the cluster ever had in kubeNamespace, by name,
// with each UID it had: a Pod deleted and created again under its name has
// two.
type podLog struct {
	mu   sync.Mutex
	uids map[string][]types.UID
	pods map[types.UID]*corev1.Pod // the first version seen of each
}

// watchPods starts recording Pods; it returns once the record is in sync
// with the cluster.
func watchPods(t *testing.T, c *testcluster.Cluster) *podLog {
	t.Helper()
	l := &podLog{uids: map[string][]types.UID{}, pods: map[types.UID]*corev1.Pod{}}
	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(kubeNamespace))
	inf := factory.Core().V1().Pods().Informer()
	// A Pod re-created between two watch connections reaches a handler as
	// an update of the old one: both handlers record.
	record := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			l.add(p)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.Start(stop)
	ctx := scenarioContext(t, 2*time.Minute)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the Pod informer did not sync")
	}
	return l
}

func (l *podLog) add(p *corev1.Pod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, seen := l.pods[p.UID]; seen {
		return
	}
	l.pods[p.UID] = p
	l.uids[p.Name] = append(l.uids[p.Name], p.UID)
}

// ofRun returns the Pods seen of run, one entry per UID.
func (l *podLog) ofRun(run string) []*corev1.Pod {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*corev1.Pod
	for _, p := range l.pods {
		if p.Labels[v1.LabelRun] == v1.LabelValue(run) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// all returns every Pod seen, one entry per UID.
func (l *podLog) all() []*corev1.Pod {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(l.pods))
	for _, p := range l.pods {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// checkOnePodPerAction checks that each action of the runs of
// drive_restart.py (by key) had exactly one Pod, of attempt 1, created
// once: the restarted manager found the Pods of the attempts in flight
// instead of starting them again.
func (l *podLog) checkOnePodPerAction(t *testing.T, runs map[string]string) {
	t.Helper()
	for key, run := range runs {
		byAction := map[string][]string{}
		for _, p := range l.ofRun(run) {
			a := p.Labels[v1.LabelAction]
			byAction[a] = append(byAction[a], fmt.Sprintf("%s (uid %s, attempt %s)", p.Name, p.UID, p.Labels["flyte.org/attempt"]))
			if n := len(l.uids[p.Name]); n != 1 {
				t.Errorf("run %s (%s): Pod %s was created %d times", run, key, p.Name, n)
			}
			if p.Labels["flyte.org/attempt"] != "1" {
				t.Errorf("run %s (%s): Pod %s is of attempt %s: the restart cost the action an attempt", run, key, p.Name, p.Labels["flyte.org/attempt"])
			}
		}
		if len(byAction) != restartActions[key] {
			t.Errorf("run %s (%s): Pods of %d actions, want %d: %v", run, key, len(byAction), restartActions[key], byAction)
		}
		for a, ps := range byAction {
			if len(ps) != 1 {
				t.Errorf("run %s (%s): action %s had %d Pods, want 1: %v", run, key, a, len(ps), ps)
			}
		}
		t.Logf("run %s (%s): Pods %v", run, key, byAction)
	}
}

// showFailedPods logs, in a failed test, the end of what each Pod whose
// container exited non-zero printed (the node agent's log of it).
func showFailedPods(t *testing.T, c *testcluster.Cluster) {
	if !t.Failed() {
		return
	}
	list, err := c.Client.CoreV1().Pods(kubeNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Logf("listing Pods: %v", err)
		return
	}
	for _, p := range list.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Terminated == nil || cs.State.Terminated.ExitCode == 0 {
				continue
			}
			logs, _ := filepath.Glob(filepath.Join(c.Dir, "pods", p.Namespace, p.Name+"_*", cs.Name+".log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("Pod %s exited with %d; the end of its log %s:\n%s", p.Name, cs.State.Terminated.ExitCode, l, tailLines(string(b), 40))
			}
		}
	}
}

// kubectl runs the real kubectl against c and returns its output.
func kubectl(t *testing.T, ctx context.Context, c *testcluster.Cluster, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, testcluster.Kubectl(), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// kubectlTable reads the table kubectl prints: one map per row, from column
// header to the cell's text. kubectl left-aligns every cell under its
// header, so a cell spans from its header's first column to the next's.
func kubectlTable(t *testing.T, out string) []map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) == "" || strings.HasPrefix(lines[0], "No resources") {
		return nil
	}
	header := lines[0]
	var starts []int
	for i, r := range header {
		if r != ' ' && (i == 0 || header[i-1] == ' ') {
			starts = append(starts, i)
		}
	}
	cell := func(line string, i int) string {
		from, to := starts[i], len(line)
		if i+1 < len(starts) {
			to = min(starts[i+1], len(line))
		}
		if from >= len(line) {
			return ""
		}
		return strings.TrimSpace(line[from:to])
	}
	var rows []map[string]string
	for _, line := range lines[1:] {
		row := map[string]string{}
		for i := range starts {
			row[cell(header, i)] = cell(line, i)
		}
		rows = append(rows, row)
	}
	return rows
}

// taskActionRows is `kubectl get taskactions` (with args, e.g. -o wide) in
// kubeNamespace, reduced to the rows of runs.
func taskActionRows(t *testing.T, ctx context.Context, c *testcluster.Cluster, runs []string, args ...string) []map[string]string {
	t.Helper()
	var rows []map[string]string
	for _, row := range kubectlTable(t, kubectl(t, ctx, c, append([]string{"get", "taskactions", "-n", kubeNamespace}, args...)...)) {
		if slices.Contains(runs, row["RUN"]) {
			rows = append(rows, row)
		}
	}
	return rows
}

var kubectlAge = regexp.MustCompile(`^[0-9]+[smhd]`)

// Scenario 8: the real kubectl shows each action of a run as a TaskAction
// with its print columns, as it executes and after it completed.
func testKubectl(t *testing.T, m *manager, c *testcluster.Cluster) {
	ctx := scenarioContext(t, 10*time.Minute)
	var runs []string
	wantActions := 0
	// check polls the TaskActions of runs until every one shows want (a
	// column → value map; "!True" means anything but True) in `kubectl get
	// taskactions -o wide` and the columns of the plain table agree.
	check := func(when string, want map[string]string) {
		t.Helper()
		var rows []map[string]string
		if msg := testkit.Poll(2*time.Minute, 500*time.Millisecond, func() string {
			rows = taskActionRows(t, ctx, c, runs, "-o", "wide")
			if len(rows) != wantActions {
				return fmt.Sprintf("%d TaskActions of the runs, want %d", len(rows), wantActions)
			}
			for _, row := range rows {
				for col, v := range want {
					if neg, ok := strings.CutPrefix(v, "!"); ok && row[col] == neg || !ok && row[col] != v {
						return fmt.Sprintf("TaskAction %s/%s has %s %q, want %q", row["RUN"], row["ACTION"], col, row[col], v)
					}
				}
			}
			return ""
		}); msg != "" {
			t.Fatalf("%s: %s:\n%v", when, msg, rows)
		}
		wide := map[string]map[string]string{}
		for _, row := range rows {
			wide[row["RUN"]+"/"+row["ACTION"]] = row
			if row["TASKTYPE"] != "python" || !kubectlAge.MatchString(row["AGE"]) {
				t.Errorf("%s: TaskAction %s/%s: TASKTYPE %q, AGE %q, want python and an age", when, row["RUN"], row["ACTION"], row["TASKTYPE"], row["AGE"])
			}
		}
		plain := taskActionRows(t, ctx, c, runs)
		for _, row := range plain {
			if _, ok := row["PROGRESSING"]; ok {
				t.Errorf("%s: kubectl get taskactions (not wide) shows PROGRESSING: %v", when, row)
			}
			w := wide[row["RUN"]+"/"+row["ACTION"]]
			for _, col := range []string{"RUN", "ACTION", "TASKTYPE", "STATUS"} {
				if w == nil || row[col] != w[col] {
					t.Errorf("%s: kubectl get taskactions shows %v, -o wide %v", when, row, w)
					break
				}
			}
		}
		if len(plain) != len(rows) {
			t.Errorf("%s: kubectl get taskactions lists %d TaskActions of the runs, -o wide %d", when, len(plain), len(rows))
		}
		t.Logf("%s: kubectl get taskactions -o wide:\n%v", when, rows)
	}

	byKey := holdRuns(t, m, func(byKey map[string]string) {
		for key, run := range byKey {
			runs = append(runs, run)
			wantActions += restartActions[key]
		}
		check("while the runs execute", map[string]string{"STATUS": "Executing", "PROGRESSING": "True", "SUCCEEDED": "!True", "FAILED": "!True"})
	})
	// holdRuns returned: every run succeeded.
	check("after the runs completed", map[string]string{"STATUS": "Completed", "PROGRESSING": "False", "SUCCEEDED": "True", "FAILED": "!True"})
	for key, run := range byKey {
		rows := taskActionRows(t, ctx, c, []string{run})
		if !slices.ContainsFunc(rows, func(r map[string]string) bool { return r["ACTION"] == "a0" }) {
			t.Errorf("run %s (%s): no TaskAction for its root a0: %v", run, key, rows)
		}
	}
}
