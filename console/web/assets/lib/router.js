// History-API routing: a table of path patterns, each naming a view module.
// A view is `export default async function render(main, params, ctx)`; ctx
// carries an AbortSignal that fires when the user navigates away, which is
// how a view closes its streams and timers.

const routes = [];

/** route("/v2/domain/:domain/project/:project/runs", () => import("../views/runs.js")) */
export function route(pattern, load) {
  const names = [];
  const re = new RegExp("^" + pattern.replace(/:([a-zA-Z]+)/g, (_, n) => { names.push(n); return "([^/]+)"; }) + "/?$");
  routes.push({ re, names, load });
}

export function match(path) {
  for (const r of routes) {
    const m = r.re.exec(path);
    if (!m) continue;
    const params = {};
    r.names.forEach((n, i) => { params[n] = decodeURIComponent(m[i + 1]); });
    return { load: r.load, params };
  }
  return null;
}

let onChange = () => {};

/** start(render) calls render(path, search) now and on every navigation. */
export function start(render) {
  onChange = render;
  window.addEventListener("popstate", () => onChange(location.pathname, location.search));
  document.addEventListener("click", (e) => {
    const a = e.target.closest?.("a[href]");
    if (!a || a.target || a.hasAttribute("download") || e.defaultPrevented) return;
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    const u = new URL(a.href, location.href);
    if (u.origin !== location.origin || !u.pathname.startsWith("/v2/")) return;
    e.preventDefault();
    navigate(u.pathname + u.search);
  });
  onChange(location.pathname, location.search);
}

/** navigate("/v2/...") shows another view without reloading the page. */
export function navigate(href, { replace = false } = {}) {
  if (replace) history.replaceState(null, "", href);
  else history.pushState(null, "", href);
  onChange(location.pathname, location.search);
}

/** setQuery({phase: "FAILED"}) rewrites the query string in place (filters). */
export function setQuery(values) {
  const q = new URLSearchParams(location.search);
  for (const [k, v] of Object.entries(values)) {
    if (v === "" || v === null || v === undefined) q.delete(k);
    else q.set(k, v);
  }
  const s = q.toString();
  history.replaceState(null, "", location.pathname + (s ? "?" + s : ""));
}
