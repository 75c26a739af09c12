// Which runs of the list wait for a person: those with a condition action
// PAUSED, as ListRuns with paused_actions_only finds them (a waiting run is
// itself RUNNING). The runs list marks them and can show only them.
import { call } from "../lib/api.js";
import { h } from "../lib/dom.js";

// At most this many waiting runs are marked; a project rarely has more.
const LIMIT = 200;

/**
 * pausedRuns(projectId, signal, onChange) keeps the names of the waiting
 * runs: soon() asks the manager again shortly (changes come in bursts),
 * then onChange(has) is called with the new answer.
 */
export function pausedRuns(projectId, signal, onChange) {
  let names = new Set();
  let timer = null;
  const has = (name) => names.has(name);
  async function refresh() {
    const r = await call("workflow.RunService", "ListRuns",
      { request: { limit: LIMIT }, projectId, pausedActionsOnly: true }, { signal });
    names = new Set((r.runs || []).map((run) => run.action?.id?.run?.name));
    onChange(has);
  }
  signal.addEventListener("abort", () => clearTimeout(timer));
  return {
    has,
    soon() {
      clearTimeout(timer);
      timer = setTimeout(() => refresh().catch(() => { /* the next change asks again */ }), 300);
    },
  };
}

/** markPaused(tr, on) shows or hides the "waiting for input" mark of a run's row. */
export function markPaused(tr, on) {
  const mark = tr.querySelector("[data-paused]");
  if (on && !mark) {
    tr.querySelector("[data-phase-cell]")?.append(" ", h("span", {
      class: "phase phase-paused", dataset: { paused: "" }, title: "A condition of this run waits for a signal",
    }, "waiting for input"));
  } else if (!on && mark) {
    mark.previousSibling?.remove?.();
    mark.remove();
  }
}
