package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/project"
	"fmgr.dev/gen/go/flyteidl2/project/projectconnect"
	"fmgr.dev/gen/go/flyteidl2/secret"
	"fmgr.dev/gen/go/flyteidl2/secret/secretconnect"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/task/taskconnect"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/testkit"
)

// hostileStrings are what a user may put in any free-text field: markup
// with a handler, a tag break-out with a script, a script URL, a
// right-to-left override and a string far wider than any screen. The
// console must show each as the text it is.
var hostileStrings = []string{
	`<img src=x onerror="window.__pwned='img'">`,
	`"><script>window.__pwned='script'</script>`,
	`javascript:window.__pwned='link'//`,
	"\u202Egnp.exe\u202C is a right-to-left override",
	"long:" + strings.Repeat("W", 20000),
}

// pageTraps runs in every document before the console's scripts: alert,
// confirm and prompt are recorded instead of shown, and so is every
// Content-Security-Policy violation (markup that slipped into the page
// trying to run: the CSP blocks it, the test must still see it).
const pageTraps = `window.__traps = true; window.__alerts = [];
for (const f of ["alert", "confirm", "prompt"]) window[f] = (...a) => { window.__alerts.push(f + ": " + a.join(" ")); return true; };
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => window.__violations.push(e.violatedDirective + " " + e.blockedURI + " " + (e.sample || "")));`

// trapped is a browser whose every page runs pageTraps first.
func trapped(t *testing.T) *browser {
	t.Helper()
	b := newBrowser(t, 0)
	b.run("install the page traps", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: pageTraps})
		return err
	}))
	return b
}

// pageProblems lists, from the page, every sign that a string became code
// or markup: a script that ran, an alert, a CSP violation, an element
// with an on* attribute or a javascript: URL, an element no console view
// makes (script, img, svg, object, embed, base; an iframe outside the
// report box).
const pageProblems = `(() => {
	const p = [];
	if (window.__traps !== true) p.push("the page traps are not installed");
	if (window.__pwned !== undefined) p.push("a user string ran as script: " + window.__pwned);
	if (window.__alerts?.length) p.push("dialogs: " + window.__alerts.join("; "));
	if (window.__violations?.length) p.push("CSP violations: " + window.__violations.join("; "));
	for (const el of document.querySelectorAll("body *")) {
		const tag = el.tagName.toLowerCase();
		if (["script", "img", "svg", "object", "embed", "base", "frame"].includes(tag)) p.push("a <" + tag + "> element");
		if (tag === "iframe" && !el.closest("#report")) p.push("an <iframe> outside the report");
		for (const a of el.attributes) {
			if (/^on/i.test(a.name)) p.push("<" + tag + "> has " + a.name);
			if (/^\s*(javascript|vbscript|data):/i.test(a.value) && ["href", "src", "action", "formaction"].includes(a.name)) p.push("<" + tag + "> " + a.name + "=" + a.value.slice(0, 60));
		}
	}
	return p;
})()`

func assertClean(t *testing.T, b *browser, where string) {
	t.Helper()
	for _, p := range eval[[]string](b, pageProblems) {
		t.Errorf("%s: %s", where, p)
	}
}

