package e2e

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"fmgr.dev/console"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/testkit"
)

// consoleRunPage are the runs drive_console_run.py submits.
type consoleRunPage struct {
	Fanout, Gated, Held, Reported string
	URLs                          map[string]string
}

// A note that is markup: the page must show it as text.
const htmlNote = `<img src=x onerror="document.title='pwned'">`

// The run page against real SDK runs: the link the SDK prints opens it; a
// running action's phase and its log change on the page without a reload;
// inputs and outputs show what the SDK sent (markup as text); a fan-out's
// tree folds its children into one counted row; rerun and abort from the
// page do what they say.
func TestConsoleRun(t *testing.T) {
	m := startSDKManager(t, dbtest.SQLiteDSN(t))
	ctx := scenarioContext(t, 15*time.Minute)
	dir := testkit.TaskDir(t)
	gate := filepath.Join(dir, "gate")
	var runs consoleRunPage
	driver(t, ctx, &runs, "drive_console_run.py", sdkEndpoint(m), gate, filepath.Join(dir, "never"), htmlNote)

	b := newBrowser(t, 0)
	t.Run("the SDK's link opens the run", func(t *testing.T) {
		printed, err := url.Parse(runs.URLs["gated"])
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("/v2/domain/%s/project/%s/runs/%s", testDomain, testProject, runs.Gated)
		if printed.Path != want {
			t.Fatalf("the SDK printed %s, want the path %s", runs.URLs["gated"], want)
		}
		b.open(m.URL + printed.Path + "?tab=logs")
		b.waitText("#run-name", runs.Gated)
	})

	t.Run("logs and phases follow live", func(t *testing.T) {
		// A value on window survives only if the page is never reloaded.
		eval[bool](b, `window.noReload = true`)
		b.waitJS("the root runs", `!!document.querySelector('#tree [data-action="a0"][data-phase="ACTION_PHASE_RUNNING"]')`)
		b.waitText("#log-lines", "before the gate")
		if got := eval[string](b, `document.querySelector("#log-lines").textContent`); strings.Contains(got, "after the gate") {
			t.Fatalf("the log shows the second line before the gate opened: %q", got)
		}
		b.screenshot("logs-running")
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		b.waitText("#log-lines", "after the gate")
		b.waitJS("the root succeeds on the page", `!!document.querySelector('#tree [data-action="a0"][data-phase="ACTION_PHASE_SUCCEEDED"]')`)
		// Every log link of the attempt, each opening its URL in a new tab.
		want := logLinkNames(m)
		b.waitJS("the attempt's log links", fmt.Sprintf(`document.querySelectorAll("#log-links a").length === %d`, len(want)))
		type shown struct{ Name, Href, Target string }
		links := eval[[]shown](b, `[...document.querySelectorAll("#log-links a")].map((a) => ({name: a.textContent, href: a.href, target: a.target}))`)
		for i, l := range links {
			if l.Name != want[i] || !strings.HasPrefix(l.Href, "http") || strings.Contains(l.Href, "{{") || l.Target != "_blank" {
				t.Errorf("log link %d shown as %+v, want %q opening an http(s) URL in a new tab", i, l, want[i])
			}
		}
		b.waitJS("the header follows", `document.querySelector("header.run-header")?.dataset.phase === "ACTION_PHASE_SUCCEEDED"`)
		if !eval[bool](b, `window.noReload === true`) {
			t.Fatal("the page was reloaded")
		}
	})

	t.Run("inputs and outputs", func(t *testing.T) {
		b.run("open inputs", chromedp.Click(css("#tab-inputs")))
		b.waitText(`#inputs [data-literal="note"]`, htmlNote)
		b.waitText(`#inputs [data-literal="point"]`, `"label": "seven"`)
		b.waitText(`#inputs [data-literal="point"]`, `"x": 7`)
		items := eval[[]string](b, `[...document.querySelectorAll('#inputs [data-literal="items"] li')].map((li) => li.textContent)`)
		if strings.Join(items, ",") != "1,2,3" {
			t.Errorf("items shown as %v, want 1,2,3", items)
		}
		b.run("open outputs", chromedp.Click(css("#tab-outputs")))
		b.waitText(`#outputs [data-literal="o0"]`, htmlNote)
		if n := eval[int](b, `document.querySelectorAll("#main img").length`); n != 0 {
			t.Errorf("an output was rendered as markup: %d <img> on the page", n)
		}
		if title := eval[string](b, `document.title`); strings.Contains(title, "pwned") {
			t.Errorf("an output's markup ran: the title is %q", title)
		}
		if q := eval[string](b, `location.search`); !strings.Contains(q, "tab=outputs") {
			t.Errorf("the tab is not in the URL: %q", q)
		}
	})

	t.Run("screenshots", func(t *testing.T) {
		path := fmt.Sprintf("/v2/domain/%s/project/%s/runs/%s", testDomain, testProject, runs.Gated)
		for _, width := range []int{1280, 390} {
			wb := b
			if width != 1280 {
				wb = newBrowser(t, width)
			}
			for _, theme := range []string{"light", "dark"} {
				wb.open(m.URL + path)
				eval[bool](wb, fmt.Sprintf(`(localStorage.setItem("theme", %q), true)`, theme))
				for _, tab := range []string{"summary", "inputs", "outputs", "logs", "report", "task"} {
					wb.open(m.URL + path + "?tab=" + tab)
					wb.waitJS("the "+tab+" tab is drawn", fmt.Sprintf(`(() => { const p = document.querySelector("#tab-panel"); return !!p && p.dataset.tab === %q && p.children.length > 0 && !p.textContent.includes("Loading"); })()`, tab))
					if tab == "logs" {
						wb.waitText("#log-state", "End of log")
					}
					wb.screenshot(fmt.Sprintf("%d-%s-%s", width, theme, tab))
				}
			}
		}
	})

	t.Run("fan-out tree and rerun", func(t *testing.T) {
		b.open(fmt.Sprintf("%s/v2/domain/%s/project/%s/runs/%s", m.URL, testDomain, testProject, runs.Fanout))
		b.waitJS("the fan-out succeeds", `document.querySelector("header.run-header")?.dataset.phase === "ACTION_PHASE_SUCCEEDED"`)
		b.waitText(`#tree [data-group="square"]`, "12 × square: 12 succeeded")
		if n := eval[int](b, `document.querySelectorAll('#tree [data-action]:not([data-action="a0"])').length`); n != 0 {
			t.Errorf("the folded group shows %d child rows", n)
		}
		// Keyboard: from the root, Down reaches the group, Right opens it.
		b.run("focus the root", chromedp.Focus(css(`#tree [data-action="a0"]`)))
		b.run("down, right", chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.ArrowRight))
		b.waitJS("the group opens", `document.querySelectorAll('#tree [data-action]:not([data-action="a0"])').length === 12`)
		b.run("down, enter", chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.Enter))
		b.waitJS("a child is selected", `new URLSearchParams(location.search).get("action")?.length > 0 && document.querySelector("#action-panel").dataset.action !== "a0"`)
		b.screenshot("fanout-expanded")

		b.run("rerun", chromedp.Click(css("#rerun")))
		b.waitJS("a new run's page", fmt.Sprintf(`!!document.querySelector("#run-name") && document.querySelector("#run-name").textContent !== %q`, runs.Fanout))
		b.waitText("#run-facts", runs.Fanout) // "Rerun of <source>"
		b.waitText("#run-facts", "Rerun of")
		b.waitJS("the rerun succeeds", `document.querySelector("header.run-header")?.dataset.phase === "ACTION_PHASE_SUCCEEDED"`)
		b.waitText(`#tree [data-group="square"]`, "12 × square: 12 succeeded")
	})

	t.Run("abort from the page", func(t *testing.T) {
		b.open(fmt.Sprintf("%s/v2/domain/%s/project/%s/runs/%s", m.URL, testDomain, testProject, runs.Held))
		b.waitJS("the held run runs", `!!document.querySelector('#tree [data-action="a0"][data-phase="ACTION_PHASE_RUNNING"]')`)
		eval[bool](b, `(window.confirm = () => true, true)`)
		b.run("abort", chromedp.Click(css("#abort-run")))
		b.waitJS("the run ends aborted", `document.querySelector("header.run-header")?.dataset.phase === "ACTION_PHASE_ABORTED"`)
		b.waitJS("the abort button goes", `document.querySelector("#abort-run").hidden`)
	})

	t.Run("report", func(t *testing.T) {
		b.open(fmt.Sprintf("%s/v2/domain/%s/project/%s/runs/%s?tab=report", m.URL, testDomain, testProject, runs.Reported))
		b.waitJS("the reported run succeeds", `document.querySelector("header.run-header")?.dataset.phase === "ACTION_PHASE_SUCCEEDED"`)
		b.waitJS("the report is framed", `!!document.querySelector("#report iframe")`)
		if sb := eval[string](b, `document.querySelector("#report iframe").getAttribute("sandbox")`); sb != "allow-scripts" {
			t.Errorf("the report's iframe has sandbox=%q, want allow-scripts only", sb)
		}
		ctype := eval[string](b, `fetch(document.querySelector("#report iframe").src).then((r) => r.headers.get("content-type"))`)
		if !strings.HasPrefix(ctype, "text/html") {
			t.Errorf("the report is served as %q, so the frame cannot show it", ctype)
		}
		body := eval[string](b, `fetch(document.querySelector("#report iframe").src).then((r) => r.text())`)
		if !strings.Contains(body, "a line of the report") {
			t.Errorf("the framed report does not have the line the task logged: %.300s", body)
		}
		b.waitJS("the report loads in its frame", `document.querySelector("#report iframe").dataset.loaded === "true"`)
		b.screenshot("report")
	})

	t.Run("recover from the page", func(t *testing.T) {
		b.open(fmt.Sprintf("%s/v2/domain/%s/project/%s/runs/%s", m.URL, testDomain, testProject, runs.Fanout))
		b.waitJS("the fan-out has ended", `document.querySelector("header.run-header")?.dataset.phase === "ACTION_PHASE_SUCCEEDED"`)
		b.run("recover", chromedp.Click(css("#recover")))
		b.waitJS("the recovering run's page", fmt.Sprintf(`!!document.querySelector("#run-name") && document.querySelector("#run-name").textContent !== %q`, runs.Fanout))
		b.waitText("#run-facts", "Recovered from")
		b.waitJS("the recovering run succeeds", `document.querySelector("header.run-header")?.dataset.phase === "ACTION_PHASE_SUCCEEDED"`)
		// Every square succeeded in the source, so none runs again.
		b.waitText(`#tree [data-group="square"]`, "12 × square: 12 recovered")
	})

	t.Run("a 1,000-action tree", func(t *testing.T) {
		// Synthetic actions through the page's own tree module: folded, the
		// root and one row counting the 999 children by phase; open, a row
		// for each. How long it takes is `make bench`'s (runner console).
		got := eval[map[string]any](b, console.TreeRenderScript(1000))
		if got["foldedRows"] != 2.0 || got["openRows"] != 1001.0 {
			t.Errorf("the tree has %v rows folded and %v open, want 2 (the root and the group) and 1001 (and its 999 members)", got["foldedRows"], got["openRows"])
		}
		if text, want := fmt.Sprint(got["groupText"]), "999 × square: 333 running, 333 succeeded, 333 failed"; !strings.Contains(text, want) {
			t.Errorf("the folded group reads %q, want %q", text, want)
		}
	})
}
