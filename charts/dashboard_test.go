package charts

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"sigs.k8s.io/yaml"

	"fmgr.dev/executor/kube"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/project"
	"fmgr.dev/gen/go/flyteidl2/project/projectconnect"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
	"fmgr.dev/internal/helmtest"
	"fmgr.dev/internal/mgrproc"
)

// metricName finds the metric names a PromQL expression reads (the
// manager's own families and the Go client's go_* and process_* ones).
var metricName = regexp.MustCompile(`\b(?:flyte_manager|go|process)_[a-z0-9_]+\b`)

// The dashboard and the alert rules the chart ships read only metrics the
// manager really exports: every name in their queries is in the /metrics
// of a running manager (after a unary call and a stream, so that the
// per-procedure families have a series) or among the kubernetes executor's
// registered metrics. A renamed or removed metric fails here, not on an
// operator's empty panel.
func TestDashboardAndAlertsReadRealMetrics(t *testing.T) {
	objs := mustRender(t, "--set", "configuration.secrets.key="+testKey, "--api-versions", "monitoring.coreos.com/v1/PrometheusRule")
	cm := helmtest.Find(objs, "ConfigMap", "flyte-flyte-binary-dashboard")
	if cm == nil {
		t.Fatal("no dashboard ConfigMap")
	}
	if labels, _ := cm["metadata"].(map[string]any)["labels"].(map[string]any); labels["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard ConfigMap lacks the sidecar's label grafana_dashboard=1: %v", labels)
	}
	raw, _ := cm["data"].(map[string]any)["flyte-manager.json"].(string)
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal([]byte(raw), &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	queries := map[string]string{} // where → expression
	for _, p := range dash.Panels {
		for i, tg := range p.Targets {
			queries[fmt.Sprintf("panel %q query %d", p.Title, i)] = tg.Expr
		}
	}
	rule := helmtest.Find(objs, "PrometheusRule", "flyte-flyte-binary")
	if rule == nil {
		t.Fatal("no PrometheusRule with the operator's API present")
	}
	b, _ := yaml.Marshal(rule["spec"])
	var spec struct {
		Groups []struct {
			Rules []struct {
				Alert, Expr string
			}
		}
	}
	if err := yaml.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			queries["alert "+r.Alert] = r.Expr
		}
	}
	if len(queries) < 20 {
		t.Fatalf("only %d queries found in the dashboard and the rules", len(queries))
	}

	exported := exportedMetrics(t)
	for _, n := range kube.MetricNames() {
		exported[n] = true
	}
	var missing []string
	for where, expr := range queries {
		names := metricName.FindAllString(expr, -1)
		if len(names) == 0 {
			missing = append(missing, where+" reads no metric: "+expr)
		}
		for _, n := range names {
			if !exported[familyOf(n)] {
				missing = append(missing, fmt.Sprintf("%s reads %s, which the manager does not export", where, n))
			}
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Error(m)
	}
}

// familyOf is the family a series name belongs to (a histogram's buckets,
// sum and count are its family's).
func familyOf(name string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			return base
		}
	}
	return name
}

// exportedMetrics starts a manager on its embedded default, makes a unary
// call and opens a stream, and returns the families its /metrics lists.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := mgrproc.Start(ctx, mgrproc.Options{Bin: managerBinary(t), Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })

	projects := projectconnect.NewProjectServiceClient(mgrproc.HTTPClient, p.URL)
	if _, err := projects.ListProjects(ctx, connect.NewRequest(&project.ListProjectsRequest{})); err != nil {
		t.Fatal(err)
	}
	runs := workflowconnect.NewRunServiceClient(mgrproc.HTTPClient, p.URL)
	stream, err := runs.WatchRuns(ctx, connect.NewRequest(&workflow.WatchRunsRequest{
		Target: &workflow.WatchRunsRequest_ProjectId{ProjectId: &common.ProjectIdentifier{Name: "flytesnacks", Domain: "development"}}}))
	if err != nil {
		t.Fatal(err)
	}
	stream.Receive() // the first answer: the stream is open and counted
	_ = stream.Close()

	resp, err := mgrproc.HTTPClient.Get(p.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	families := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		// "# TYPE <name> <type>" is printed for families with a series.
		if f := strings.Fields(sc.Text()); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			families[f[2]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return families
}
