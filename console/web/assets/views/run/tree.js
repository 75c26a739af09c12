// The action tree: parents and their children, with the children that share
// a group or a task (a fan-out) folded into one row that counts them by
// phase ("100 × square: 97 succeeded, 3 running") until it is expanded.
// The tree is a WAI-ARIA tree: arrow keys move, Right/Left expand and
// collapse, Enter or Space selects.
import { h, replace } from "../../lib/dom.js";
import { phaseBadge, phaseLabel, formatDuration, elapsedMs, PHASES } from "../../lib/ui.js";

/** The name a person knows an action by: its task's short name, else its own. */
export function actionLabel(a) {
  const m = a.metadata || {};
  return m.task?.shortName || lastPart(m.task?.id?.name) || m.trace?.name || m.condition?.name || a.id?.name || "";
}

function lastPart(name) {
  return name ? name.split(".").pop() : "";
}

// Children sharing one of these keys fold into a group row when there are
// at least two of them.
function groupKey(a) {
  const m = a.metadata || {};
  if (m.group) return "group:" + m.group;
  return "task:" + (m.task?.id?.name || m.trace?.name || m.condition?.name || a.id?.name);
}

/** children(actions) indexes a run's actions by their parent's name ("" for the root). */
export function childrenIndex(actions) {
  const byParent = new Map();
  for (const a of actions.values()) {
    const p = a.metadata?.parent || "";
    if (!byParent.has(p)) byParent.set(p, []);
    byParent.get(p).push(a);
  }
  for (const list of byParent.values()) list.sort(byStart);
  return byParent;
}

function byStart(x, y) {
  const sx = x.status?.startTime || "", sy = y.status?.startTime || "";
  if (sx !== sy) return sx < sy ? -1 : 1;
  return (x.id?.name || "").localeCompare(y.id?.name || "", undefined, { numeric: true });
}

/** Counts of a list of actions by phase, in the order PHASES lists them. */
export function phaseCounts(list) {
  const counts = new Map();
  for (const a of list) {
    const p = a.status?.phase || "ACTION_PHASE_UNSPECIFIED";
    counts.set(p, (counts.get(p) || 0) + 1);
  }
  return [...counts].sort(([a], [b]) => PHASES.indexOf(a) - PHASES.indexOf(b));
}

function countsText(list) {
  return phaseCounts(list).map(([p, n]) => `${n} ${phaseLabel(p).toLowerCase()}`).join(", ");
}

/**
 * The visible rows, depth first: {kind: "action", action, depth} and
 * {kind: "group", key, label, members, depth, expanded}.
 */
export function visibleRows(actions, expanded) {
  const byParent = childrenIndex(actions);
  const rows = [];
  const seen = new Set();
  const walk = (parent, depth) => {
    const kids = byParent.get(parent) || [];
    const buckets = new Map();
    for (const a of kids) {
      const k = groupKey(a);
      if (!buckets.has(k)) buckets.set(k, []);
      buckets.get(k).push(a);
    }
    for (const members of buckets.values()) {
      if (members.length < 2) { actionRow(members[0], depth); continue; }
      const key = `g:${parent}/${groupKey(members[0])}`;
      const open = expanded.has(key);
      const m0 = members[0].metadata || {};
      rows.push({ kind: "group", key, label: m0.group || actionLabel(members[0]), members, depth, expanded: open });
      if (open) for (const a of members) actionRow(a, depth + 1);
    }
  };
  const actionRow = (a, depth) => {
    const name = a.id?.name;
    if (seen.has(name)) return; // a cycle in bad data must not hang the page
    seen.add(name);
    const hasKids = byParent.has(name);
    const key = "a:" + name;
    const open = hasKids && !expanded.has("c:" + name); // actions start open, groups closed
    rows.push({ kind: "action", key, action: a, depth, hasKids, expanded: open });
    if (open) walk(name, depth + 1);
  };
  // Roots: the run's root action, and any action whose parent is unknown (yet).
  const roots = [...actions.values()].filter((a) => !a.metadata?.parent || !actions.has(a.metadata.parent)).sort(byStart);
  for (const r of roots) actionRow(r, 0);
  return rows;
}

/**
 * renderTree(el, actions, state) draws the tree into el. state: {expanded
 * (a Set of group keys opened and "c:<name>" of actions closed), selected
 * (an action name), onSelect(name), onToggle()}. It keeps keyboard focus on
 * the row that had it.
 */
