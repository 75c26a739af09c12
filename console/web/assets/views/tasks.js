// Tasks deployed to one project and domain, a page at a time, each with
// its latest version and latest run.
import { h, replace } from "../lib/dom.js";
import { call } from "../lib/api.js";
import { errorBox, phaseBadge, timeEl, ownerName } from "../lib/ui.js";

const PAGE = 50;

export default async function render(main, params, ctx) {
  const { domain, project } = params;
  const base = `/v2/domain/${encodeURIComponent(domain)}/project/${encodeURIComponent(project)}`;
  ctx.setCrumbs([["Projects", "/v2/projects"], [`${project} (${domain})`, base + "/runs"], ["Tasks"]]);
  const body = h("tbody");
  const status = h("div", { "aria-live": "polite" });
  const more = h("button", { type: "button", id: "more", hidden: true }, "Load more");
  main.append(
    h("div", { class: "toolbar" }, h("h1", { class: "grow" }, "Tasks"), h("a", { href: base + "/runs", class: "button" }, "Runs")),
    status,
    h("div", { class: "scroll" }, h("table", { id: "tasks" },
      h("thead", null, h("tr", null, h("th", null, "Task"), h("th", { class: "hide-narrow" }, "Description"),
        h("th", null, "Latest run"), h("th", { class: "hide-narrow" }, "Deployed"))),
      body)),
    more);

  let token = "";
  async function load() {
    more.disabled = true;
    try {
      const r = await call("task.TaskService", "ListTasks", {
        request: { limit: PAGE, token }, projectId: { organization: "", domain, name: project },
      }, { signal: ctx.signal });
      for (const t of r.tasks || []) body.append(row(t, base));
      token = r.token || "";
      more.hidden = !token;
      if (!body.children.length) body.append(h("tr", null, h("td", { colspan: 4, class: "muted" }, "No tasks deployed here yet.")));
    } finally {
      more.disabled = false;
    }
  }
  more.addEventListener("click", () => load().catch((e) => { if (e.name !== "AbortError") replace(status, errorBox(e)); }));
  await load();
}

function row(t, base) {
  const id = t.taskId || {};
  const md = t.metadata || {};
  const latest = t.taskSummary?.latestRun;
  return h("tr", { dataset: { task: id.name } },
    h("td", null, h("a", { href: `${base}/tasks/${encodeURIComponent(id.name)}` }, md.shortName || id.name),
      md.shortName && md.shortName !== id.name ? h("div", { class: "muted mono" }, id.name) : null),
    h("td", { class: "hide-narrow" }, md.shortDescription || h("span", { class: "muted" }, "—")),
    h("td", null, latest?.runId?.name
      ? [phaseBadge(latest.phase), " ", h("a", { href: `${base}/runs/${encodeURIComponent(latest.runId.name)}`, class: "mono" }, latest.runId.name)]
      : h("span", { class: "muted" }, "never run")),
    h("td", { class: "hide-narrow" }, timeEl(md.deployedAt), ownerName(md.deployedBy) ? h("div", { class: "muted" }, ownerName(md.deployedBy)) : null));
}
