// The selected action's panel: its details followed live
// (WatchActionDetails) and the tabs Summary, Inputs, Outputs, Logs, Report
// and Task. The tab is in the URL query next to the action (?action=&tab=).
import { h, replace } from "../../lib/dom.js";
import { call, follow, stream } from "../../lib/api.js";
import { setQuery } from "../../lib/router.js";
import { errorBox, phaseBadge, timeEl, formatDuration, elapsedMs, isTerminal } from "../../lib/ui.js";
import { literalsTable } from "../../lib/literals.js";
import { logsView } from "./logs.js";
import { actionLabel } from "./tree.js";
import { conditionSection } from "./condition.js";

const TABS = [["summary", "Summary"], ["inputs", "Inputs"], ["outputs", "Outputs"], ["logs", "Logs"], ["report", "Report"], ["task", "Task"]];

/**
 * actionPanel(actionId, tab, signal, onDetails) is the panel's element; it
 * follows the action's details until signal aborts, passing each to
 * onDetails (the timeline draws the attempts).
 */
export function actionPanel(actionId, tab, signal, onDetails) {
  let current = TABS.some(([k]) => k === tab) ? tab : "summary";
  let details = null;
  let shownKey = ""; // what the open tab was drawn from, to redraw only on change
  const title = h("h2", { class: "grow" }, actionId.name);
  const abort = h("button", { type: "button", id: "abort-action", class: "danger", hidden: true, onclick: onAbort }, "Abort action");
  const status = h("div", { "aria-live": "polite" });
  const tabs = TABS.map(([key, label]) => h("button", {
    type: "button", role: "tab", id: "tab-" + key, "aria-controls": "tab-panel", dataset: { tab: key },
    onclick: () => select(key),
  }, label));
  const tablist = h("div", { role: "tablist", class: "tabs", "aria-label": "Action details" }, tabs);
  tablist.addEventListener("keydown", (e) => {
    const i = TABS.findIndex(([k]) => k === current);
    const j = e.key === "ArrowRight" ? i + 1 : e.key === "ArrowLeft" ? i - 1 : null;
    if (j === null) return;
    const next = TABS[(j + TABS.length) % TABS.length][0];
    select(next);
    tabs.find((t) => t.dataset.tab === next).focus();
    e.preventDefault();
  });
  const body = h("div", { role: "tabpanel", id: "tab-panel", class: "tab-panel", tabindex: 0 });
  let tabCtrl = null; // aborts what the open tab streams (logs) when it changes

  async function onAbort() {
    if (!confirm(`Abort action ${actionId.name}?`)) return;
    abort.disabled = true;
    try {
      await call("workflow.RunService", "AbortAction", { actionId, reason: "aborted from the console" }, { signal });
    } catch (e) {
      replace(status, errorBox(e));
      abort.disabled = false;
    }
  }

  function select(key) {
    current = key;
    setQuery({ tab: key === "summary" ? "" : key });
    draw(true);
  }

  function draw(force) {
    for (const t of tabs) {
      const on = t.dataset.tab === current;
      t.setAttribute("aria-selected", String(on));
      t.tabIndex = on ? 0 : -1;
    }
    body.setAttribute("aria-labelledby", "tab-" + current);
    body.dataset.tab = current;
    if (!details) return;
    const st = details.status || {};
    // Summary and Task redraw on every change; the others only when what
    // they show could have changed (an attempt started, the action ended,
    // for Logs an attempt reported its log links).
    const links = current === "logs" ? (details.attempts || []).map((a) => (a.logInfo || []).length).join(",") : "";
    const key = current === "summary" || current === "task" ? JSON.stringify(details)
      : `${current}/${(details.attempts || []).length}/${isTerminal(st.phase)}/${links}`;
    if (!force && key === shownKey) return;
    shownKey = key;
    tabCtrl?.abort();
    tabCtrl = new AbortController();
    const tabSignal = tabCtrl.signal;
    signal.addEventListener("abort", () => tabCtrl.abort(), { once: true });
    replace(body, tabContent(current, details, actionId, tabSignal));
  }

  follow(
    () => streamDetails(actionId, signal),
    (d) => {
      details = d;
      title.textContent = actionLabel(d) || actionId.name;
      abort.hidden = isTerminal(d.status?.phase) || actionId.name === "a0";
      abort.disabled = false;
      onDetails(d);
      draw(false);
    },
    signal,
    { onError: (e) => replace(status, errorBox(e)), onOpen: () => replace(status) },
  );
  draw(true);
  return h("section", { class: "panel", id: "action-panel", dataset: { action: actionId.name } },
    h("div", { class: "toolbar" }, title, abort), status, tablist, body);
}

async function* streamDetails(actionId, signal) {
  for await (const msg of stream("workflow.RunService", "WatchActionDetails", { actionId }, { signal })) {
    if (msg.details) yield msg.details;
  }
}

