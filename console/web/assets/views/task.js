// One task: its versions, the spec of the version shown (interface,
// resources, image, env, cache, retries, timeout), its recent runs and a
// launch form built from its interface.
import { h, replace, append } from "../lib/dom.js";
import { call } from "../lib/api.js";
import { errorBox, phaseBadge, timeEl, ownerName, durationMs, formatDuration } from "../lib/ui.js";
import { launchForm } from "./launch.js";

export default async function render(main, params, ctx) {
  const { domain, project, task } = params;
  const base = `/v2/domain/${encodeURIComponent(domain)}/project/${encodeURIComponent(project)}`;
  const taskBase = `${base}/tasks/${encodeURIComponent(task)}`;
  const name = { org: "", project, domain, name: task };
  const versions = (await call("task.TaskService", "ListVersions", { taskName: name, request: { limit: 20 } }, { signal: ctx.signal })).versions || [];
  const version = params.version || versions[0]?.version;
  ctx.setCrumbs([["Projects", "/v2/projects"], [`${project} (${domain})`, base + "/runs"], ["Tasks", base + "/tasks"], [task]]);
  if (!version) {
    main.append(h("h1", null, task), h("p", { class: "muted" }, "No version of this task is deployed."));
    return;
  }
  const taskId = { ...name, version };
  const { details } = await call("task.TaskService", "GetTaskDetails", { taskId }, { signal: ctx.signal });
  const spec = details?.spec || {};
  const tmpl = spec.taskTemplate || {};
  const doc = spec.documentation || {};

  const launchArea = h("div", { id: "launch-area" });
  const launchButton = h("button", { type: "button", class: "primary", id: "launch", "aria-expanded": "false" }, "Launch");
  launchButton.addEventListener("click", async () => {
    if (launchArea.childNodes.length) {
      replace(launchArea);
      launchButton.setAttribute("aria-expanded", "false");
      return;
    }
    launchButton.setAttribute("aria-expanded", "true");
    try {
      launchArea.append(await launchForm(spec, taskId, { project, domain, base }, ctx));
      launchArea.querySelector("input, select, textarea, button")?.focus();
    } catch (e) {
      if (e.name !== "AbortError") replace(launchArea, errorBox(e));
    }
  });

  append(main, [ // dom.js's append skips the nulls of absent parts
    h("div", { class: "toolbar" }, h("h1", { class: "grow", id: "task-name" }, spec.shortName || task), launchButton),
    h("p", { class: "muted mono" }, task, " · version ", h("span", { id: "task-version" }, version)),
    doc.shortDescription ? h("p", { id: "task-description" }, doc.shortDescription) : null,
    doc.longDescription && doc.longDescription !== doc.shortDescription ? h("pre", { id: "task-doc" }, doc.longDescription) : null,
    launchArea,
    h("h2", null, "Interface"),
    h("div", { class: "grid" },
      h("section", { class: "card", id: "inputs" }, h("h3", null, "Inputs"), variables(tmpl.interface?.inputs, spec.defaultInputs)),
      h("section", { class: "card", id: "outputs" }, h("h3", null, "Outputs"), variables(tmpl.interface?.outputs))),
    h("h2", null, "Spec"),
    specList(tmpl, spec),
    h("h2", null, "Recent runs"),
    await recentRuns(taskId, base, ctx),
    h("h2", null, "Versions"),
    versionList(versions, version, taskBase)]);
}

/** A literal type as a reader would write it in Python-ish notation. */
export function typeName(lt) {
  if (!lt) return "none";
  if (lt.simple) return lt.simple === "STRUCT" ? (lt.metadata?.title || "object") : lt.simple.toLowerCase();
  if (lt.collectionType) return `list[${typeName(lt.collectionType)}]`;
  if (lt.mapValueType) return `dict[str, ${typeName(lt.mapValueType)}]`;
  if (lt.blob) return lt.blob.dimensionality === "MULTIPART" ? "Dir" : "File";
  if (lt.structuredDatasetType) return "DataFrame";
  if (lt.enumType) return `enum(${(lt.enumType.values || []).join(", ")})`;
  if (lt.unionType) return (lt.unionType.variants || []).map(typeName).join(" | ");
  if (lt.schema) return "schema";
  return "unknown";
}

