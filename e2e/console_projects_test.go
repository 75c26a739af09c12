package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"

	"fmgr.dev/internal/dbtest"
)

// The bare origin takes a browser to the projects page; a project created
// there is listed, archived and restored from the page.
func TestConsoleProjects(t *testing.T) {
	m := startManager(t, dbtest.SQLiteDSN(t))
	b := newBrowser(t, 0)
	b.open(m.URL + "/")
	b.waitText("#projects", "flytesnacks")
	path := eval[string](b, `location.pathname`)
	if path != "/v2/projects" {
		t.Errorf("the bare origin led to %s, want /v2/projects", path)
	}
	b.screenshot("projects")

	b.run("create a project",
		chromedp.Click(css(`details summary`)),
		chromedp.SendKeys(css(`#create-project input[name=id]`), "console-made"),
		chromedp.SendKeys(css(`#create-project input[name=description]`), "<b>not bold</b>"),
		chromedp.Click(css(`#create-project button[type=submit]`)),
	)
	b.waitText(`[data-project="console-made"]`, "<b>not bold</b>") // shown as text, not markup
	if bolds := eval[int](b, `document.querySelectorAll('[data-project="console-made"] b').length`); bolds != 0 {
		t.Errorf("a project description was rendered as markup")
	}

	b.run("archive it", chromedp.Click(css(`[data-project="console-made"] button`)))
	b.run("archived projects are hidden", chromedp.WaitNotPresent(css(`[data-project="console-made"]`)))
	b.run("show archived", chromedp.Click(css(`#show-archived`)))
	b.waitText(`[data-project="console-made"]`, "(archived)")
	b.screenshot("projects-archived")
	b.run("restore it", chromedp.Click(css(`[data-project="console-made"] button`)))
	b.waitText(`[data-project="console-made"] button`, "Archive")
}
