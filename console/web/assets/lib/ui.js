// Small pieces every view shares: errors, phases, times and durations.
import { h } from "./dom.js";
import { ConnectError } from "./api.js";

/** errorBox(e) shows what went wrong in words a user can act on. */
export function errorBox(e) {
  const code = e instanceof ConnectError ? e.code : "internal";
  return h("div", { class: "error", role: "alert" }, h("strong", null, code.replaceAll("_", " ")), ": ", e.message || String(e));
}

// ActionPhase names as protojson spells them, and how the console shows them.
export const PHASES = [
  "ACTION_PHASE_QUEUED", "ACTION_PHASE_WAITING_FOR_RESOURCES", "ACTION_PHASE_INITIALIZING",
  "ACTION_PHASE_RUNNING", "ACTION_PHASE_SUCCEEDED", "ACTION_PHASE_FAILED", "ACTION_PHASE_ABORTED",
  "ACTION_PHASE_TIMED_OUT", "ACTION_PHASE_PAUSED", "ACTION_PHASE_RECOVERED",
];
const TERMINAL = new Set(["ACTION_PHASE_SUCCEEDED", "ACTION_PHASE_FAILED", "ACTION_PHASE_ABORTED", "ACTION_PHASE_TIMED_OUT", "ACTION_PHASE_RECOVERED"]);

/** "ACTION_PHASE_TIMED_OUT" → "Timed out". */
export function phaseLabel(phase) {
  const p = (phase || "ACTION_PHASE_UNSPECIFIED").replace("ACTION_PHASE_", "").toLowerCase().replaceAll("_", " ");
  return p.charAt(0).toUpperCase() + p.slice(1);
}

export function isTerminal(phase) {
  return TERMINAL.has(phase);
}

/** A phase as a badge; the class colours it, the text says it (not colour alone). */
export function phaseBadge(phase) {
  const p = (phase || "ACTION_PHASE_UNSPECIFIED").replace("ACTION_PHASE_", "").toLowerCase();
  return h("span", { class: ["phase", "phase-" + p], dataset: { phase: phase || "" } }, phaseLabel(phase));
}

/** A protojson Timestamp ("2026-12-02T03:04:05.123Z") in the reader's locale. */
export function formatTime(ts) {
  if (!ts) return "";
  const d = new Date(ts);
  return isNaN(d) ? String(ts) : d.toLocaleString();
}

/** A <time> element with the exact instant as its tooltip. */
export function timeEl(ts) {
  if (!ts) return h("span", { class: "muted" }, "—");
  return h("time", { datetime: ts, title: ts }, formatTime(ts));
}

/** Milliseconds between two timestamps (end defaults to now). */
export function elapsedMs(start, end) {
  if (!start) return 0;
  return Math.max(0, (end ? new Date(end) : new Date()) - new Date(start));
}

/** 1234 → "1.2s", 75000 → "1m 15s", 4000000 → "1h 6m". */
export function formatDuration(ms) {
  if (!(ms >= 0)) return "";
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${Math.floor(s % 60)}s`;
  return `${Math.floor(m / 60)}h ${m % 60}m`;
}

/** A protojson Duration ("1.500s") in milliseconds. */
export function durationMs(d) {
  if (!d) return 0;
  return parseFloat(String(d).replace(/s$/, "")) * 1000;
}

/** Who an EnrichedIdentity is, as a person would name them ("" if nobody). */
export function ownerName(identity) {
  const u = identity?.user;
  if (u) {
    const s = u.spec || {};
    const full = [s.firstName, s.lastName].filter(Boolean).join(" ");
    return s.email || full || s.userHandle || u.id?.subject || "";
  }
  const app = identity?.application;
  return app ? app.spec?.name || app.id?.subject || "" : "";
}
