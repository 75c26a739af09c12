package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/testkit"
)

// streamsInFlight is the manager's open streaming RPCs by procedure
// (flyte_manager_rpc_streams_in_flight), leaving out those at zero.
func streamsInFlight(m *manager) map[string]int {
	out := map[string]int{}
	for _, line := range strings.Split(m.metrics(), "\n") {
		rest, ok := strings.CutPrefix(line, `flyte_manager_rpc_streams_in_flight{procedure="`)
		if !ok {
			continue
		}
		proc, val, _ := strings.Cut(rest, `"} `)
		if n, _ := strconv.ParseFloat(val, 64); n > 0 {
			out[proc[strings.LastIndex(proc, "/")+1:]] = int(n)
		}
	}
	return out
}

// waitStreams waits until the manager's open streams are exactly want.
func waitStreams(t *testing.T, m *manager, what string, want map[string]int) {
	t.Helper()
	var got map[string]int
	if msg := testkit.Poll(time.Minute, 100*time.Millisecond, func() string {
		got = streamsInFlight(m)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Sprintf("open streams %v, want %v", got, want)
		}
		return ""
	}); msg != "" {
		t.Fatalf("%s: %s", what, msg)
	}
}

// In-app navigation closes the streams of the view it leaves: after 16
// round trips between a project's runs and a running run's page (with its
// logs), over HTTP/1.1 where Chromium opens at most six connections to the
// manager, every page still loads, and the manager holds only the streams
// of the view on screen; leaving the console closes those too.
func TestConsoleNavigationClosesStreams(t *testing.T) {
	m := startManager(t, dbtest.SQLiteDSN(t), pathLocations)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	gate := filepath.Join(testkit.TaskDir(t), "gate")
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })
	// A run that keeps running (and logging) until the test ends.
	script := `echo started; i=0; while [ ! -e "$2" ] && [ $i -lt 6000 ]; do sleep 0.1; i=$((i+1)); done; : > "$1/outputs.pb"`
	r, err := runClient(m).CreateRun(ctx, connect.NewRequest(&workflow.CreateRunRequest{
		Id: &workflow.CreateRunRequest_ProjectId{ProjectId: projectID()},
		Task: &workflow.CreateRunRequest_TaskSpec{TaskSpec: &task.TaskSpec{TaskTemplate: &core.TaskTemplate{
			Id:       &core.Identifier{ResourceType: core.ResourceType_TASK, Project: testProject, Domain: testDomain, Name: "e2e.waits", Version: "v1"},
			Type:     "python",
			Metadata: &core.TaskMetadata{},
			Target: &core.TaskTemplate_Container{Container: &core.Container{
				Image: "ignored", Args: []string{"/bin/sh", "-c", script, "sh", "{{.outputPrefix}}", gate},
			}},
		}}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	run := r.Msg.GetRun().GetAction().GetId().GetRun().GetName()

	b := newBrowser(t, 0)
	b.open(m.URL + consoleProject + "/runs")
	b.waitText("#live", "Live")
	eval[bool](b, `window.__sameDocument = true`)
	runLink := fmt.Sprintf(`#runs [data-run=%q] a[href$=%q]`, run, "/runs/"+run)
	has := func(sel, text string) string {
		return fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.textContent.includes(%q); })()`, sel, text)
	}
	for i := range 16 {
		b.run(fmt.Sprintf("round %d: open the run", i), chromedp.Click(css(runLink)))
		b.waitJS(fmt.Sprintf("round %d: the run's page loads", i), has("#run-name", run))
		b.waitJS(fmt.Sprintf("round %d: the run is live", i), `!!document.querySelector('#tree [data-action="a0"][data-phase="ACTION_PHASE_RUNNING"]')`)
		b.run(fmt.Sprintf("round %d: its logs", i), chromedp.Click(css("#tab-logs")))
		b.waitJS(fmt.Sprintf("round %d: the log loads", i), has("#log-lines", "started"))
		b.run(fmt.Sprintf("round %d: back to the runs", i), chromedp.Click(css(`#crumbs a[href$="/runs"]`)))
		b.waitJS(fmt.Sprintf("round %d: the runs page is live", i), has("#live", "Live"))
	}
	if !eval[bool](b, `window.__sameDocument === true`) {
		t.Fatal("the page was reloaded: the navigation was not in-app")
	}
	// The runs page on screen: its WatchRuns, nothing of the 16 run pages.
	waitStreams(t, m, "on the runs page after 32 navigations", map[string]int{"WatchRuns": 1})
	// The run page's streams, then leaving the console altogether.
	b.run("open the run again", chromedp.Click(css(runLink)))
	b.waitText("#run-name", run)
	b.run("its logs", chromedp.Click(css("#tab-logs")))
	b.waitText("#log-lines", "started")
	waitStreams(t, m, "on the run's page", map[string]int{"WatchRunDetails": 1, "WatchActions": 1, "WatchActionDetails": 1, "TailLogs": 1})
	b.run("leave the console", chromedp.Navigate("about:blank"))
	waitStreams(t, m, "after leaving the console", map[string]int{})
}
