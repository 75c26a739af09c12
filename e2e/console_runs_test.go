package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/testkit"
)

// consoleRuns is what testdata/sdk/drive_console.py made: a run that
// succeeded, one that failed and one held RUNNING until marker exists.
type consoleRuns struct {
	OK, Bad, Held string
	marker        string
}

// startConsoleFixture starts a manager and makes the console tests' runs
// with the real SDK (deploying wf_console's tasks first).
func startConsoleFixture(t *testing.T) (*manager, consoleRuns) {
	t.Helper()
	m := startSDKManager(t, dbtest.SQLiteDSN(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var res struct {
		OK       string `json:"ok"`
		OKPhase  string `json:"ok_phase"`
		Bad      string `json:"bad"`
		BadPhase string `json:"bad_phase"`
		Held     string `json:"held"`
	}
	marker := filepath.Join(testkit.TaskDir(t), "release")
	t.Cleanup(func() { _ = os.WriteFile(marker, nil, 0o644) }) // lets hold end however the test ends
	driver(t, ctx, &res, "drive_console.py", sdkEndpoint(m), marker)
	if res.OKPhase != "SUCCEEDED" || res.BadPhase != "FAILED" {
		t.Fatalf("the SDK's runs ended %s and %s, want SUCCEEDED and FAILED", res.OKPhase, res.BadPhase)
	}
	return m, consoleRuns{OK: res.OK, Bad: res.Bad, Held: res.Held, marker: marker}
}

const consoleProject = "/v2/domain/development/project/flytesnacks"

func phaseSel(run, phase string) string {
	return fmt.Sprintf(`#runs [data-run=%q] [data-phase="ACTION_PHASE_%s"]`, run, phase)
}

// The runs list shows the SDK's runs with their phases, follows a running
// run to its end without a reload, and narrows with filters kept in the
// query string.
func TestConsoleRuns(t *testing.T) {
	m, runs := startConsoleFixture(t)
	b := newBrowser(t, 0)
	b.open(m.URL + consoleProject + "/runs")
	b.run("the SDK's runs with their phases",
		chromedp.WaitVisible(css(phaseSel(runs.OK, "SUCCEEDED"))),
		chromedp.WaitVisible(css(phaseSel(runs.Bad, "FAILED"))),
		chromedp.WaitVisible(css(phaseSel(runs.Held, "RUNNING"))),
	)
	b.waitText("#live", "Live")
	shootThemes(b, "runs")

	// A mark on the window survives only if the page is not reloaded.
	eval[bool](b, `window.__sameDocument = true`)
	if err := os.WriteFile(runs.marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b.run("the held run succeeds on the page", chromedp.WaitVisible(css(phaseSel(runs.Held, "SUCCEEDED"))))
	if !eval[bool](b, `window.__sameDocument === true`) {
		t.Error("the page reloaded to show the phase change")
	}

	// Filter by phase: only the failed run is left, and the URL says so.
	b.run("filter failed runs", chromedp.SetValue(css("#f-phase"), "ACTION_PHASE_FAILED"),
		chromedp.Submit(css("#run-filters")))
	b.run("only the failed run", chromedp.WaitNotPresent(css(fmt.Sprintf(`#runs [data-run=%q]`, runs.OK))),
		chromedp.WaitVisible(css(phaseSel(runs.Bad, "FAILED"))))
	if q := eval[string](b, `location.search`); q != "?phase=ACTION_PHASE_FAILED" {
		t.Errorf("query string after filtering = %q", q)
	}
	if n := eval[int](b, `document.querySelectorAll("#runs tbody tr[data-run]").length`); n != 1 {
		t.Errorf("%d runs listed under the FAILED filter, want 1", n)
	}
	// The filter survives a fresh load of the URL.
	b.open(m.URL + consoleProject + "/runs?task=console.add")
	b.run("only add's run", chromedp.WaitVisible(css(phaseSel(runs.OK, "SUCCEEDED"))),
		chromedp.WaitNotPresent(css(fmt.Sprintf(`#runs [data-run=%q]`, runs.Bad))))
	if v := eval[string](b, `document.querySelector("#f-task").value`); v != "console.add" {
		t.Errorf("task filter field = %q after loading ?task=console.add", v)
	}
	// A created-at window in the future holds nothing.
	future := time.Now().Add(48 * time.Hour).Format("2006-01-02T15:04")
	b.open(m.URL + consoleProject + "/runs?after=" + future)
	b.waitText("#runs tbody", "No runs match.")
	b.run("clear the filters", chromedp.Click(css(`#run-filters button[type=reset]`)))
	b.run("every run again", chromedp.WaitVisible(css(phaseSel(runs.Held, "SUCCEEDED"))))
	assertSameOrigin(t, b)

	narrow := newPhone(t)
	narrow.open(m.URL + consoleProject + "/runs")
	narrow.run("runs at phone width", chromedp.WaitVisible(css(phaseSel(runs.OK, "SUCCEEDED"))))
	shootThemes(narrow, "runs-390")
	if over := eval[bool](narrow, `document.documentElement.scrollWidth > window.innerWidth + 1`); over {
		t.Error("the runs page scrolls sideways at 390 px")
	}
}

// shootThemes screenshots the page in the light and then the dark theme
// (left in light).
func shootThemes(b *browser, name string) {
	b.t.Helper()
	for _, theme := range []string{"light", "dark"} {
		eval[string](b, fmt.Sprintf(`document.documentElement.dataset.theme = %q`, theme))
		b.screenshot(name + "-" + theme)
	}
	eval[string](b, `document.documentElement.dataset.theme = "light"`)
}

// newPhone is a browser with a phone's 390 px wide viewport: headless
// Chromium's window is no narrower than 500 px, so the viewport is emulated.
func newPhone(t *testing.T) *browser {
	t.Helper()
	b := newBrowser(t, 500)
	b.run("a 390 px viewport", chromedp.EmulateViewport(390, 844))
	return b
}
