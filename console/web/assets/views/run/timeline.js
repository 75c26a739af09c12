// The timeline: one bar per action from its start to its end (or now),
// placed relative to the run's start, and under the selected action one bar
// per attempt split into its phase transitions (queued, running...).
import { h, replace } from "../../lib/dom.js";
import { phaseLabel, formatDuration, elapsedMs } from "../../lib/ui.js";
import { actionLabel } from "./tree.js";

// More bars than this are not readable; the tree is the place for them.
const MAX_BARS = 300;

/**
 * renderTimeline(el, actions, {selected, attempts, onSelect}) draws the bars;
 * attempts are the selected action's ActionAttempts (from its details).
 */
export function renderTimeline(el, actions, { selected, attempts, onSelect }) {
  const list = [...actions.values()].filter((a) => a.status?.startTime)
    .sort((x, y) => (x.status.startTime < y.status.startTime ? -1 : 1));
  if (!list.length) {
    replace(el, h("p", { class: "muted" }, "Nothing has started yet."));
    return;
  }
  const now = Date.now();
  const t0 = Math.min(...list.map((a) => Date.parse(a.status.startTime)));
  const t1 = Math.max(now - 1, ...list.map((a) => (a.status.endTime ? Date.parse(a.status.endTime) : now)));
  const all = list.every((a) => a.status.endTime) ? Math.max(...list.map((a) => Date.parse(a.status.endTime))) : t1;
  const span = Math.max(1, all - t0);
  const place = (start, end) => {
    const s = Date.parse(start), e = end ? Date.parse(end) : now;
    return { left: `${((s - t0) / span) * 100}%`, width: `${Math.max(0.3, ((e - s) / span) * 100)}%` };
  };
  const shown = list.slice(0, MAX_BARS);
  const rows = [];
  for (const a of shown) {
    const st = a.status, name = a.id.name;
    const phase = (st.phase || "").replace("ACTION_PHASE_", "").toLowerCase();
    const dur = formatDuration(elapsedMs(st.startTime, st.endTime));
    rows.push(h("div", { class: ["tl-row", selected === name && "selected"], dataset: { action: name } },
      h("button", { type: "button", class: "tl-label link-button", onclick: () => onSelect(name) }, actionLabel(a), " ", h("span", { class: "muted mono" }, name)),
      h("div", { class: "tl-track" },
        h("div", { class: ["tl-bar", "phase-" + phase], style: place(st.startTime, st.endTime), title: `${name}: ${phaseLabel(st.phase)}, ${dur}` },
          h("span", { class: "tl-text" }, `${phaseLabel(st.phase)} · ${dur}`)))));
    if (selected === name) for (const at of attempts || []) rows.push(attemptRow(at, place));
  }
  replace(el,
    h("div", { class: "tl-axis muted" }, h("span", null, "0s"), h("span", null, formatDuration(span))),
    rows,
    list.length > shown.length ? h("p", { class: "muted" }, `${list.length - shown.length} more actions are in the tree.`) : null);
}

function attemptRow(at, place) {
  const transitions = at.phaseTransitions?.length ? at.phaseTransitions : at.startTime ? [{ phase: at.phase, startTime: at.startTime, endTime: at.endTime }] : [];
  return h("div", { class: "tl-row tl-attempt", dataset: { attempt: at.attempt } },
    h("span", { class: "tl-label muted" }, `attempt ${at.attempt}`),
    h("div", { class: "tl-track" }, transitions.filter((p) => p.startTime).map((p) => {
      const phase = (p.phase || "").replace("ACTION_PHASE_", "").toLowerCase();
      const dur = formatDuration(elapsedMs(p.startTime, p.endTime));
      return h("div", { class: ["tl-bar", "tl-segment", "phase-" + phase], style: place(p.startTime, p.endTime), title: `${phaseLabel(p.phase)} ${dur}` },
        h("span", { class: "tl-text" }, phaseLabel(p.phase)));
    })));
}
