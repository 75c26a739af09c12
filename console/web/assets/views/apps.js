// Apps of one project and domain: name, status (the newest condition),
// public URL, replicas and revision, listed with AppService.List and kept
// live with AppService.Watch (its snapshot, then every change), as the
// runs list follows WatchRuns.
import { h, replace } from "../lib/dom.js";
import { call, follow, stream } from "../lib/api.js";
import { errorBox, timeEl } from "../lib/ui.js";
import { appKey, lastCondition, replicasText, statusBadge, urlLink } from "./app_status.js";

export default async function render(main, params, ctx) {
  const { domain, project } = params;
  const base = `/v2/domain/${encodeURIComponent(domain)}/project/${encodeURIComponent(project)}`;
  ctx.setCrumbs([["Projects", "/v2/projects"], [`${project} (${domain})`, base + "/runs"], ["Apps"]]);
  const status = h("div", { "aria-live": "polite" });
  const live = h("span", { class: "muted", id: "live", "aria-live": "polite" }, "");
  const body = h("tbody");
  main.append(
    h("div", { class: "toolbar" }, h("h1", { class: "grow" }, "Apps"), live, h("a", { href: base + "/runs", class: "button" }, "Runs")),
    h("p", { class: "muted" }, "Deploy an app with ", h("code", null, "flyte deploy"), " or ", h("code", null, "flyte serve"), "."),
    status,
    h("div", { class: "scroll" }, h("table", { id: "apps" },
      h("thead", null, h("tr", null, h("th", null, "App"), h("th", null, "Status"), h("th", null, "URL"),
        h("th", null, "Replicas"), h("th", { class: "hide-narrow" }, "Revision"), h("th", { class: "hide-narrow" }, "Since"))),
      body)));

  const projectId = { organization: "", domain, name: project };
  const rows = new Map(); // project/domain/name → tr
  const empty = () => { if (!rows.size) replace(body, h("tr", null, h("td", { colspan: 6, class: "muted" }, "No apps deployed here yet."))); };
  const upsert = (app) => {
    if (app?.metadata?.id?.domain !== domain) return; // a project watch covers every domain
    const k = appKey(app);
    const tr = row(app, base);
    const known = rows.get(k);
    if (!rows.size) replace(body);
    rows.set(k, tr);
    if (known) known.replaceWith(tr);
    else body.append(tr);
  };
  const remove = (app) => {
    const k = appKey(app);
    rows.get(k)?.remove();
    rows.delete(k);
    empty();
  };

  try {
    let token = "";
    do {
      const r = await call("app.AppService", "List", { request: { limit: 100, token }, project: projectId }, { signal: ctx.signal });
      for (const a of r.apps || []) upsert(a);
      token = r.token || "";
    } while (token);
    empty();
  } catch (e) {
    if (e.name === "AbortError") return;
    replace(status, errorBox(e));
  }

  follow(() => stream("app.AppService", "Watch", { project: projectId }, { signal: ctx.signal }),
    (msg) => {
      replace(live, "Live");
      if (msg.createEvent?.app) upsert(msg.createEvent.app);
      if (msg.updateEvent?.updatedApp) upsert(msg.updateEvent.updatedApp);
      if (msg.deleteEvent?.app) remove(msg.deleteEvent.app);
    },
    ctx.signal,
    { onError: () => replace(live, "Reconnecting…") });
}

function row(app, base) {
  const id = app.metadata?.id || {};
  const c = lastCondition(app);
  return h("tr", { dataset: { app: id.name || "" } },
    h("td", null, h("a", { href: `${base}/apps/${encodeURIComponent(id.name || "")}`, class: "mono" }, id.name || "")),
    h("td", { class: "status" }, statusBadge(app)),
    h("td", { class: "url" }, urlLink(app)),
    h("td", { class: "replicas" }, replicasText(app)),
    h("td", { class: "hide-narrow revision" }, String(app.metadata?.revision || "—")),
    h("td", { class: "hide-narrow" }, timeEl(c?.lastTransitionTime)));
}