function tabContent(tab, d, actionId, signal) {
  switch (tab) {
    case "summary": return summary(d);
    case "inputs": return data(actionId, "inputs", signal);
    case "outputs": return isTerminal(d.status?.phase) ? data(actionId, "outputs", signal) : h("p", { class: "muted" }, "Outputs are written when the action ends.");
    case "logs": return logsView(actionId, d.attempts, signal);
    case "report": return report(actionId, d, signal);
    case "task": return d.task ? h("pre", { class: "lit-pre", id: "task-spec" }, JSON.stringify(d.task, null, 2))
      : h("pre", { class: "lit-pre", id: "task-spec" }, JSON.stringify(d.trace || d.condition || {}, null, 2));
  }
  return null;
}

function summary(d) {
  const st = d.status || {};
  const err = d.errorInfo;
  const rows = [
    ["Phase", phaseBadge(st.phase)],
    ["Started", timeEl(st.startTime)],
    ["Ended", timeEl(st.endTime)],
    ["Duration", st.startTime ? formatDuration(elapsedMs(st.startTime, st.endTime)) : "—"],
    ["Attempts", String(st.attempts || (d.attempts || []).length || 0)],
    ["Cache", cacheLabel(st.cacheStatus)],
  ];
  if (d.metadata?.recoveredFrom) rows.push(["Recovered from", `${d.metadata.recoveredFrom.run?.name}/${d.metadata.recoveredFrom.name}`]);
  if (d.abortInfo) rows.push(["Aborted", d.abortInfo.reason || "yes"]);
  return h("div", { id: "summary" },
    h("dl", { class: "run-facts" }, rows.map(([k, v]) => [h("dt", null, k), h("dd", null, v)])),
    conditionSection(d),
    err ? h("div", { class: "error", role: "alert", id: "action-error" },
      h("strong", null, kindLabel(err.kind), err.code ? ` (${err.code})` : ""), h("pre", { class: "lit-pre" }, err.message || "")) : null,
    attemptsTable(d.attempts || []));
}

function kindLabel(kind) {
  return { KIND_USER: "User error", KIND_SYSTEM: "System error" }[kind] || "Error";
}

function cacheLabel(s) {
  if (!s || s === "CACHE_DISABLED") return "not cached";
  return s.replace("CACHE_", "").toLowerCase().replaceAll("_", " ");
}

function attemptsTable(attempts) {
  if (!attempts.length) return null;
  return h("table", { class: "attempts" },
    h("caption", null, "Attempts"),
    h("thead", null, h("tr", null, ["#", "Phase", "Started", "Duration", "Cache", "Error"].map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", null, attempts.map((a) => h("tr", { dataset: { attempt: a.attempt } },
      h("td", null, String(a.attempt)), h("td", null, phaseBadge(a.phase)), h("td", null, timeEl(a.startTime)),
      h("td", null, a.startTime ? formatDuration(elapsedMs(a.startTime, a.endTime)) : "—"),
      h("td", null, cacheLabel(a.cacheStatus)), h("td", null, a.errorInfo?.message || "")))));
}

function data(actionId, which, signal) {
  const box = h("div", { id: which }, h("p", { class: "muted" }, "Loading…"));
  call("workflow.RunService", "GetActionData", { actionId }, { signal })
    .then((r) => replace(box, literalsTable(r[which]?.literals, { empty: which === "inputs" ? "No inputs." : "No outputs." })))
    .catch((e) => { if (!signal.aborted) replace(box, errorBox(e)); });
  return box;
}

function report(actionId, d, signal) {
  // A task made with report=True says so in its metadata (generates_deck);
  // the manager keeps each attempt's report.html next to its outputs.
  const wants = d.task?.taskTemplate?.metadata?.generatesDeck === true || (d.attempts || []).some((a) => a.outputs?.reportUri);
  const attempts = (d.attempts || []).map((a) => a.attempt).filter(Boolean);
  if (!wants || !attempts.length) return h("p", { class: "muted", id: "report" }, "This action has no report.");
  const attempt = Math.max(...attempts);
  const box = h("div", { id: "report" }, h("p", { class: "muted" }, "Loading…"));
  (async () => {
    const r = await call("dataproxy.DataProxyService", "CreateDownloadLink", {
      artifactType: "ARTIFACT_TYPE_REPORT", actionAttemptId: { actionId, attempt },
    }, { signal });
    const url = r.preSignedUrls?.signedUrl?.[0];
    if (!url) throw new Error("the manager gave no link for the report");
    // The report is written when the task flushes it: ask before framing a 404.
    const head = await fetch(url, { method: "HEAD", signal, credentials: "same-origin" });
    if (!head.ok) {
      replace(box, h("p", { class: "muted" }, isTerminal(d.status?.phase) ? "The task wrote no report." : "No report yet: the task has not written one."));
      return;
    }
    // Reports are HTML the task wrote, with the SDK's script for its tabs:
    // scripts may run, but in an opaque origin, never with the console's.
    const frame = h("iframe", { class: "report", src: url, sandbox: "allow-scripts", title: `Report of ${actionId.name}`, referrerpolicy: "no-referrer" });
    frame.addEventListener("load", () => { frame.dataset.loaded = "true"; }, { once: true });
    replace(box, frame,
      h("p", null, h("a", { href: url, download: `${actionId.name}-report.html` }, "Download the report")));
  })().catch((e) => { if (!signal.aborted) replace(box, errorBox(e)); });
  return box;
}
