// The launch form of a task version: TranslatorService turns the task's
// spec into a JSON Schema of its inputs (defaults filled in), the form is
// built from that, and on submit the values become literals
// (JsonValuesToLiterals against the task's input variables) for CreateRun,
// which runs the deployed task by id as `flyte run deployed-task` does.
import { h, replace } from "../lib/dom.js";
import { call } from "../lib/api.js";
import { errorBox } from "../lib/ui.js";

/** launchForm(spec, taskId, {project, domain, base}, ctx) → a <form>. */
export async function launchForm(spec, taskId, where, ctx) {
  const { json } = await call("workflow.TranslatorService", "TaskSpecToLaunchFormJson", { taskSpec: spec }, { signal: ctx.signal });
  const props = json?.properties || {};
  const required = new Set(json?.required || []);
  const inputs = spec.taskTemplate?.interface?.inputs || { variables: [] };
  const order = (inputs.variables || []).map((v) => v.key).filter((k) => k in props);
  for (const k of Object.keys(props)) if (!order.includes(k)) order.push(k);

  const fields = order.map((name) => field(name, props[name], required.has(name)));
  const status = h("div", { "aria-live": "polite", id: "launch-status" });
  const submit = h("button", { type: "submit", class: "primary" }, "Start run");
  const form = h("form", { class: "launch card", id: "launch-form", novalidate: true },
    h("h2", null, "Launch ", h("span", { class: "mono" }, taskId.name)),
    fields.length ? fields.map((f) => f.el) : h("p", { class: "muted" }, "This task takes no inputs."),
    h("div", { class: "toolbar" }, submit), status);

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    replace(status);
    const values = {};
    try {
      for (const f of fields) {
        const v = f.value();
        if (v !== undefined) values[f.name] = v;
      }
    } catch (err) {
      replace(status, errorBox(err));
      return;
    }
    submit.disabled = true;
    try {
      const { literals } = await call("workflow.TranslatorService", "JsonValuesToLiterals", { variables: inputs, values }, { signal: ctx.signal });
      const { run } = await call("workflow.RunService", "CreateRun", {
        projectId: { organization: taskId.org || "", domain: where.domain, name: where.project },
        taskId,
        inputs: { literals: literals || [] },
        source: "RUN_SOURCE_WEB",
      }, { signal: ctx.signal });
      const name = run?.action?.id?.run?.name;
      ctx.navigate(`${where.base}/runs/${encodeURIComponent(name)}`);
    } catch (err) {
      if (err.name === "AbortError") return;
      submit.disabled = false;
      replace(status, errorBox(err));
    }
  });
  return form;
}

// A schema that is a union with None: the input may be left empty.
function nonNull(schema) {
  const variants = schema.oneOf || schema.anyOf;
  if (!variants) return { schema, optional: false };
  const rest = variants.filter((v) => v.type !== "null");
  return { schema: rest.length === 1 ? { ...rest[0], default: schema.default } : { ...schema, oneOf: rest }, optional: rest.length < variants.length };
}

/** One input: its control and how to read the JSON value back. */
function field(name, raw, required) {
  const { schema, optional } = nonNull(raw || {});
  const id = "in-" + name;
  const def = schema.default ?? raw?.default;
  const label = h("span", null, name, h("span", { class: "muted" }, ` · ${describe(schema)}${required ? " · required" : ""}${optional ? " · optional" : ""}`));
  const help = schema.description || raw?.description;
  const hint = help ? h("small", { class: "muted", id: id + "-help" }, help) : null;
  const describedBy = hint ? id + "-help" : null;
  let control, read;
  const empty = (s) => s.trim() === "";
  const missing = () => {
    if (optional) return null;
    if (required) throw new Error(`${name} is required`);
    return undefined;
  };

  if (schema.enum) {
    control = h("select", { id, name, "aria-describedby": describedBy },
      optional || def === undefined ? h("option", { value: "" }, "—") : null,
      schema.enum.map((v) => h("option", { value: String(v), selected: v === def }, String(v))));
    read = () => (control.value === "" ? missing() : schema.enum.find((v) => String(v) === control.value));
  } else if (schema.type === "boolean") {
    control = h("input", { id, name, type: "checkbox", checked: def === true, "aria-describedby": describedBy });
    read = () => control.checked;
    return { name, el: h("label", { class: "check", for: id }, control, label, hint), value: read };
  } else if (schema.type === "integer" || schema.type === "number") {
    control = h("input", { id, name, type: "number", step: schema.type === "integer" ? "1" : "any", value: def ?? "", "aria-describedby": describedBy });
    read = () => {
      if (empty(control.value)) return missing();
      const n = Number(control.value);
      if (!Number.isFinite(n) || (schema.type === "integer" && !Number.isInteger(n))) throw new Error(`${name}: ${control.value} is not ${schema.type === "integer" ? "an integer" : "a number"}`);
      return n;
    };
  } else if (schema.type === "string") {
    control = h("input", { id, name, type: "text", value: def ?? "", "aria-describedby": describedBy,
      placeholder: schema.format === "datetime" ? "2026-01-02T03:04:05Z" : schema.format === "duration" ? "1h30m" : null });
    read = () => (control.value === "" && (optional || required) && def === undefined ? missing() : control.value);
  } else { // lists, dicts, dataclasses, files: their JSON
    control = h("textarea", { id, name, spellcheck: "false", "aria-describedby": describedBy });
    control.value = def === undefined ? "" : JSON.stringify(def, null, 2);
    read = () => {
      if (empty(control.value)) return missing();
      try { return JSON.parse(control.value); } catch { throw new Error(`${name}: not valid JSON`); }
    };
  }
  return { name, el: h("label", { class: "field", for: id }, label, control, hint), value: read };
}

function describe(s) {
  if (s.format === "blob") return "file (JSON: uri, format)";
  if (s.enum) return "one of " + s.enum.join(", ");
  if (s.type === "array") return "list (JSON)";
  if (s.type === "object") return (s.dataclass || "object") + " (JSON)";
  if (s.oneOf) return "union (JSON)";
  return [s.type, s.format].filter(Boolean).join(", ") || "value";
}
