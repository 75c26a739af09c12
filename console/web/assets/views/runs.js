// Runs of one project and domain, newest first: filters kept in the query
// string, pages read by token ("Load more", never everything), and live
// updates from WatchRuns for the rows on screen and new runs that match.
import { h, replace } from "../lib/dom.js";
import { call, follow, stream } from "../lib/api.js";
import { setQuery } from "../lib/router.js";
import { errorBox, phaseBadge, PHASES, phaseLabel, timeEl, formatDuration, elapsedMs, isTerminal, ownerName } from "../lib/ui.js";
import { pausedRuns, markPaused } from "./runs_paused.js";

const PAGE = 50;

export default async function render(main, params, ctx) {
  const { domain, project } = params;
  const base = `/v2/domain/${encodeURIComponent(domain)}/project/${encodeURIComponent(project)}`;
  ctx.setCrumbs([["Projects", "/v2/projects"], [`${project} (${domain})`, base + "/runs"], ["Runs"]]);
  const q = new URLSearchParams(location.search);
  const filters = {
    phase: q.get("phase") || "", task: q.get("task") || "", owner: q.get("owner") || "",
    after: q.get("after") || "", before: q.get("before") || "", paused: q.get("paused") || "",
  };

  const status = h("div", { "aria-live": "polite", id: "runs-status" });
  const live = h("span", { class: "muted", id: "live", "aria-live": "polite" }, "");
  const body = h("tbody");
  const table = h("div", { class: "scroll" }, h("table", { id: "runs" },
    h("thead", null, h("tr", null, h("th", null, "Run"), h("th", null, "Task"), h("th", null, "Phase"),
      h("th", null, "Started"), h("th", { class: "hide-narrow" }, "Duration"), h("th", { class: "hide-narrow" }, "Owner"))),
    body));
  const more = h("button", { type: "button", id: "more", hidden: true }, "Load more");
  main.append(
    h("div", { class: "toolbar" }, h("h1", { class: "grow" }, "Runs"), live,
      h("a", { href: base + "/tasks", class: "button" }, "Tasks")),
    filterForm(filters, () => reload()),
    status, table, more);

  const rows = new Map(); // run name → {tr, run}
  const paused = pausedRuns({ organization: "", domain, name: project }, ctx.signal, (has) => {
    for (const [name, x] of rows) markPaused(x.tr, has(name));
  });
  let token = "";
  let generation = 0; // a reload makes pages of an older listing stale

  function request(pageToken) {
    const f = [];
    if (filters.phase) f.push({ function: "EQUAL", field: "phase", values: [filters.phase] });
    if (filters.task) f.push({ function: "EQUAL", field: "task_name", values: [filters.task] });
    if (filters.owner) f.push({ function: "EQUAL", field: "created_by", values: [filters.owner] });
    if (filters.after) f.push({ function: "GREATER_THAN_OR_EQUAL", field: "created_at", values: [new Date(filters.after).toISOString()] });
    if (filters.before) f.push({ function: "LESS_THAN", field: "created_at", values: [new Date(filters.before).toISOString()] });
    return {
      request: { limit: PAGE, token: pageToken, filters: f, sortByFields: [{ key: "created_at", direction: "DESCENDING" }] },
      projectId: { organization: "", domain, name: project },
      pausedActionsOnly: filters.paused === "1",
    };
  }

  async function loadPage(pageToken) {
    const gen = generation;
    more.disabled = true;
    try {
      const r = await call("workflow.RunService", "ListRuns", request(pageToken), { signal: ctx.signal });
      if (gen !== generation) return;
      for (const run of r.runs || []) upsert(run, false);
      token = r.token || "";
      paused.soon();
      more.hidden = !token;
      if (!rows.size) replace(body, h("tr", null, h("td", { colspan: 6, class: "muted" }, "No runs match.")));
    } finally {
      more.disabled = false;
    }
  }

  async function reload() {
    generation++;
    rows.clear();
    replace(body);
    replace(status);
    setQuery(filters);
    try { await loadPage(""); } catch (e) { if (e.name !== "AbortError") replace(status, errorBox(e)); }
  }

  // upsert shows run: its row is replaced in place, or a new row goes in
  // start-time order. A run the watch reports that is older than every row
  // on screen belongs to a page not loaded yet, unless this is the last page.
  function upsert(run, fromWatch) {
    const name = run.action?.id?.run?.name;
    if (!name) return;
    const known = rows.get(name);
    if (!known && fromWatch && (!matches(run, filters) || (token && olderThanAll(run)))) return;
    const tr = row(run, base);
    markPaused(tr, paused.has(name));
    if (known) {
      known.tr.replaceWith(tr);
      rows.set(name, { tr, run });
      return;
    }
    if (!rows.size) replace(body);
    rows.set(name, { tr, run });
    if (!fromWatch) { body.append(tr); return; }
    const t = startOf(run);
    const after = [...rows.values()].find((x) => x.tr !== tr && x.tr.isConnected && startOf(x.run) <= t);
    if (after) body.insertBefore(tr, after.tr); else body.append(tr);
  }

  function olderThanAll(run) {
    const t = startOf(run);
    for (const x of rows.values()) if (startOf(x.run) <= t) return false;
    return true;
  }

  more.addEventListener("click", () => loadPage(token).catch((e) => { if (e.name !== "AbortError") replace(status, errorBox(e)); }));
  await reload();

  // Durations of running runs advance while the page is open.
  const tick = setInterval(() => {
    for (const x of rows.values()) if (!isTerminal(x.run.action?.status?.phase)) x.tr.querySelector("[data-duration]")?.replaceChildren(duration(x.run));
  }, 1000);
  ctx.signal.addEventListener("abort", () => clearInterval(tick));

  follow(() => stream("workflow.RunService", "WatchRuns", { projectId: { organization: "", domain, name: project } }, { signal: ctx.signal }),
    (msg) => { replace(live, "Live"); for (const run of msg.runs || []) upsert(run, true); paused.soon(); },
    ctx.signal,
    { onError: () => replace(live, "Reconnecting…") });
}

