package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"fmgr.dev/executor/testcluster"
	"fmgr.dev/executor/testcluster/nodeagent"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/mgrproc"
	"fmgr.dev/internal/pgtest"
)

// The reference manager's published cost of one single-action run on
// Kubernetes, which the kube scenario is compared with.
const (
	referenceAPIWrites    = 11.0
	referenceTransactions = 42.0
	// targetExecutorWrites is issue 7's aim for the executor's own writes.
	targetExecutorWrites = 4.0
)

// statsFlushWait is how long the kube scenario waits before each snapshot
// of its counters. PostgreSQL 15 backends flush their transaction counts to
// pg_stat_database at most once a second while busy, and an idle backend's
// pending counts only after PGSTAT_IDLE_INTERVAL (10 s); the executor's
// last writes of a run (its Pod's end, the TaskAction's final status) also
// come just after the run is seen terminal. Waiting longer than both puts
// every count of the measured runs inside the window.
const statsFlushWait = 11 * time.Second

// kubeWorkload is a single-action run: a raw container that declares no
// outputs, so it succeeds on exit 0, which is what the test cluster's noop
// runner reports for every Pod. The command is never run.
func kubeWorkload() workload {
	return workload{
		inputs: &task.Inputs{},
		spec: &task.TaskSpec{
			ShortName: "kube_noop",
			TaskTemplate: &core.TaskTemplate{
				Id: &core.Identifier{
					ResourceType: core.ResourceType_TASK, Project: benchProject, Domain: benchDomain,
					Name: "bench.kube_noop", Version: "v1",
				},
				Type:      "raw-container",
				Metadata:  &core.TaskMetadata{},
				Interface: &core.TypedInterface{},
				Target: &core.TaskTemplate_Container{Container: &core.Container{
					Image:   "bench-noop",
					Command: []string{"true"},
				}},
			},
		},
	}
}

// kubeNamespace is where one backend's kube scenario puts its TaskActions
// and Pods: one cluster serves every backend, and the runs of each are
// named alike.
func kubeNamespace(backend string) string { return "bench-" + backend }

// startKubeCluster starts the test cluster the kube scenarios share, with
// the noop runner: Pods go Running, then Succeeded with exit code 0.
func startKubeCluster(ctx context.Context, dir string, backends []string) (*testcluster.Cluster, error) {
	// envtest logs through controller-runtime's global logger, which
	// complains (with a stack) when nothing was set; the cluster's own log
	// is in dir.
	ctrllog.SetLogger(logr.Discard())
	var namespaces []string
	for _, b := range backends {
		namespaces = append(namespaces, kubeNamespace(b))
	}
	c, err := testcluster.Start(ctx, testcluster.Options{Dir: dir, Runner: nodeagent.RunNoop, Namespaces: namespaces})
	if err != nil {
		return nil, fmt.Errorf("%w\n(the kube runner needs the test cluster's binaries: `make envtest-assets`, or leave it out with -runners noop,a0)", err)
	}
	return c, nil
}

// kubeEnv configures a manager for kubernetes mode on cluster c.
func kubeEnv(c *testcluster.Cluster, backend string) []string {
	return []string{
		"FLYTE_MANAGER_EXECUTOR_TYPE=kubernetes",
		"FLYTE_MANAGER_EXECUTOR_KUBERNETES_KUBECONFIG=" + c.Kubeconfig,
		"FLYTE_MANAGER_EXECUTOR_KUBERNETES_NAMESPACE=" + kubeNamespace(backend),
		// The node agent's Pods run on this host.
		"FLYTE_MANAGER_EXECUTOR_KUBERNETES_SHAREDFILESTORAGE=true",
	}
}

// kubeCounters is one snapshot of what the kube scenario counts.
type kubeCounters struct {
	executor  map[string]float64 // the manager's writes, by "verb kind"
	reconcile float64            // the manager's reconciles of TaskActions
	apiServer map[string]float64 // every write the API server answered, by "VERB resource[/subresource] [(code)]"
	xacts     float64            // the manager database's commits + rollbacks; -1 without PostgreSQL
}

// kubeFigures are a kube scenario's counts over its measured runs.
type kubeFigures struct {
	actions   int
	executor  map[string]float64
	reconcile float64
	apiServer map[string]float64
	xacts     float64 // -1: not measured (SQLite)
}

