// The run's header: name, task, live phase, times and owner, and the run's
// buttons: abort, rerun and recover.
import { h, replace } from "../../lib/dom.js";
import { call } from "../../lib/api.js";
import { errorBox, phaseBadge, timeEl, formatDuration, elapsedMs, isTerminal } from "../../lib/ui.js";
import { actionLabel } from "./tree.js";

/** header(runId, ctx) is {el, update(runDetails)}. */
export function header(runId, ctx) {
  const title = h("h1", { class: "grow mono", id: "run-name" }, runId.name);
  const facts = h("dl", { class: "run-facts", id: "run-facts" });
  const status = h("div", { "aria-live": "polite", id: "run-status" });
  let details = null;

  const abort = h("button", { type: "button", id: "abort-run", class: "danger", onclick: onAbort }, "Abort run");
  const rerun = h("button", { type: "button", id: "rerun", onclick: () => again(false) }, "Rerun");
  const recover = h("button", {
    type: "button", id: "recover", onclick: () => again(true),
    title: "A new run with the same inputs that reuses what succeeded in this one",
  }, "Recover");

  async function onAbort() {
    if (!confirm(`Abort run ${runId.name}? Every action still running is stopped.`)) return;
    abort.disabled = true;
    replace(status);
    try {
      await call("workflow.RunService", "AbortRun", { runId, reason: "aborted from the console" }, { signal: ctx.signal });
      replace(status, h("p", { class: "muted" }, "Abort requested."));
    } catch (e) {
      replace(status, errorBox(e));
      abort.disabled = false;
    }
  }

  async function again(recovering) {
    rerun.disabled = recover.disabled = true;
    replace(status, h("p", { class: "muted" }, recovering ? "Recovering…" : "Starting a rerun…"));
    try {
      const run = await rerunRun(runId, recovering, ctx.signal);
      const id = run.action.id.run;
      ctx.navigate(`/v2/domain/${encodeURIComponent(id.domain)}/project/${encodeURIComponent(id.project)}/runs/${encodeURIComponent(id.name)}`);
    } catch (e) {
      if (e.name === "AbortError") return;
      replace(status, errorBox(e));
      rerun.disabled = recover.disabled = false;
    }
  }

  const el = h("header", { class: "run-header" },
    h("div", { class: "toolbar" }, title, h("span", { id: "run-phase" }), abort, rerun, recover),
    facts, status);

  function update(d) {
    details = d;
    const a = d.action || {};
    const st = a.status || {};
    replace(el.querySelector("#run-phase"), phaseBadge(st.phase));
    el.dataset.phase = st.phase || "";
    abort.hidden = isTerminal(st.phase);
    // The SDK refuses to recover a run that has not ended; so does the manager.
    recover.disabled = rerun.disabled = false;
    recover.hidden = !isTerminal(st.phase);
    const owner = a.metadata?.executedBy;
    replace(facts,
      fact("Task", h("span", { class: "mono" }, a.metadata?.task?.id?.name || actionLabel(a))),
      fact("Started", timeEl(st.startTime)),
      fact("Duration", h("span", { id: "run-duration" }, st.startTime ? formatDuration(elapsedMs(st.startTime, st.endTime)) : "—")),
      fact("Owner", ownerText(owner)),
      d.runSpec?.relation?.relatedTo ? fact(relationLabel(d.runSpec.relation.relationType), runLink(d.runSpec.relation.relatedTo)) : null);
  }

  // The duration of a running run ticks.
  const tick = setInterval(() => {
    const st = details?.action?.status;
    const span = el.querySelector("#run-duration");
    if (st?.startTime && !st.endTime && span) span.textContent = formatDuration(elapsedMs(st.startTime));
  }, 1000);
  ctx.signal.addEventListener("abort", () => clearInterval(tick));

  return { el, update };
}

function fact(label, value) {
  return [h("dt", null, label), h("dd", null, value)];
}

function ownerText(who) {
  if (!who) return h("span", { class: "muted" }, "—");
  const u = who.user, app = who.application;
  if (u) return u.spec?.email || [u.spec?.firstName, u.spec?.lastName].filter(Boolean).join(" ") || u.id?.subject || "user";
  if (app) return app.spec?.name || app.id?.subject || "application";
  return h("span", { class: "muted" }, "—");
}

function relationLabel(type) {
  return { RELATION_TYPE_RERUN: "Rerun of", RELATION_TYPE_RECOVER: "Recovered from", RELATION_TYPE_SPAWN: "Spawned by" }[type] || "Related to";
}

function runLink(id) {
  return h("a", { href: `/v2/domain/${encodeURIComponent(id.domain)}/project/${encodeURIComponent(id.project)}/runs/${encodeURIComponent(id.name)}`, class: "mono" }, id.name);
}

/**
 * rerunRun makes a new run the way the SDK's `rerun` does: the source
 * root's task spec and inputs, the source's run spec without the fields that
 * describe where it came from, and a relation naming the source (RERUN, or
 * RECOVER so the manager reuses what succeeded).
 */
export async function rerunRun(runId, recovering, signal) {
  const { details } = await call("workflow.RunService", "GetRunDetails", { runId }, { signal });
  const root = details.action;
  if (!root?.task) throw new Error(`run ${runId.name} has no task spec to run again`);
  const data = await call("workflow.RunService", "GetActionData", { actionId: root.id }, { signal });
  const runSpec = { ...(details.runSpec || {}) };
  // Provenance belongs to one run: a rerun of a rerun names its own source.
  delete runSpec.relation;
  delete runSpec.relatedTo;
  delete runSpec.recover;
  runSpec.relation = { relatedTo: runId, relationType: recovering ? "RELATION_TYPE_RECOVER" : "RELATION_TYPE_RERUN" };
  const { run } = await call("workflow.RunService", "CreateRun", {
    projectId: { organization: runId.org || "", domain: runId.domain, name: runId.project },
    taskSpec: root.task,
    inputs: data.inputs || {},
    runSpec,
    source: "RUN_SOURCE_WEB",
  }, { signal });
  return run;
}
