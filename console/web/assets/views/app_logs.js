// An app's live log: AppLogsService.TailLogs{app_id}, the stream `flyte
// get app --logs` reads: first the replicas, then batches of what they
// printed, followed while the page is open. Each line names its replica.
// A stream that ends (the app restarted, the manager went away) is opened
// again and shows the log afresh. Lines are text nodes, never markup.
import { h, replace } from "../lib/dom.js";
import { follow, stream } from "../lib/api.js";

const MAX_LINES = 5000; // the page keeps the newest lines only

/** appLogs(appId, signal) is the Logs section of an app's page. */
export function appLogs(appId, signal) {
  const pre = h("pre", { class: "log", id: "app-log", tabindex: 0, "aria-label": "Log of the app's replicas" });
  const state = h("span", { class: "muted", id: "app-log-state", "aria-live": "polite" }, "Loading…");
  const replicas = h("span", { class: "muted", id: "app-log-replicas" });
  let count = 0;
  follow(() => stream("app.AppLogsService", "TailLogs", { appId }, { signal }),
    (msg) => {
      if (msg.replicas) { // those running and the last few that ended, whose logs are kept
        const names = (msg.replicas.replicas || []).map((r) => r.name);
        replicas.dataset.replicas = names.join(" ");
        replace(replicas, names.length ? `Replicas: ${names.join(", ")}` : "No replica runs now.");
        state.textContent = "Following…";
        return;
      }
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      for (const group of msg.batches?.logs || []) {
        const who = group.replicaId?.name || "";
        for (const l of group.structuredLines || []) {
          pre.append(h("span", { class: "log-line", dataset: { replica: who } }, h("span", { class: "muted" }, who ? `[${who}] ` : ""), (l.message ?? "").replace(/\r?\n$/, "")), "\n");
          count++;
        }
      }
      while (count > MAX_LINES && pre.firstChild) { // a line is its span and its newline
        pre.firstChild.remove();
        pre.firstChild?.remove();
        count--;
      }
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    },
    signal,
    {
      onOpen: () => { replace(pre); count = 0; },
      onError: (e) => {
        state.textContent = e.code === "not_found" ? "Waiting for the app's replicas to print…" : `Reconnecting (${e.message})…`;
      },
    });
  return h("section", { id: "app-logs" }, h("div", { class: "toolbar" }, state, h("span", { class: "grow" }), replicas), pre);
}
