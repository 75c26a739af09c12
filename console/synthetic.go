package console

import "fmt"

// TreeRenderScript is JavaScript for a page of the console (any view, once
// loaded): through the page's own tree module it draws a synthetic run of
// n actions (the root and n-1 children of one task, in three phases)
// into a detached box, first folded, then with the fan-out open, and
// resolves to {folded, open} (milliseconds) and {foldedRows, openRows}
// (the rows drawn). The console's browser test checks the rows; the bench
// (`make bench`, runner console) prints the times. Nothing of it is served.
func TreeRenderScript(n int) string {
	return fmt.Sprintf(`(async () => {
	const n = %d;
	const { renderTree } = await import("/v2/assets/views/run/tree.js");
	const run = { org: "", project: "p", domain: "d", name: "r" };
	const phases = ["ACTION_PHASE_SUCCEEDED", "ACTION_PHASE_RUNNING", "ACTION_PHASE_FAILED"];
	const now = Date.now();
	const actions = new Map([["a0", { id: { run, name: "a0" }, metadata: { task: { shortName: "main" } },
		status: { phase: "ACTION_PHASE_RUNNING", startTime: new Date(now).toISOString() } }]]);
	for (let i = 0; i < n - 1; i++) {
		const name = "c" + i;
		actions.set(name, { id: { run, name }, metadata: { parent: "a0", task: { shortName: "square", id: { name: "wf.square" } } },
			status: { phase: phases[i %% 3], startTime: new Date(now - i).toISOString() } });
	}
	const el = document.createElement("div");
	document.body.append(el);
	const state = { expanded: new Set(), selected: "a0", onSelect() {}, onToggle() {} };
	let t = performance.now();
	renderTree(el, actions, state);
	const folded = performance.now() - t;
	const foldedRows = el.children.length;
	const groupText = el.querySelector("[data-group]")?.textContent || "";
	state.expanded.add("g:a0/task:wf.square");
	t = performance.now();
	renderTree(el, actions, state);
	const open = performance.now() - t;
	const openRows = el.children.length;
	el.remove();
	return { folded, open, foldedRows, openRows, groupText };
})()`, n)
}
