package e2e

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/internal/dbtest"
)

// The console and conditions: the runs list marks the runs waiting for a
// signal and can show only them; a paused condition's panel shows its
// prompt and a form of its type, and signalling there lets the task carry
// on with the value.
func TestConsoleConditions(t *testing.T) {
	m := startSDKManager(t, dbtest.SQLiteDSN(t))
	ctx := scenarioContext(t, 10*time.Minute)
	var started struct{ Runs map[string]string }
	driver(t, ctx, &started, "drive_conditions.py", "start", sdkEndpoint(m))
	approve, expire, forever := started.Runs["approve"], started.Runs["expire"], started.Runs["forever"]
	const paused = common.ActionPhase_ACTION_PHASE_PAUSED
	conds := waitConditions(t, ctx, m, approve, map[string]common.ActionPhase{"approve": paused, "count": paused})
	waitConditions(t, ctx, m, forever, map[string]common.ActionPhase{"forever": paused})
	waitRun(t, ctx, m, expire) // its condition timed out: it waits for nobody
	base := fmt.Sprintf("%s/v2/domain/%s/project/%s", m.URL, testDomain, testProject)
	b := newBrowser(t, 0)

	t.Run("the runs list marks waiting runs", func(t *testing.T) {
		b.open(base + "/runs")
		marked := func(run string) string {
			return fmt.Sprintf(`!!document.querySelector('#runs tr[data-run=%q] [data-paused]')`, run)
		}
		b.waitJS("the waiting runs are marked", marked(approve)+" && "+marked(forever))
		if eval[bool](b, marked(expire)) {
			t.Errorf("run %s, which waits for nothing, is marked as waiting", expire)
		}
		b.screenshot("runs-waiting")
		b.run("show only waiting runs", chromedp.Click(css("#f-paused")))
		b.waitJS("only the waiting runs are listed", fmt.Sprintf(
			`[...document.querySelectorAll('#runs tbody tr[data-run]')].map((tr) => tr.dataset.run).sort().join(",") === %q`,
			sortedJoin(approve, forever)))
		b.waitJS("the filter is in the URL", `location.search.includes("paused=1")`)
	})

	t.Run("signal from the panel", func(t *testing.T) {
		page := func(cond string) string {
			return base + "/runs/" + url.PathEscape(approve) + "?action=" + url.QueryEscape(conds[cond].GetId().GetName())
		}
		b.open(page("count"))
		b.waitText("#condition-prompt", "**How many?**")
		b.screenshot("condition-paused")
		b.run("send 41", chromedp.SendKeys(css("#signal-value"), "41"), chromedp.Click(css("#signal-send")))
		b.waitText("#signalled", "41")
		b.open(page("approve"))
		b.waitText("#condition-prompt", "Ship it?")
		b.run("send true", chromedp.SetValue(css("#signal-value"), "true"), chromedp.Click(css("#signal-send")))
		b.waitText("#signalled", "True")
		if p := waitRun(t, ctx, m, approve); p != "SUCCEEDED" {
			t.Fatalf("run %s after the console's signals: %s, want SUCCEEDED", approve, p)
		}
		var res struct {
			Phase  string
			Output any
		}
		driver(t, ctx, &res, "drive_conditions.py", "outcome", sdkEndpoint(m), approve)
		if res.Output != "True:42" {
			t.Errorf("run %s returned %v, want \"True:42\" from the console's values", approve, res.Output)
		}
		if eval[bool](b, `!!document.querySelector("#signal-form")`) {
			t.Errorf("the signal form is still shown after the condition succeeded")
		}
	})
}

// sortedJoin is the names sorted and joined with commas.
func sortedJoin(names ...string) string {
	s := slices.Clone(names)
	slices.Sort(s)
	return strings.Join(s, ",")
}
