// A condition action (flyte.new_condition) in the action panel: its
// prompt, description and timeout, and while it waits (PAUSED) a form with
// an input of its declared type that sends RunService.SignalEvent; once
// signalled, the value. The prompt is shown as text, Markdown included: a
// prompt is the task's text, never markup for the console.
import { h, replace } from "../../lib/dom.js";
import { call } from "../../lib/api.js";
import { errorBox, durationMs, formatDuration } from "../../lib/ui.js";
import { literal } from "../../lib/literals.js";

// The payload field of each declared type (SignalEventRequest.payload).
const FIELDS = { BOOLEAN: "boolValue", INTEGER: "intValue", FLOAT: "floatValue", STRING: "stringValue" };
const TYPE_LABELS = { BOOLEAN: "bool", INTEGER: "int", FLOAT: "float", STRING: "str" };

/** conditionSection(d) is what the summary shows of a condition action d (null for others). */
export function conditionSection(d) {
  const c = d.condition;
  if (!c) return null;
  const type = c.type?.simple || "";
  const facts = [["Condition", c.name || "—"], ["Type", TYPE_LABELS[type] || type || "—"]];
  if (c.timeout) facts.push(["Timeout", formatDuration(durationMs(c.timeout))]);
  const paused = d.status?.phase === "ACTION_PHASE_PAUSED";
  return h("section", { id: "condition", dataset: { type } },
    h("h3", null, paused ? "Waiting for a signal" : "Condition"),
    c.prompt ? h("p", { class: "condition-prompt", id: "condition-prompt" }, c.prompt) : null,
    c.description ? h("p", { class: "muted" }, c.description) : null,
    h("dl", { class: "run-facts" }, facts.map(([k, v]) => [h("dt", null, k), h("dd", null, v)])),
    d.signalInfo ? h("p", { id: "signalled" }, "Signalled with ", literal(d.signalInfo.output)) : null,
    paused ? signalForm(d, type) : null);
}

function signalForm(d, type) {
  const field = FIELDS[type];
  if (!field) return h("p", { class: "muted" }, `This console cannot send a value of type ${type || "unknown"}.`);
  let input;
  switch (type) {
    case "BOOLEAN":
      input = h("select", { id: "signal-value", name: "value" },
        h("option", { value: "true" }, "True"), h("option", { value: "false" }, "False"));
      break;
    case "INTEGER":
      input = h("input", { id: "signal-value", name: "value", type: "number", step: "1", required: true });
      break;
    case "FLOAT":
      input = h("input", { id: "signal-value", name: "value", type: "number", step: "any", required: true });
      break;
    default:
      input = h("textarea", { id: "signal-value", name: "value", rows: 2 });
  }
  const status = h("div", { "aria-live": "polite", id: "signal-status" });
  const send = h("button", { type: "submit", id: "signal-send" }, "Signal");
  const form = h("form", { id: "signal-form", class: "toolbar" },
    h("label", { class: "field" }, h("span", null, "Value"), input), send, status);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const value = payloadValue(type, input.value);
    if (value === undefined) {
      replace(status, h("p", { class: "error", role: "alert" }, `Enter a ${TYPE_LABELS[type]}.`));
      return;
    }
    send.disabled = true;
    try {
      await call("workflow.RunService", "SignalEvent", {
        actionId: d.id, parentActionName: d.metadata?.parent || "", payload: { [field]: value },
      });
      replace(status, h("p", { class: "muted" }, "Signalled."));
    } catch (err) {
      replace(status, errorBox(err));
      send.disabled = false;
    }
  });
  return form;
}

// payloadValue is the form's text as the payload's protojson value
// (int64 as a decimal string), undefined when it is not one.
function payloadValue(type, text) {
  switch (type) {
    case "BOOLEAN": return text === "true";
    case "INTEGER": return /^-?\d+$/.test(text.trim()) ? text.trim() : undefined;
    case "FLOAT": {
      const n = Number(text);
      return text.trim() !== "" && Number.isFinite(n) ? n : undefined;
    }
    default: return text;
  }
}
