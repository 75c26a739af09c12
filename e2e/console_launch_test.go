package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The launch form, built from add's interface by the TranslatorService,
// starts a run of the deployed task that succeeds with the value typed in.
func TestConsoleLaunch(t *testing.T) {
	m, _ := startConsoleFixture(t)
	b := newBrowser(t, 0)
	b.open(m.URL + consoleProject + "/tasks/console.add")
	b.waitText("#task-name", "add")
	b.run("open the launch form", chromedp.Click(css("#launch")), chromedp.WaitVisible(css("#launch-form #in-x")))
	if v := eval[string](b, `document.querySelector("#in-x").value`); v != "41" {
		t.Errorf("x's default in the form = %q, want 41", v)
	}
	// The string default holds markup: it is a value, not elements.
	if v := eval[string](b, `document.querySelector("#in-label").value`); v != "<script>alert(1)</script>" {
		t.Errorf("label's default in the form = %q", v)
	}
	assertNoMarkup(t, b)
	shootThemes(b, "launch")

	b.run("launch with x=6", chromedp.SetValue(css("#in-x"), "6"), chromedp.Click(css(`#launch-form button[type=submit]`)))
	b.waitJS("the new run's page", `location.pathname.includes("/runs/")`)
	run := eval[string](b, `decodeURIComponent(location.pathname.split("/").pop())`)
	if run == "" || strings.Contains(run, "/") {
		t.Fatalf("navigated to %s", eval[string](b, `location.pathname`))
	}
	// Followed on the runs list (the run view is another helper's): the
	// watch brings the phase change.
	b.open(m.URL + consoleProject + "/runs")
	b.run("the launched run succeeds", chromedp.WaitVisible(css(phaseSel(run, "SUCCEEDED"))))
	// It ran add with the x typed in: its output is 6 + 1.
	out := eval[string](b, fmt.Sprintf(`(async () => {
		const {call} = await import("/v2/assets/lib/api.js");
		const d = await call("workflow.RunService", "GetActionData", {actionId: {run: {org: "", project: "flytesnacks", domain: "development", name: %q}, name: "a0"}});
		return JSON.stringify(d.outputs?.literals || []);
	})()`, run))
	if !strings.Contains(out, `"integer":"7"`) {
		t.Errorf("the launched run's outputs are %s, want o0 = 7", out)
	}
	assertSameOrigin(t, b)

	narrow := newPhone(t)
	narrow.open(m.URL + consoleProject + "/tasks/console.add")
	narrow.run("the launch form at phone width", chromedp.Click(css("#launch")), chromedp.WaitVisible(css("#launch-form #in-x")))
	shootThemes(narrow, "launch-390")
}
