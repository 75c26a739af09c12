// Secrets: the names (and scope, type, creation time) of the secrets a
// project's tasks can read. The API never returns a value, and neither does
// this page; values are set with `flyte create secret`.
import { h, replace } from "../lib/dom.js";
import { call } from "../lib/api.js";
import { errorBox, timeEl } from "../lib/ui.js";

export default async function render(main, { domain, project }, ctx) {
  const runs = `/v2/domain/${encodeURIComponent(domain)}/project/${encodeURIComponent(project)}/runs`;
  ctx.setCrumbs([["Projects", "/v2/projects"], [project, runs], ["Secrets"]]);
  main.append(h("h1", null, "Secrets"),
    h("p", { class: "muted" }, "Names only: the manager never returns a secret's value. ",
      "Create or change one with ", h("code", null, "flyte create secret"), "."));
  // ListSecrets at a scope also answers every narrower scope's secrets:
  // list the org's and keep those a task of this project can read.
  const section = h("section", { class: "secret-scope" });
  main.append(section);
  try {
    const all = await listAll({}, ctx.signal);
    const visible = all.filter((x) => (!x.id?.domain || x.id.domain === domain) && (!x.id?.project || x.id.project === project));
    replace(section, table(visible, domain, project));
  } catch (e) {
    if (e.name !== "AbortError") section.append(errorBox(e));
  }
}

async function listAll(scope, signal) {
  const out = [];
  let token = "";
  do {
    const r = await call("secret.SecretService", "ListSecrets", { ...scope, limit: 100, token }, { signal });
    out.push(...(r.secrets || []));
    token = r.token || "";
  } while (token);
  return out;
}

// scopeOf names who can read a secret. A task reads the narrowest secret of
// a name: its project's, then its domain's, then the org-wide one.
function scopeOf(id, domain, project) {
  if (id?.project) return `project ${project}`;
  if (id?.domain) return `every project in ${domain}`;
  return "every project";
}

function table(secrets, domain, project) {
  if (!secrets.length) return h("p", { class: "muted" }, "No secrets for this project.");
  return h("div", { class: "scroll" }, h("table", null,
    h("thead", null, h("tr", null, h("th", null, "Name"), h("th", null, "Scope"), h("th", null, "Type"), h("th", null, "Created"))),
    h("tbody", null, secrets.map((s) => h("tr", { dataset: { secret: s.id?.name || "" } },
      h("td", { class: "mono" }, s.id?.name || ""),
      h("td", { class: "scope" }, scopeOf(s.id, domain, project)),
      h("td", null, s.secretMetadata?.type === "SECRET_TYPE_IMAGE_PULL_SECRET" ? "image pull" : "generic"),
      h("td", null, timeEl(s.secretMetadata?.createdTime)))))));
}
