// One app: its status, URL, replicas and revision, kept live by
// AppService.Watch{app_id}; Start and Stop (what the official console
// sends: Get, then Update of that app with desired_state ACTIVE or
// STOPPED); its conditions, newest first; and its replicas' live logs.
import { h, replace } from "../lib/dom.js";
import { call, follow, stream } from "../lib/api.js";
import { errorBox, timeEl } from "../lib/ui.js";
import { lastCondition, replicasText, statusBadge, statusLabel, urlLink, wantsRunning } from "./app_status.js";
import { appLogs } from "./app_logs.js";

export default async function render(main, params, ctx) {
  const { domain, project, app: name } = params;
  const base = `/v2/domain/${encodeURIComponent(domain)}/project/${encodeURIComponent(project)}`;
  ctx.setCrumbs([["Projects", "/v2/projects"], [`${project} (${domain})`, base + "/runs"], ["Apps", base + "/apps"], [name]]);
  const appId = { org: "", project, domain, name };
  // Read it first: a missing app is an error page, with no stream opened.
  const { app } = await call("app.AppService", "Get", { appId }, { signal: ctx.signal });
  const status = h("div", { "aria-live": "polite", id: "app-status" });
  const live = h("span", { class: "muted", id: "live", "aria-live": "polite" }, "");
  const toggle = h("button", { type: "button", id: "app-toggle", disabled: true }, "…");
  const facts = h("dl", { class: "kv", id: "app-facts" });
  const conditions = h("tbody");
  main.append(
    h("div", { class: "toolbar" }, h("h1", { class: "grow" }, name), live, toggle),
    status, facts,
    h("h2", null, "Conditions"),
    h("div", { class: "scroll" }, h("table", { id: "app-conditions" },
      h("thead", null, h("tr", null, h("th", null, "When"), h("th", null, "Status"), h("th", null, "Revision"), h("th", null, "Message"))),
      conditions)),
    h("h2", null, "Logs"),
    appLogs(appId, ctx.signal));

  let current = null;
  const show = (app) => {
    current = app;
    replace(facts, ...fact("Status", statusBadge(app)), ...fact("URL", urlLink(app)),
      ...fact("Replicas", h("span", { id: "app-replicas" }, replicasText(app))),
      ...fact("Revision", h("span", { id: "app-revision" }, String(app.metadata?.revision || "—"))),
      ...fact("Desired", wantsRunning(app) ? "running" : "stopped"),
      ...fact("Updated", timeEl(app.status?.lastUpdatedAt || lastCondition(app)?.lastTransitionTime)));
    replace(conditions, ...[...(app.status?.conditions || [])].reverse().map((c) =>
      h("tr", { dataset: { status: c.deploymentStatus || "" } },
        h("td", null, timeEl(c.lastTransitionTime)),
        h("td", null, statusLabel(c.deploymentStatus), c.substate && c.substate !== "SUBSTATE_UNSPECIFIED" ? h("span", { class: "muted" }, " ", c.substate.toLowerCase().replaceAll("_", " ")) : null),
        h("td", null, String(c.revision || "")),
        h("td", { class: "message" }, c.message || ""))));
    if (!toggle.dataset.busy) {
      toggle.disabled = false;
      toggle.textContent = wantsRunning(app) ? "Stop" : "Start";
      toggle.dataset.op = wantsRunning(app) ? "stop" : "start";
    }
  };

  // Start/stop as the official console does: the app as Get returns it,
  // spec echoed back intact but for its desired state.
  toggle.addEventListener("click", async () => {
    const stop = toggle.dataset.op === "stop";
    toggle.disabled = true;
    toggle.dataset.busy = "1";
    try {
      const { app } = await call("app.AppService", "Get", { appId }, { signal: ctx.signal });
      if (!app?.spec) throw new Error("the app came back without its spec; reload and try again");
      app.spec.desiredState = stop ? "DESIRED_STATE_STOPPED" : "DESIRED_STATE_ACTIVE";
      const r = await call("app.AppService", "Update", { app, reason: stop ? "Stopped from the console" : "Started from the console" }, { signal: ctx.signal });
      replace(status);
      delete toggle.dataset.busy;
      show(r.app || app);
    } catch (e) {
      if (e.name === "AbortError") return;
      delete toggle.dataset.busy;
      replace(status, errorBox(e));
      if (current) show(current);
    }
  });

  show(app);
  // The watch ends for good when the app is deleted (the view's own end
  // aborts it too).
  const watch = new AbortController();
  ctx.signal.addEventListener("abort", () => watch.abort(), { once: true });
  follow(() => stream("app.AppService", "Watch", { appId }, { signal: watch.signal }),
    (msg) => {
      replace(live, "Live");
      const a = msg.updateEvent?.updatedApp || msg.createEvent?.app;
      if (a?.metadata) show(a);
      if (msg.deleteEvent) {
        replace(status, h("div", { class: "error", role: "alert" }, "This app was deleted."));
        replace(live);
        toggle.disabled = true;
        toggle.dataset.busy = "1"; // no start or stop of an app that is gone
        watch.abort();
      }
    },
    watch.signal,
    { onError: () => replace(live, "Reconnecting…") });
}

function fact(label, value) {
  return [h("dt", null, label), h("dd", null, value)];
}
