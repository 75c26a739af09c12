// One run: its header (live phase, abort, rerun, recover), its action tree
// and timeline followed live (WatchActions), and the selected action's panel
// (?action=<name>, the root a0 by default).
import { h, replace } from "../lib/dom.js";
import { call, follow, stream } from "../lib/api.js";
import { setQuery } from "../lib/router.js";
import { errorBox } from "../lib/ui.js";
import { header } from "./run/header.js";
import { renderTree } from "./run/tree.js";
import { renderTimeline } from "./run/timeline.js";
import { actionPanel } from "./run/panel.js";

export default async function render(main, params, ctx) {
  const { domain, project, run } = params;
  const q = new URLSearchParams(location.search);
  const base = `/v2/domain/${encodeURIComponent(domain)}/project/${encodeURIComponent(project)}`;
  ctx.setCrumbs([["Projects", "/v2/projects"], [project, base + "/runs"], ["Runs", base + "/runs"], [run]]);

  // The SDK against localhost stores runs under org ""; a run made in
  // another org is found by its details, whose id carries the org.
  const first = await call("workflow.RunService", "GetRunDetails", { runId: { org: q.get("org") || "", project, domain, name: run } }, { signal: ctx.signal });
  const runId = first.details.action.id.run;

  const head = header(runId, ctx);
  head.update(first.details);
  const status = h("div", { "aria-live": "polite", id: "watch-status" });
  const treeEl = h("div", { class: "tree", id: "tree" });
  const timelineEl = h("div", { class: "timeline", id: "timeline" });
  const panelSlot = h("div", { class: "panel-slot" });
  const timeline = h("details", { class: "timeline-box", open: true }, h("summary", null, "Timeline"), timelineEl);
  main.append(head.el, status,
    h("div", { class: "run-layout" },
      h("section", { class: "run-tree", "aria-label": "Action tree" }, h("h2", null, "Actions"), treeEl),
      panelSlot),
    timeline);
  main.dataset.run = runId.name;

  const actions = new Map(); // action name → Action
  let attempts = []; // the selected action's attempts, for the timeline
  const state = {
    expanded: new Set(),
    selected: q.get("action") || "a0",
    onSelect: (name) => selectAction(name),
    onToggle: () => draw(),
  };

  let scheduled = false;
  function draw() {
    scheduled = false;
    renderTree(treeEl, actions, state);
    renderTimeline(timelineEl, actions, { selected: state.selected, attempts, onSelect: state.onSelect });
  }
  // Many updates arrive together in a fan-out: draw once per frame at most.
  function schedule() {
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(draw);
  }

  let panelCtrl = null;
  function selectAction(name, { initial = false } = {}) {
    if (!initial && name === state.selected && panelCtrl) return;
    state.selected = name;
    if (!initial) setQuery({ action: name === "a0" ? "" : name, tab: "" });
    panelCtrl?.abort();
    panelCtrl = new AbortController();
    ctx.signal.addEventListener("abort", () => panelCtrl.abort(), { once: true });
    attempts = [];
    replace(panelSlot, actionPanel({ run: runId, name }, initial ? q.get("tab") : "summary", panelCtrl.signal, (d) => {
      attempts = d.attempts || [];
      schedule();
    }));
    schedule();
  }
  selectAction(state.selected, { initial: true });

  follow(() => stream("workflow.RunService", "WatchRunDetails", { runId }, { signal: ctx.signal }),
    (msg) => { if (msg.details) head.update(msg.details); }, ctx.signal,
    { onError: (e) => replace(status, errorBox(e)) });

  let firstDraw = true;
  follow(() => stream("workflow.RunService", "WatchActions", { runId }, { signal: ctx.signal }),
    (msg) => {
      for (const e of msg.enrichedActions || []) {
        const a = e.action;
        if (a?.id?.name) actions.set(a.id.name, a);
      }
      replace(status);
      if (firstDraw) { // the snapshot: draw it now so the page is whole at once
        firstDraw = false;
        draw();
      } else schedule();
    }, ctx.signal,
    { onError: (e) => replace(status, errorBox(e), " Reconnecting…") });
}