// snapshotKube reads the counters of manager m, cluster c and, on
// PostgreSQL, database db of pg.
func snapshotKube(ctx context.Context, m *manager, c *testcluster.Cluster, pg *pgtest.Server, db string) (kubeCounters, error) {
	s := kubeCounters{xacts: -1}
	text, err := getText(ctx, m.URL+"/metrics")
	if err != nil {
		return s, fmt.Errorf("the manager's /metrics: %w", err)
	}
	s.executor = sumSamples(text, "flyte_manager_kube_api_writes_total", func(l map[string]string) (string, bool) {
		return l["verb"] + " " + l["kind"], true
	})
	s.reconcile = total(sumSamples(text, "flyte_manager_kube_reconciles_total", func(map[string]string) (string, bool) { return "", true }))
	raw, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return s, fmt.Errorf("the API server's /metrics: %w", err)
	}
	s.apiServer = sumSamples(string(raw), "apiserver_request_total", func(l map[string]string) (string, bool) {
		switch l["verb"] { // HTTP verbs, APPLY for server-side apply
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
		default:
			return "", false
		}
		k := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			k += "/" + l["subresource"]
		}
		if !strings.HasPrefix(l["code"], "2") {
			k += " (" + l["code"] + ")" // refused: a conflict, a missing object
		}
		return k, true
	})
	if pg != nil {
		if s.xacts, err = transactions(ctx, pg, db); err != nil {
			return s, err
		}
	}
	return s, nil
}

// transactions is database db's xact_commit + xact_rollback, read from
// another database so that reading it adds nothing to it.
func transactions(ctx context.Context, pg *pgtest.Server, db string) (float64, error) {
	conn, err := pgx.Connect(ctx, pg.DSN("postgres"))
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int64
	err = conn.QueryRow(ctx, "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1", db).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("pg_stat_database of %s: %w", db, err)
	}
	return float64(n), nil
}

// kubeDelta is what the measured runs cost between two snapshots.
func kubeDelta(before, after kubeCounters, actions int) *kubeFigures {
	f := &kubeFigures{actions: actions, executor: diff(before.executor, after.executor),
		apiServer: diff(before.apiServer, after.apiServer), xacts: -1,
		reconcile: after.reconcile - before.reconcile}
	if before.xacts >= 0 && after.xacts >= 0 {
		f.xacts = after.xacts - before.xacts
	}
	return f
}

func diff(before, after map[string]float64) map[string]float64 {
	d := map[string]float64{}
	for k, v := range after {
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

func total(m map[string]float64) float64 {
	var t float64
	for _, v := range m {
		t += v
	}
	return t
}

// reportKube prints the kube scenarios' costs per action.
func reportKube(out io.Writer, results []result) {
	row := func(label string, v float64, extra string) {
		fmt.Fprintf(out, "  %-96s %6.2f%s\n", label+":", v, extra)
	}
	printed := false
	for _, r := range results {
		f := r.kube
		if f == nil || f.actions == 0 {
			continue
		}
		printed = true
		n := float64(f.actions)
		fmt.Fprintf(out, "\nkubernetes executor on %s, per action (%d single-action runs, %d in flight):\n", r.backend, f.actions, r.inflight)
		ex, all := total(f.executor)/n, total(f.apiServer)/n
		row("API writes the executor sent (flyte_manager_kube_api_writes_total; refused ones too)", ex, fmt.Sprintf("  (aim ≤ %.0f)", targetExecutorWrites))
		printBreakdown(out, f.executor, n)
		row("reconciles of TaskActions (flyte_manager_kube_reconciles_total)", f.reconcile/n, "")
		row("API writes the API server answered (apiserver_request_total, every client; (409): refused)", all, "")
		printBreakdown(out, f.apiServer, n)
		row("  of which not the executor's (node agent: pods/binding, pods/status; GC; API server leases)", all-ex, "")
		if f.xacts >= 0 {
			row("PostgreSQL transactions (pg_stat_database xact_commit + xact_rollback)", f.xacts/n, "")
		} else {
			fmt.Fprintln(out, "  database transactions: counted on PostgreSQL only")
		}
		fmt.Fprintf(out, "  reference manager: %.0f API-server writes, %.0f PostgreSQL transactions per single-action run\n", referenceAPIWrites, referenceTransactions)
		fmt.Fprintf(out, "  ratio to reference: executor writes %.2f×, all API writes %.2f×", ex/referenceAPIWrites, all/referenceAPIWrites)
		if f.xacts >= 0 {
			fmt.Fprintf(out, ", transactions %.2f×", f.xacts/n/referenceTransactions)
		}
		fmt.Fprintln(out)
	}
	if printed {
		fmt.Fprintln(out, "\nkube counts cover the measured runs and the settling after them; the TaskActions' garbage collection")
		fmt.Fprintln(out, "(executor.kubernetes.gcTTL, 1 h: one delete each, then the Pod's) comes later and is not in them.")
	}
}

// printBreakdown prints counts per action, largest first.
func printBreakdown(out io.Writer, m map[string]float64, n float64) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		fmt.Fprintf(out, "      %-92s %6.2f\n", k, m[k]/n)
	}
}

// getText GETs url's body.
func getText(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := mgrproc.HTTPClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
