// What the apps views share: an app's status (its newest condition, as the
// SDK and the official console read it), a badge for it, and its links.
import { h } from "../lib/dom.js";

/** The newest condition: conditions are kept newest last. */
export function lastCondition(app) {
  const c = app?.status?.conditions || [];
  return c.length ? c[c.length - 1] : null;
}

/** "DEPLOYMENT_STATUS_ACTIVE" → "Active". */
export function statusLabel(status) {
  const s = (status || "DEPLOYMENT_STATUS_UNSPECIFIED").replace("DEPLOYMENT_STATUS_", "").toLowerCase().replaceAll("_", " ");
  return s.charAt(0).toUpperCase() + s.slice(1);
}

// Colours borrowed from the run phases: serving is green, on its way blue,
// failed red, stopped grey.
const TONE = {
  DEPLOYMENT_STATUS_ACTIVE: "succeeded", DEPLOYMENT_STATUS_STARTED: "succeeded",
  DEPLOYMENT_STATUS_DEPLOYING: "running", DEPLOYMENT_STATUS_PENDING: "queued", DEPLOYMENT_STATUS_ASSIGNED: "queued",
  DEPLOYMENT_STATUS_SCALING_UP: "running", DEPLOYMENT_STATUS_SCALING_DOWN: "running",
  DEPLOYMENT_STATUS_FAILED: "failed",
};

/** The app's status as a badge; its substate (e.g. "scaled to zero") beside it. */
export function statusBadge(app) {
  const c = lastCondition(app);
  const status = c?.deploymentStatus || "DEPLOYMENT_STATUS_UNSPECIFIED";
  const sub = c?.substate && c.substate !== "SUBSTATE_UNSPECIFIED" ? c.substate.toLowerCase().replaceAll("_", " ") : "";
  return h("span", { class: "app-status", dataset: { status } },
    h("span", { class: ["phase", "phase-" + (TONE[status] || "unspecified")] }, statusLabel(status)),
    sub ? h("span", { class: "muted substate" }, " ", sub) : null);
}

/** Whether the app is meant to run (what start/stop toggles). */
export function wantsRunning(app) {
  return app?.spec?.desiredState !== "DESIRED_STATE_STOPPED";
}

/** "2 of 1–3": replicas serving now, of the spec's min–max. */
export function replicasText(app) {
  const cur = app?.status?.currentReplicas || 0;
  const r = app?.spec?.autoscaling?.replicas;
  if (!r) return String(cur);
  const min = r.min || 0, max = r.max || 0;
  return `${cur} of ${min === max ? max : `${min}–${max}`}`;
}

/** The app's public URL as a link (text when it has none or not http(s)). */
export function urlLink(app) {
  const url = app?.status?.ingress?.publicUrl || "";
  if (!url) return h("span", { class: "muted" }, "—");
  return h("a", { href: url, class: "mono public-url", target: "_blank", rel: "noopener noreferrer" }, url);
}

/** An app's key in maps: project/domain/name. */
export function appKey(app) {
  const id = app?.metadata?.id || {};
  return `${id.project}/${id.domain}/${id.name}`;
}
