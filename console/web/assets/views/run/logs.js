// An attempt's log, from DataProxyService.TailLogs (the stream `flyte get
// logs` reads): what was written so far, then new lines as the attempt writes
// them until it ends. Lines are text nodes, so a log cannot inject markup.
import { h, replace } from "../../lib/dom.js";
import { stream } from "../../lib/api.js";
import { errorBox } from "../../lib/ui.js";

/** logsView(actionId, attempts, signal) is the Logs tab's content. */
export function logsView(actionId, attempts, signal) {
  const numbers = (attempts || []).map((a) => a.attempt).filter(Boolean);
  if (!numbers.length) return h("p", { class: "muted", id: "logs" }, "No attempt has started, so there is no log yet.");
  const latest = Math.max(...numbers);
  const picker = h("select", { id: "log-attempt", "aria-label": "Attempt" },
    numbers.map((n) => h("option", { value: n, selected: n === latest }, `Attempt ${n}`)));
  const body = h("div");
  let ctrl = null;
  const show = () => {
    ctrl?.abort();
    ctrl = new AbortController();
    signal.addEventListener("abort", () => ctrl.abort(), { once: true });
    const n = Number(picker.value);
    replace(body, logLinks(attempts.find((a) => a.attempt === n)), attemptLog(actionId, n, ctrl.signal));
  };
  picker.addEventListener("change", show);
  show();
  return h("div", { id: "logs" }, numbers.length > 1 ? h("label", null, "Attempt ", picker) : null, body);
}

// logLinks lists every log link the attempt reports (log_info: the
// manager's own and the configured log systems'), each opening in a new tab.
// Only http(s) URLs are links: a reporter's other schemes are shown as text.
function logLinks(attempt) {
  const links = attempt?.logInfo || [];
  if (!links.length) return null;
  return h("ul", { class: "log-links", id: "log-links", "aria-label": "Log links" }, links.map((l) => {
    let href = null;
    try {
      const u = new URL(l.uri || "", location.href);
      if (u.protocol === "http:" || u.protocol === "https:") href = u.href;
    } catch { /* not a URL: shown as text */ }
    const name = l.name || l.uri || "log";
    return h("li", null, href ? h("a", { href, target: "_blank", rel: "noopener noreferrer", dataset: { name } }, name) : `${name}: ${l.uri || ""}`);
  }));
}

function attemptLog(actionId, attempt, signal) {
  const pre = h("pre", { class: "log", id: "log-lines", dataset: { attempt }, tabindex: 0, "aria-label": `Log of attempt ${attempt}` });
  const state = h("span", { class: "muted", id: "log-state", "aria-live": "polite" }, "Loading…");
  const lines = [];
  const download = h("button", {
    type: "button", id: "log-download",
    onclick: () => {
      const a = h("a", { href: URL.createObjectURL(new Blob([lines.join("\n") + "\n"], { type: "text/plain" })), download: `${actionId.run.name}-${actionId.name}-${attempt}.log` });
      a.click();
      setTimeout(() => URL.revokeObjectURL(a.href), 60000);
    },
  }, "Download");
  (async () => {
    // An attempt is listed before its process writes a log: until the log
    // exists TailLogs answers not_found, and the view asks again.
    for (let delay = 500; ; delay = Math.min(delay * 2, 5000)) {
      try {
        state.textContent = "Following…";
        for await (const msg of stream("dataproxy.DataProxyService", "TailLogs", { actionId, attempt }, { signal })) {
          const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
          for (const group of msg.logs || []) {
            for (const l of group.lines || []) {
              const text = l.message ?? "";
              lines.push(text);
              pre.append(h("span", { class: ["log-line", l.originator === "SYSTEM" && "log-system"] }, text), "\n");
            }
          }
          if (atBottom) pre.scrollTop = pre.scrollHeight;
        }
        state.textContent = lines.length ? "End of log." : "The log is empty.";
        pre.dataset.done = "true";
        return;
      } catch (e) {
        if (signal.aborted || e.name === "AbortError") return;
        if (e.code !== "not_found" || lines.length) {
          replace(state, errorBox(e));
          return;
        }
        state.textContent = "Waiting for the attempt to write its log…";
        await new Promise((r) => setTimeout(r, delay));
        if (signal.aborted) return;
      }
    }
  })();
  return h("div", null, h("div", { class: "toolbar" }, state, h("span", { class: "grow" }), download), pre);
}
