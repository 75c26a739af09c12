package v1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	v1 "fmgr.dev/executor/api/v1"
)

var (
	// defaultColumns are what `kubectl get taskactions` shows.
	defaultColumns = []string{"NAME", "RUN", "ACTION", "TASKTYPE", "STATUS", "AGE"}
	// wideColumns are what `-o wide` adds.
	wideColumns = []string{"PROGRESSING", "SUCCEEDED", "FAILED"}
)

// columnSteps walk one TaskAction through the conditions a reconciler sets,
// with the print-column values each step must show ("" = no value).
var columnSteps = []struct {
	name                           string
	conds                          []metav1.Condition
	status                         string // STATUS: the Progressing condition's reason
	progressing, succeeded, failed string
}{
	{name: "created, no status yet"},
	{name: "queued",
		conds:  []metav1.Condition{cond(v1.ConditionProgressing, metav1.ConditionTrue, v1.ReasonQueued)},
		status: "Queued", progressing: "True"},
	{name: "executing",
		conds: []metav1.Condition{
			cond(v1.ConditionProgressing, metav1.ConditionTrue, v1.ReasonExecuting),
			cond(v1.ConditionSucceeded, metav1.ConditionFalse, v1.ReasonExecuting),
			cond(v1.ConditionFailed, metav1.ConditionFalse, v1.ReasonExecuting),
		},
		status: "Executing", progressing: "True", succeeded: "False", failed: "False"},
	{name: "completed",
		conds: []metav1.Condition{
			cond(v1.ConditionProgressing, metav1.ConditionFalse, v1.ReasonCompleted),
			cond(v1.ConditionSucceeded, metav1.ConditionTrue, v1.ReasonCompleted),
			cond(v1.ConditionFailed, metav1.ConditionFalse, v1.ReasonCompleted),
		},
		status: "Completed", progressing: "False", succeeded: "True", failed: "False"},
}

func cond(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason}
}

// TestPrintColumnsTable reads the API server's Table view of taskactions (what
// kubectl prints) after each step and checks every column, the default ones
// and the priority-1 ones `-o wide` adds.
func TestPrintColumnsTable(t *testing.T) {
	ns := needCluster(t)
	ta := newTaskAction(ns, "rtable", "a0")
	if err := cluster.client.Create(context.Background(), ta); err != nil {
		t.Fatal(err)
	}
	for _, s := range columnSteps {
		setConditions(t, ta, s.conds)
		table := getTable(t, ns)
		var names []string
		for _, c := range table.ColumnDefinitions {
			names = append(names, strings.ToUpper(c.Name))
			wantPriority := int32(0)
			if slices.Contains(wideColumns, strings.ToUpper(c.Name)) {
				wantPriority = 1
			}
			if c.Priority != wantPriority {
				t.Errorf("column %s has priority %d, want %d", c.Name, c.Priority, wantPriority)
			}
		}
		if got, want := strings.Join(names, " "), strings.Join(append(defaultColumns, wideColumns...), " "); got != want {
			t.Fatalf("columns %q, want %q", got, want)
		}
		if len(table.Rows) != 1 {
			t.Fatalf("%s: %d rows, want 1", s.name, len(table.Rows))
		}
		row := map[string]string{}
		for i, cell := range table.Rows[0].Cells {
			if cell != nil {
				row[names[i]] = fmt.Sprint(cell)
			}
		}
		checkRow(t, s.name, row, ta, s.status, s.progressing, s.succeeded, s.failed, true)
	}
}

