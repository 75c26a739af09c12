// Triggers of one project and domain: each with its schedule, an active
// switch (UpdateTriggers), its next and latest firings and the last runs it
// made. The next firing is the manager's (the Fm-Trigger-Next-Firing header
// of ListTriggers: the IDL has no field for it); the console computes no
// schedule itself.
import { h, replace } from "../lib/dom.js";
import { call, callWithHeaders } from "../lib/api.js";
import { errorBox, phaseBadge, timeEl } from "../lib/ui.js";

const RUNS = 5; // runs shown per trigger
const NEXT_FIRING = "Fm-Trigger-Next-Firing"; // one per trigger listed, in order; "-" for none

export default async function render(main, params, ctx) {
  const { domain, project } = params;
  const base = `/v2/domain/${encodeURIComponent(domain)}/project/${encodeURIComponent(project)}`;
  ctx.setCrumbs([["Projects", "/v2/projects"], [`${project} (${domain})`, base + "/runs"], ["Triggers"]]);
  const body = h("tbody");
  const status = h("div", { "aria-live": "polite" });
  main.append(
    h("div", { class: "toolbar" }, h("h1", { class: "grow" }, "Triggers"), h("a", { href: base + "/tasks", class: "button" }, "Tasks")),
    h("p", { class: "muted" }, "Deploy triggers with their task: ", h("code", null, "flyte deploy"), "."),
    status,
    h("div", { class: "scroll" }, h("table", { id: "triggers" },
      h("thead", null, h("tr", null, h("th", null, "Trigger"), h("th", null, "Schedule"), h("th", null, "Active"),
        h("th", null, "Next firing"), h("th", null, "Latest firing"), h("th", { class: "hide-narrow" }, "Runs it made"))),
      body)));
  const projectId = { organization: "", domain, name: project };
  const triggers = [];
  let token = "";
  do {
    const { message: r, headers } = await callWithHeaders("trigger.TriggerService", "ListTriggers", { request: { limit: 100, token }, projectId }, { signal: ctx.signal });
    const next = (headers.get(NEXT_FIRING) || "").split(",");
    (r.triggers || []).forEach((t, i) => triggers.push({ ...t, nextFiring: next[i] && next[i] !== "-" ? next[i] : "" }));
    token = r.token || "";
  } while (token);
  if (!triggers.length) {
    body.append(h("tr", null, h("td", { colspan: 6, class: "muted" }, "No triggers deployed here yet.")));
    return;
  }
  const rows = [];
  for (const t of triggers) {
    const runs = h("td", { class: "hide-narrow runs" }, h("span", { class: "muted" }, "…"));
    const r = row(t, base, runs, status, ctx.signal);
    rows.push(r);
    body.append(r.tr);
    r.loadRuns();
  }
  // Once a trigger's next firing has passed, ask the manager again: the
  // latest firing, the next one and the runs move on while the page is open.
  const tick = setInterval(() => { for (const r of rows) r.refreshIfDue(); }, 2000);
  ctx.signal.addEventListener("abort", () => clearInterval(tick));
}

function row(t, base, runs, status, signal) {
  const name = t.id?.name || {};
  let nextAt = t.nextFiring ? Date.parse(t.nextFiring) : 0;
  let refreshing = false;
  const fired = h("td", { class: "fired" }, timeEl(t.status?.triggeredAt));
  const loadRuns = () => madeRuns(name, base, signal)
    .then((el) => replace(runs, el))
    .catch((e) => { if (e.name !== "AbortError") replace(runs, errorBox(e)); });
  const showNext = (headers, active) => {
    const at = headers.get(NEXT_FIRING) || "-";
    nextAt = at === "-" ? 0 : Date.parse(at);
    replace(next, nextFiring(at === "-" ? "" : at, active));
  };
  const refreshIfDue = () => {
    if (!nextAt || refreshing || Date.now() < nextAt + 1500) return;
    refreshing = true;
    callWithHeaders("trigger.TriggerService", "GetTriggerDetails", { name }, { signal })
      .then(({ message, headers }) => {
        replace(fired, timeEl(message.trigger?.status?.triggeredAt));
        showNext(headers, toggle.checked);
        loadRuns();
      })
      .catch((e) => { if (e.name !== "AbortError") nextAt = 0; }) // leave it; a reload asks again
      .finally(() => { refreshing = false; });
  };
  const toggle = h("input", { type: "checkbox", class: "active", "aria-label": `Active: ${name.name}` });
  toggle.checked = !!t.active;
  const state = h("span", null, t.active ? "on" : "off");
  const next = h("td", { class: "next" }, nextFiring(t.nextFiring, t.active));
  toggle.addEventListener("change", async () => {
    toggle.disabled = true;
    try {
      await call("trigger.TriggerService", "UpdateTriggers", { names: [name], active: toggle.checked });
      replace(status);
      // Activation restarts a schedule's count: ask when it fires now.
      callWithHeaders("trigger.TriggerService", "GetTriggerDetails", { name }, { signal })
        .then(({ headers }) => showNext(headers, toggle.checked))
        .catch((e) => { if (e.name !== "AbortError") replace(next, errorBox(e)); });
    } catch (e) {
      toggle.checked = !toggle.checked;
      replace(status, errorBox(e));
    } finally {
      toggle.disabled = false;
      state.textContent = toggle.checked ? "on" : "off";
    }
  });
  const tr = h("tr", { dataset: { trigger: name.name, task: name.taskName } },
    h("td", null, h("span", { class: "mono" }, name.name),
      h("div", { class: "muted" }, h("a", { href: `${base}/tasks/${encodeURIComponent(name.taskName)}` }, name.taskName))),
    h("td", { class: "schedule" }, describe(t.automationSpec)),
    h("td", null, h("label", null, toggle, " ", state)),
    next,
    fired,
    runs);
  return { tr, loadRuns, refreshIfDue };
}

// nextFiring shows when a trigger fires next: a time, or why it does not.
function nextFiring(at, active) {
  if (at) return timeEl(at);
  return h("span", { class: "muted" }, active ? "not scheduled" : "switched off");
}

// describe says when a trigger fires, as the SDK's CLI words it.
function describe(a) {
  const s = a?.schedule;
  if (!a || a.type === "TYPE_NONE" || !a.type || !s) return h("span", { class: "muted" }, "by name only");
  if (s.cron) return `cron ${s.cron.expression} (${s.cron.timezone || "UTC"})`;
  if (s.cronExpression) return `cron ${s.cronExpression} (UTC)`;
  if (s.rate) {
    const unit = (s.rate.unit || "FIXED_RATE_UNIT_MINUTE").replace("FIXED_RATE_UNIT_", "").toLowerCase();
    const n = s.rate.value || 0;
    return `every ${n} ${unit}${n === 1 ? "" : "s"}` + (s.rate.startTime ? ` from ${s.rate.startTime}` : "");
  }
  return a.type;
}

async function madeRuns(name, base, signal) {
  const r = await call("workflow.RunService", "ListRuns", {
    request: { limit: RUNS, sortBy: { key: "created_at", direction: "DESCENDING" } }, triggerName: name,
  }, { signal });
  const runs = r.runs || [];
  if (!runs.length) return h("span", { class: "muted" }, "none yet");
  return h("ul", { class: "plain" }, runs.map((run) => {
    const id = run.action?.id?.run?.name || "";
    return h("li", { dataset: { run: id } }, phaseBadge(run.action?.status?.phase), " ",
      h("a", { href: `${base}/runs/${encodeURIComponent(id)}`, class: "mono" }, id));
  }));
}