function startOf(run) {
  return new Date(run.action?.status?.startTime || 0).getTime();
}

/** Whether a run the watch reported passes the filters on screen. */
function matches(run, f) {
  const a = run.action || {};
  if (f.phase && a.status?.phase !== f.phase) return false;
  if (f.paused) return false; // a new run is not known to wait yet: the next reload shows it
  if (f.task && a.metadata?.task?.id?.name !== f.task) return false;
  if (f.owner && (a.metadata?.executedBy?.user?.id?.subject || "") !== f.owner) return false;
  const t = startOf(run);
  if (f.after && t < new Date(f.after).getTime()) return false;
  if (f.before && t >= new Date(f.before).getTime()) return false;
  return true;
}

function duration(run) {
  const s = run.action?.status || {};
  if (s.durationMs) return formatDuration(Number(s.durationMs));
  return formatDuration(elapsedMs(s.startTime, s.endTime));
}

function row(run, base) {
  const a = run.action || {};
  const name = a.id?.run?.name || "";
  const task = a.metadata?.task;
  const taskName = task?.id?.name || a.metadata?.funtionName || "";
  return h("tr", { dataset: { run: name } },
    h("td", null, h("a", { href: `${base}/runs/${encodeURIComponent(name)}`, class: "mono" }, name)),
    h("td", null, taskName
      ? h("a", { href: `${base}/tasks/${encodeURIComponent(taskName)}` }, task?.shortName || taskName)
      : h("span", { class: "muted" }, "—")),
    h("td", { dataset: { phaseCell: "" } }, phaseBadge(a.status?.phase)),
    h("td", null, timeEl(a.status?.startTime)),
    h("td", { class: "hide-narrow", dataset: { duration: "" } }, duration(run)),
    h("td", { class: "hide-narrow" }, ownerName(a.metadata?.executedBy) || h("span", { class: "muted" }, "—")));
}

function filterForm(filters, onChange) {
  const phase = h("select", { id: "f-phase", name: "phase" }, h("option", { value: "" }, "Any phase"),
    PHASES.map((p) => h("option", { value: p, selected: filters.phase === p }, phaseLabel(p))));
  const task = h("input", { id: "f-task", name: "task", value: filters.task, placeholder: "e.g. hello.main" });
  const owner = h("input", { id: "f-owner", name: "owner", value: filters.owner, placeholder: "subject" });
  const after = h("input", { id: "f-after", name: "after", type: "datetime-local", value: filters.after });
  const before = h("input", { id: "f-before", name: "before", type: "datetime-local", value: filters.before });
  const waiting = h("input", { id: "f-paused", name: "paused", type: "checkbox", checked: filters.paused === "1" });
  const field = (label, input) => h("label", { class: "field" }, h("span", null, label), input);
  const form = h("form", { class: "toolbar filters", id: "run-filters", role: "search" },
    field("Phase", phase), field("Task", task), field("Owner", owner),
    field("Created after", after), field("Created before", before),
    h("label", { class: "field" }, h("span", null, "Waiting for input"), waiting),
    h("button", { type: "submit" }, "Filter"),
    h("button", { type: "reset" }, "Clear"));
  const apply = () => {
    Object.assign(filters, { phase: phase.value, task: task.value.trim(), owner: owner.value.trim(), after: after.value, before: before.value,
      paused: waiting.checked ? "1" : "" });
    onChange();
  };
  form.addEventListener("submit", (e) => { e.preventDefault(); apply(); });
  phase.addEventListener("change", apply);
  waiting.addEventListener("change", apply);
  form.addEventListener("reset", (e) => { // the defaults are the loaded filters: clear instead
    e.preventDefault();
    phase.value = "";
    for (const i of [task, owner, after, before]) i.value = "";
    waiting.checked = false;
    apply();
  });
  return form;
}