// TestPrintColumnsKubectl does the same through the real kubectl: `kubectl get
// taskactions` and `kubectl get taskactions -o wide`.
func TestPrintColumnsKubectl(t *testing.T) {
	ns := needKubectl(t)
	ta := newTaskAction(ns, "rkubectl", "a0")
	if err := cluster.client.Create(context.Background(), ta); err != nil {
		t.Fatal(err)
	}
	for _, s := range columnSteps {
		setConditions(t, ta, s.conds)

		header, rows := parseColumns(t, kubectl(t, "get", "taskactions", "-n", ns))
		if got, want := strings.Join(header, " "), strings.Join(defaultColumns, " "); got != want {
			t.Fatalf("kubectl get columns %q, want %q", got, want)
		}
		if len(rows) != 1 {
			t.Fatalf("%s: kubectl get shows %d rows, want 1", s.name, len(rows))
		}
		checkRow(t, s.name, rows[0], ta, s.status, "", "", "", false)

		header, rows = parseColumns(t, kubectl(t, "get", "taskactions", "-n", ns, "-o", "wide"))
		if got, want := strings.Join(header, " "), strings.Join(append(defaultColumns, wideColumns...), " "); got != want {
			t.Fatalf("kubectl get -o wide columns %q, want %q", got, want)
		}
		if len(rows) != 1 {
			t.Fatalf("%s: kubectl get -o wide shows %d rows, want 1", s.name, len(rows))
		}
		checkRow(t, s.name+" (wide)", rows[0], ta, s.status, s.progressing, s.succeeded, s.failed, true)
	}
}

// checkRow compares one printed row with what the TaskAction holds. kubectl
// prints <none> where the API has no value.
func checkRow(t *testing.T, step string, row map[string]string, ta *v1.TaskAction, status, progressing, succeeded, failed string, wide bool) {
	t.Helper()
	want := map[string]string{
		"NAME": ta.Name, "RUN": ta.Spec.RunName, "ACTION": ta.Spec.ActionName,
		"TASKTYPE": ta.Spec.TaskType, "STATUS": status,
	}
	if wide {
		want["PROGRESSING"], want["SUCCEEDED"], want["FAILED"] = progressing, succeeded, failed
	}
	for col, w := range want {
		got := row[col]
		if got == "<none>" {
			got = ""
		}
		if got != w {
			t.Errorf("%s: %s = %q, want %q (row %v)", step, col, got, w, row)
		}
	}
	if row["AGE"] == "" || row["AGE"] == "<none>" || row["AGE"] == "<unknown>" {
		t.Errorf("%s: AGE = %q, want a duration", step, row["AGE"])
	}
}

// setConditions replaces the TaskAction's conditions through the status
// subresource.
func setConditions(t *testing.T, ta *v1.TaskAction, conds []metav1.Condition) {
	t.Helper()
	cur := get(t, ta)
	cur.Status.Conditions = nil
	for _, c := range conds {
		cur.SetCondition(c.Type, c.Status, c.Reason, "")
	}
	if err := cluster.client.Status().Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
}

// getTable asks the API server for the namespace's taskactions as a Table,
// with every column (kubectl drops the priority-1 ones unless -o wide).
func getTable(t *testing.T, ns string) *metav1.Table {
	t.Helper()
	hc, err := rest.HTTPClientFor(cluster.cfg)
	if err != nil {
		t.Fatal(err)
	}
	url := strings.TrimSuffix(cluster.cfg.Host, "/") + "/apis/flyte.org/v1/namespaces/" + ns + "/taskactions"
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatal(err)
	}
	if table.Kind != "Table" {
		t.Fatalf("got a %q, not a Table", table.Kind)
	}
	return &table
}

// parseColumns splits kubectl's aligned output into its header and its rows,
// cutting each line at the header's column starts (a cell may be blank).
func parseColumns(t *testing.T, out string) (header []string, rows []map[string]string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	head := lines[0]
	var starts []int
	for i := range head {
		if head[i] != ' ' && (i == 0 || head[i-1] == ' ') {
			starts = append(starts, i)
			header = append(header, strings.Fields(head[i:])[0])
		}
	}
	for _, line := range lines[1:] {
		row := map[string]string{}
		for j, start := range starts {
			end := len(line)
			if j+1 < len(starts) && starts[j+1] < end {
				end = starts[j+1]
			}
			if start < len(line) {
				row[header[j]] = strings.TrimSpace(line[start:end])
			}
		}
		rows = append(rows, row)
	}
	return header, rows
}
