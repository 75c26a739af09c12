// Projects: every project with a link to its runs in each domain; create,
// archive and restore.
import { h, replace } from "../lib/dom.js";
import { call } from "../lib/api.js";
import { errorBox } from "../lib/ui.js";

const ARCHIVED = "PROJECT_STATE_ARCHIVED";

export default async function render(main, _params, ctx) {
  ctx.setCrumbs([["Projects"]]);
  const list = h("div", { class: "grid", id: "projects" });
  const status = h("div", { "aria-live": "polite" });
  const showArchived = h("input", { type: "checkbox", id: "show-archived" });
  main.append(
    h("div", { class: "toolbar" },
      h("h1", { class: "grow" }, "Projects"),
      h("label", null, showArchived, " Show archived")),
    createForm(() => load()),
    status, list);

  async function load() {
    const projects = [];
    let token = "";
    do { // a handful of projects per manager: read them all
      const r = await call("project.ProjectService", "ListProjects", { limit: 100, token }, { signal: ctx.signal });
      projects.push(...(r.projects?.projects || []));
      token = r.projects?.token || "";
    } while (token);
    const shown = projects.filter((p) => showArchived.checked || p.state !== ARCHIVED);
    replace(list, shown.length ? shown.map((p) => card(p, load, status)) : h("p", { class: "muted" }, "No projects."));
  }
  showArchived.addEventListener("change", () => load().catch((e) => replace(status, errorBox(e))));
  await load();
}

function card(p, reload, status) {
  const archived = p.state === ARCHIVED;
  const domains = p.domains || [];
  const toggle = h("button", {
    type: "button",
    onclick: async () => {
      toggle.disabled = true;
      try {
        await call("project.ProjectService", "UpdateProject", { project: { ...p, state: archived ? "PROJECT_STATE_ACTIVE" : ARCHIVED } });
        await reload();
      } catch (e) {
        replace(status, errorBox(e));
        toggle.disabled = false;
      }
    },
  }, archived ? "Restore" : "Archive");
  return h("section", { class: "card", dataset: { project: p.id } },
    h("h2", null, p.name || p.id, archived ? h("span", { class: "muted" }, " (archived)") : null),
    p.description ? h("p", null, p.description) : null,
    h("p", { class: "muted mono" }, p.id),
    h("ul", null, domains.map((d) => h("li", null,
      h("a", { href: `/v2/domain/${encodeURIComponent(d.id)}/project/${encodeURIComponent(p.id)}/runs` }, `${d.name || d.id}: runs`), " · ",
      h("a", { href: `/v2/domain/${encodeURIComponent(d.id)}/project/${encodeURIComponent(p.id)}/tasks` }, "tasks"), " · ",
      h("a", { href: `/v2/domain/${encodeURIComponent(d.id)}/project/${encodeURIComponent(p.id)}/triggers` }, "triggers"), " · ",
      h("a", { href: `/v2/domain/${encodeURIComponent(d.id)}/project/${encodeURIComponent(p.id)}/apps` }, "apps"), " · ",
      h("a", { href: `/v2/domain/${encodeURIComponent(d.id)}/project/${encodeURIComponent(p.id)}/secrets` }, "secrets")))),
    toggle);
}

function createForm(onCreated) {
  const id = h("input", { name: "id", required: true, pattern: "[a-z0-9]([-a-z0-9]*[a-z0-9])?", placeholder: "my-project", "aria-label": "Project id" });
  const name = h("input", { name: "name", placeholder: "Display name (optional)", "aria-label": "Display name" });
  const description = h("input", { name: "description", placeholder: "Description (optional)", "aria-label": "Description" });
  const status = h("div", { "aria-live": "polite" });
  const form = h("form", { class: "toolbar", id: "create-project" }, id, name, description,
    h("button", { type: "submit", class: "primary" }, "Create project"), status);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    replace(status);
    try {
      await call("project.ProjectService", "CreateProject", {
        project: { id: id.value.trim(), name: name.value.trim() || id.value.trim(), description: description.value.trim() },
      });
      form.reset();
      await onCreated();
    } catch (err) {
      replace(status, errorBox(err));
    }
  });
  return h("details", null, h("summary", null, "New project"), form);
}