export function renderTree(el, actions, state) {
  const focusedKey = el.contains(document.activeElement) ? document.activeElement.dataset.key : null;
  const rows = visibleRows(actions, state.expanded);
  const items = rows.map((r) => r.kind === "group" ? groupItem(r, state) : actionItem(r, state));
  replace(el, items);
  el.setAttribute("role", "tree");
  el.setAttribute("aria-label", "Actions");
  const target = (focusedKey && el.querySelector(`[data-key="${CSS.escape(focusedKey)}"]`))
    || el.querySelector('[aria-selected="true"]') || el.firstElementChild;
  for (const item of el.children) item.tabIndex = item === target ? 0 : -1;
  if (focusedKey && target) target.focus({ preventScroll: true });
  if (!el.dataset.keys) {
    el.dataset.keys = "1";
    el.addEventListener("keydown", (e) => onKey(e, el, state));
  }
}

function toggle(state, key) {
  if (state.expanded.has(key)) state.expanded.delete(key);
  else state.expanded.add(key);
  state.onToggle();
}

function twisty(expanded, onClick, label) {
  return h("button", { type: "button", class: "twisty", "aria-label": (expanded ? "Collapse " : "Expand ") + label, tabindex: -1, onclick: (e) => { e.stopPropagation(); onClick(); } },
    expanded ? "▾" : "▸");
}

function actionItem(r, state) {
  const a = r.action, name = a.id?.name || "";
  const st = a.status || {};
  const label = actionLabel(a);
  const selected = state.selected === name;
  const closeKey = "c:" + name;
  return h("div", {
    role: "treeitem", class: ["tree-row", selected && "selected"], "aria-level": r.depth + 1,
    "aria-selected": selected ? "true" : "false", "aria-expanded": r.hasKids ? String(r.expanded) : null,
    dataset: { key: r.key, action: name, phase: st.phase || "" }, style: { paddingLeft: `${r.depth * 1.2 + 0.3}rem` },
    onclick: () => state.onSelect(name),
  },
  r.hasKids ? twisty(r.expanded, () => toggle(state, closeKey), label) : h("span", { class: "twisty-space" }),
  h("span", { class: "tree-name" }, label),
  label !== name ? h("span", { class: "muted mono tree-id" }, name) : null,
  phaseBadge(st.phase),
  st.attempts > 1 ? h("span", { class: "muted" }, `${st.attempts} attempts`) : null,
  h("span", { class: "muted tree-dur" }, st.startTime ? formatDuration(elapsedMs(st.startTime, st.endTime)) : ""));
}

function groupItem(r, state) {
  const text = `${r.members.length} × ${r.label}: ${countsText(r.members)}`;
  return h("div", {
    role: "treeitem", class: "tree-row tree-group", "aria-level": r.depth + 1, "aria-expanded": String(r.expanded),
    "aria-selected": "false", dataset: { key: r.key, group: r.label, count: r.members.length },
    style: { paddingLeft: `${r.depth * 1.2 + 0.3}rem` }, onclick: () => toggle(state, r.key),
  },
  twisty(r.expanded, () => toggle(state, r.key), r.label),
  h("span", { class: "tree-name group-counts" }, text));
}

function onKey(e, el, state) {
  const items = [...el.children];
  const i = items.indexOf(document.activeElement);
  if (i < 0) return;
  const item = items[i];
  const move = (j) => {
    const next = items[Math.max(0, Math.min(items.length - 1, j))];
    item.tabIndex = -1;
    next.tabIndex = 0;
    next.focus();
  };
  const expanded = item.getAttribute("aria-expanded");
  const isGroup = !!item.dataset.group;
  const key = isGroup ? item.dataset.key : "c:" + item.dataset.action;
  switch (e.key) {
    case "ArrowDown": move(i + 1); break;
    case "ArrowUp": move(i - 1); break;
    case "Home": move(0); break;
    case "End": move(items.length - 1); break;
    case "ArrowRight":
      if (expanded === "false") toggle(state, key);
      else if (expanded === "true") move(i + 1);
      break;
    case "ArrowLeft":
      if (expanded === "true") toggle(state, key);
      else { // to the parent row: the nearest row above with a lower level
        const level = Number(item.getAttribute("aria-level"));
        for (let j = i - 1; j >= 0; j--) if (Number(items[j].getAttribute("aria-level")) < level) { move(j); break; }
      }
      break;
    case "Enter": case " ":
      if (isGroup) toggle(state, key);
      else state.onSelect(item.dataset.action);
      break;
    default: return;
  }
  e.preventDefault();
}
