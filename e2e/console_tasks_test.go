package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// The tasks list shows the deployed tasks; a task's page shows its spec,
// versions and recent runs, with a description holding <script> as text.
func TestConsoleTasks(t *testing.T) {
	m, runs := startConsoleFixture(t)
	b := newBrowser(t, 0)
	b.open(m.URL + consoleProject + "/tasks")
	b.waitText(`#tasks [data-task="console.add"]`, "console.add")
	b.waitText(`#tasks [data-task="console.fails"]`, "console.fails")
	assertNoMarkup(t, b)
	shootThemes(b, "tasks")

	b.run("open add", chromedp.Click(css(`#tasks [data-task="console.add"] a`)))
	b.waitText("#task-name", "add")
	b.waitText("#inputs", "x")
	b.waitText("#inputs", "int")
	b.waitText("#outputs", "int")
	b.waitText(`[data-spec="retries"]`, "0")
	b.waitText("#task-description", "<script>alert(1)</script>")
	b.run("add's run is among its recent runs", chromedp.WaitVisible(css(`#task-runs [data-run="`+runs.OK+`"] [data-phase="ACTION_PHASE_SUCCEEDED"]`)))
	b.run("one version", chromedp.WaitVisible(css(`#versions [data-version]`)))
	if n := eval[int](b, `document.querySelectorAll("#task-runs [data-run]").length`); n != 1 {
		t.Errorf("add's page lists %d recent runs, want 1 (only its own)", n)
	}
	assertNoMarkup(t, b)
	shootThemes(b, "task")
	assertSameOrigin(t, b)

	narrow := newPhone(t)
	narrow.open(m.URL + consoleProject + "/tasks")
	narrow.waitText(`#tasks [data-task="console.add"]`, "console.add")
	shootThemes(narrow, "tasks-390")
	narrow.open(m.URL + consoleProject + "/tasks/console.add")
	narrow.waitText("#task-name", "add")
	shootThemes(narrow, "task-390")
	if over := eval[bool](narrow, `document.documentElement.scrollWidth > window.innerWidth + 1`); over {
		t.Error("the task page scrolls sideways at 390 px")
	}
}