function variables(map, defaults) {
  const vars = map?.variables || [];
  if (!vars.length) return h("p", { class: "muted" }, "None.");
  const withDefault = new Set((defaults || []).map((d) => d.name));
  return h("dl", { class: "kv" }, vars.map((v) => [
    h("dt", { class: "mono" }, v.key),
    h("dd", null, h("code", null, typeName(v.value?.type)), withDefault.has(v.key) ? h("span", { class: "muted" }, " (has a default)") : null,
      v.value?.description && v.value.description !== v.key ? h("div", { class: "muted" }, v.value.description) : null),
  ]));
}

function resources(r) {
  const fmt = (entries) => (entries || []).map((e) => `${(e.name || "").toLowerCase()} ${e.value}`).join(", ");
  const parts = [];
  if (r?.requests?.length) parts.push("requests: " + fmt(r.requests));
  if (r?.limits?.length) parts.push("limits: " + fmt(r.limits));
  return parts.join("; ") || null;
}

function specList(tmpl, spec) {
  const c = tmpl.container || tmpl.k8sPod?.podSpec?.containers?.[0] || {};
  const md = tmpl.metadata || {};
  const env = [...(c.env || []), ...Object.entries(spec.environment?.env || {}).map(([key, value]) => ({ key, value }))];
  const cache = md.discoverable
    ? ["on", md.discoveryVersion ? ` (version ${md.discoveryVersion})` : "", md.cacheSerializable ? ", serialized" : "",
      md.cacheIgnoreInputVars?.length ? `, ignores ${md.cacheIgnoreInputVars.join(", ")}` : ""].join("")
    : "off";
  const item = (label, value, id) => [h("dt", null, label), h("dd", { dataset: { spec: id } }, value ?? h("span", { class: "muted" }, "—"))];
  return h("dl", { class: "kv", id: "spec" },
    item("Type", tmpl.type, "type"),
    item("Environment", spec.environment?.name || null, "environment"),
    item("Image", c.image ? h("code", null, c.image) : null, "image"),
    item("Resources", resources(c.resources), "resources"),
    item("Env", env.length ? h("ul", null, env.map((e) => h("li", { class: "mono" }, `${e.key}=${e.value}`))) : null, "env"),
    item("Cache", cache, "cache"),
    item("Retries", String(md.retries?.retries ?? 0), "retries"),
    item("Timeout", md.timeout ? formatDuration(durationMs(md.timeout)) : null, "timeout"),
    item("Queue", md.tags?.queue || null, "queue"));
}

async function recentRuns(taskId, base, ctx) {
  const r = await call("workflow.RunService", "ListRuns", {
    request: { limit: 10, sortByFields: [{ key: "created_at", direction: "DESCENDING" }] },
    taskName: { org: taskId.org, project: taskId.project, domain: taskId.domain, name: taskId.name },
  }, { signal: ctx.signal });
  const runs = r.runs || [];
  if (!runs.length) return h("p", { class: "muted", id: "task-runs" }, "No runs yet.");
  return h("div", { class: "scroll" }, h("table", { id: "task-runs" },
    h("thead", null, h("tr", null, h("th", null, "Run"), h("th", null, "Phase"), h("th", null, "Started"), h("th", { class: "hide-narrow" }, "Version"))),
    h("tbody", null, runs.map((run) => {
      const a = run.action || {};
      const name = a.id?.run?.name || "";
      return h("tr", { dataset: { run: name } },
        h("td", null, h("a", { href: `${base}/runs/${encodeURIComponent(name)}`, class: "mono" }, name)),
        h("td", null, phaseBadge(a.status?.phase)),
        h("td", null, timeEl(a.status?.startTime)),
        h("td", { class: "hide-narrow mono" }, a.metadata?.task?.id?.version || ""));
    }))));
}

function versionList(versions, current, taskBase) {
  return h("ul", { id: "versions" }, versions.map((v) => h("li", { dataset: { version: v.version } },
    v.version === current
      ? h("strong", { class: "mono", "aria-current": "page" }, v.version)
      : h("a", { href: `${taskBase}/${encodeURIComponent(v.version)}`, class: "mono" }, v.version),
    " ", h("span", { class: "muted" }, "deployed "), timeEl(v.deployedAt),
    ownerName(v.deployedBy) ? h("span", { class: "muted" }, " by " + ownerName(v.deployedBy)) : null,
    v.latestRun?.phase ? [" · last run ", phaseBadge(v.latestRun.phase)] : null)));
}