// waitShows waits until the element sel holds every string as text.
func waitShows(b *browser, sel string, strs ...string) {
	b.t.Helper()
	js, _ := json.Marshal(strs)
	b.waitJS(fmt.Sprintf("%s shows the hostile strings as text", sel),
		fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && %s.every((s) => e.textContent.includes(s)); })()`, sel, js))
}

// hostileSpec is a task whose short name, description, input default and
// input description are hostile; it prints its arguments, one log line
// each, and leaves outputsFile (or, failing, errorFile) as its result.
func hostileSpec(name, resultFile, resultName string, exit int) *task.TaskSpec {
	str := &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_STRING}}
	script := fmt.Sprintf(`d=$1; shift; printf '%%s\n' "$@"; cp '%s' "$d/%s"; exit %d`, resultFile, resultName, exit)
	joined := strings.Join(hostileStrings, "\n")
	return &task.TaskSpec{
		TaskTemplate: &core.TaskTemplate{
			Id:       &core.Identifier{ResourceType: core.ResourceType_TASK, Project: testProject, Domain: testDomain, Name: name, Version: "v1"},
			Type:     "python",
			Metadata: &core.TaskMetadata{},
			Interface: &core.TypedInterface{
				Inputs:  &core.VariableMap{Variables: []*core.VariableEntry{{Key: "s", Value: &core.Variable{Type: str, Description: hostileStrings[1]}}}},
				Outputs: &core.VariableMap{Variables: []*core.VariableEntry{{Key: "o0", Value: &core.Variable{Type: str}}}},
			},
			Target: &core.TaskTemplate_Container{Container: &core.Container{
				Image: "ignored",
				Args:  append([]string{"/bin/sh", "-c", script, "sh", "{{.outputPrefix}}"}, hostileStrings...),
			}},
		},
		DefaultInputs: []*task.NamedParameter{{Name: "s", Parameter: &core.Parameter{
			Var:      &core.Variable{Type: str, Description: hostileStrings[1]},
			Behavior: &core.Parameter_Default{Default: stringLiteral(joined)},
		}}},
		ShortName:     hostileStrings[0],
		Documentation: &task.DocumentationEntity{ShortDescription: hostileStrings[1], LongDescription: joined},
	}
}

func stringLiteral(s string) *core.Literal {
	return &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{
		Primitive: &core.Primitive{Value: &core.Primitive_StringValue{StringValue: s}}}}}}
}

func writeProto(t *testing.T, path string, m proto.Message) {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Hostile strings in every free-text field the console shows (a project's
// name and description; a task's short name, descriptions and default
// input; a run's inputs, outputs, log lines and error) and in every path
// segment a view reads from its URL (project, domain, run, task, version):
// every view shows them as text, no script runs, no dialog opens, the CSP
// reports nothing, no element gets a handler or a script URL, and the
// page logs no error. Identifiers carrying them are refused by the API.
// The DOM builder itself refuses handlers given as strings, srcdoc, CSS
// text, script elements and unframed iframes, and leaves javascript: URLs
// out.
func TestConsoleHostileStrings(t *testing.T) {
	m := startManager(t, dbtest.SQLiteDSN(t), pathLocations)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	joined := strings.Join(hostileStrings, "\n")

	// The API refuses identifiers that carry them.
	projects := projectconnect.NewProjectServiceClient(rpcClient, m.URL)
	for _, s := range hostileStrings[:3] {
		_, err := projects.CreateProject(ctx, connect.NewRequest(&project.CreateProjectRequest{Project: &project.Project{Id: s, Name: "x"}}))
		if connectCode(err) != "invalid_argument" {
			t.Errorf("a project id %.40q: %s, want invalid_argument", s, connectCode(err))
		}
		_, err = secretconnect.NewSecretServiceClient(rpcClient, m.URL).CreateSecret(ctx, connect.NewRequest(&secret.CreateSecretRequest{
			Id: &secret.SecretIdentifier{Name: s, Domain: testDomain, Project: testProject}, SecretSpec: &secret.SecretSpec{Value: &secret.SecretSpec_StringValue{StringValue: "v"}},
		}))
		if connectCode(err) != "invalid_argument" {
			t.Errorf("a secret name %.40q: %s, want invalid_argument", s, connectCode(err))
		}
	}

	// Free text: a project (its description holds 300 characters at
	// most), a deployed task, a run that succeeds and one that fails.
	if _, err := projects.CreateProject(ctx, connect.NewRequest(&project.CreateProjectRequest{Project: &project.Project{
		Id: "hostile", Name: hostileStrings[0], Description: strings.Join(hostileStrings[:4], " ")}})); err != nil {
		t.Fatal(err)
	}
	dir := testkit.TaskDir(t)
	outFile, errFile := filepath.Join(dir, "outputs.pb"), filepath.Join(dir, "error.pb")
	writeProto(t, outFile, &task.Outputs{Literals: []*task.NamedLiteral{{Name: "o0", Value: stringLiteral(joined)}}})
	writeProto(t, errFile, &core.ErrorDocument{Error: &core.ContainerError{Code: "Hostile", Message: joined, Kind: core.ContainerError_NON_RECOVERABLE}})
	echo := hostileSpec("hostile.echo", outFile, "outputs.pb", 0)
	if _, err := taskconnect.NewTaskServiceClient(rpcClient, m.URL).DeployTask(ctx, connect.NewRequest(&task.DeployTaskRequest{
		TaskId: &task.TaskIdentifier{Project: testProject, Domain: testDomain, Name: "hostile.echo", Version: "v1"}, Spec: echo})); err != nil {
		t.Fatal(err)
	}
	runs := runClient(m)
	start := func(spec *task.TaskSpec) string {
		r, err := runs.CreateRun(ctx, connect.NewRequest(&workflow.CreateRunRequest{
			Id:           &workflow.CreateRunRequest_ProjectId{ProjectId: projectID()},
			Task:         &workflow.CreateRunRequest_TaskSpec{TaskSpec: spec},
			InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: &task.Inputs{Literals: []*task.NamedLiteral{{Name: "s", Value: stringLiteral(joined)}}}},
		}))
		if err != nil {
			t.Fatal(err)
		}
		return r.Msg.GetRun().GetAction().GetId().GetRun().GetName()
	}
	okRun, badRun := start(echo), start(hostileSpec("hostile.boom", errFile, "error.pb", 1))
	if got := waitRun(t, ctx, m, okRun); got != "SUCCEEDED" {
		t.Fatalf("the echoing run ended %s", got)
	}
	if got := waitRun(t, ctx, m, badRun); got != "FAILED" {
		t.Fatalf("the failing run ended %s", got)
	}

	b := trapped(t)
	base := m.URL + consoleProject

	t.Run("projects", func(t *testing.T) {
		b.open(m.URL + "/v2/projects")
		waitShows(b, `[data-project="hostile"]`, hostileStrings[:4]...)
		assertClean(t, b, "projects")
	})
	t.Run("runs", func(t *testing.T) {
		b.open(base + "/runs")
		waitShows(b, fmt.Sprintf(`#runs [data-run=%q]`, okRun), hostileStrings[0])
		waitShows(b, fmt.Sprintf(`#runs [data-run=%q]`, badRun), hostileStrings[0])
		assertClean(t, b, "runs")
	})
	t.Run("run", func(t *testing.T) {
		for tab, sel := range map[string]string{"inputs": "#inputs", "outputs": "#outputs", "logs": "#log-lines", "task": "#task-spec"} {
			b.open(base + "/runs/" + okRun + "?tab=" + tab)
			waitShows(b, "#tree", hostileStrings[0])
			if tab == "task" { // JSON: quotes escaped
				waitShows(b, sel, "gnp.exe", "long:WWWW")
			} else {
				waitShows(b, sel, hostileStrings...)
			}
			assertClean(t, b, "run "+tab)
		}
		b.open(base + "/runs/" + badRun)
		waitShows(b, "#action-error", hostileStrings...)
		assertClean(t, b, "failed run")
	})
	t.Run("tasks", func(t *testing.T) {
		b.open(base + "/tasks")
		waitShows(b, `#tasks [data-task="hostile.echo"]`, hostileStrings[0])
		assertClean(t, b, "tasks")
		b.open(base + "/tasks/hostile.echo")
		waitShows(b, "#main", hostileStrings[0], hostileStrings[1])
		assertClean(t, b, "task")
	})
	t.Run("path segments", func(t *testing.T) {
		for _, s := range hostileStrings[:4] {
			seg := url.PathEscape(s)
			for _, path := range []string{
				"/v2/domain/" + seg + "/project/" + seg + "/runs",
				"/v2/domain/development/project/flytesnacks/runs/" + seg,
				"/v2/domain/development/project/flytesnacks/tasks/" + seg,
				"/v2/domain/development/project/flytesnacks/tasks/hostile.echo/" + seg,
				"/v2/domain/development/project/" + seg + "/secrets",
				"/v2/domain/development/project/" + seg + "/triggers",
				"/v2/domain/development/project/" + seg + "/apps",
				"/v2/domain/development/project/flytesnacks/apps/" + seg,
				"/v2/" + seg,
			} {
				b.open(m.URL + path)
				b.waitJS("the view settles", `!document.querySelector("#main").textContent.includes("Loading…")`)
				assertClean(t, b, path)
			}
		}
	})
	t.Run("the DOM builder's guards", func(t *testing.T) {
		got := eval[map[string]string](b, `(async () => {
			const { h } = await import("/v2/assets/lib/dom.js");
			const refused = (f) => { try { f(); return "built"; } catch (e) { return e instanceof TypeError ? "refused" : String(e); } };
			const a = h("a", { href: "JavaScript:window.__pwned='href'" }, "x");
			const f = h("iframe", { src: " javascript:window.__pwned='src'", sandbox: "" });
			return {
				onString: refused(() => h("a", { onclick: "window.__pwned='onclick'" })),
				onMixedCase: refused(() => h("a", { OnClick: "window.__pwned='onclick'" })),
				srcdoc: refused(() => h("iframe", { srcdoc: "<script>window.__pwned=1</script>", sandbox: "" })),
				cssText: refused(() => h("div", { style: "background:url(javascript:1)" })),
				script: refused(() => h("script", null, "window.__pwned='script'")),
				unsandboxed: refused(() => h("iframe", { src: "/v2/" })),
				jsHref: a.hasAttribute("href") ? a.getAttribute("href") : "left out",
				jsSrc: f.hasAttribute("src") ? f.getAttribute("src") : "left out",
				dataHref: h("a", { href: "data:text/html,<script>1</script>" }).hasAttribute("href") ? "kept" : "left out",
				relative: h("a", { href: "/v2/projects" }).getAttribute("href"),
				listener: refused(() => h("button", { onclick: () => {} })),
			};
		})()`)
		want := map[string]string{"onString": "refused", "onMixedCase": "refused", "srcdoc": "refused", "cssText": "refused",
			"script": "refused", "unsandboxed": "refused", "jsHref": "left out", "jsSrc": "left out", "dataHref": "left out",
			"relative": "/v2/projects", "listener": "built"}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("h() with %s: %q, want %q", k, got[k], w)
			}
		}
		assertClean(t, b, "after the guards")
	})
}
