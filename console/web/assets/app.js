// The console's entry point: the layout, the theme switch and the route table.
import { h, replace } from "./lib/dom.js";
import { route, match, start, navigate } from "./lib/router.js";
import { errorBox } from "./lib/ui.js";
import { currentSession, signOut } from "./lib/session.js";
import { signInPage } from "./views/signin.js";

const P = "/v2/domain/:domain/project/:project";
route("/v2", () => Promise.resolve({ default: () => navigate("/v2/projects", { replace: true }) }));
route("/v2/projects", () => import("./views/projects.js"));
route(P + "/runs", () => import("./views/runs.js"));
route(P + "/runs/:run", () => import("./views/run.js"));
route(P + "/tasks", () => import("./views/tasks.js"));
route(P + "/tasks/:task", () => import("./views/task.js"));
route(P + "/tasks/:task/:version", () => import("./views/task.js"));
route(P + "/secrets", () => import("./views/secrets.js"));
route(P + "/triggers", () => import("./views/triggers.js"));
route(P + "/apps", () => import("./views/apps.js"));
route(P + "/apps/:app", () => import("./views/app.js"));

const main = document.getElementById("main");
const crumbs = document.getElementById("crumbs");
let current = null; // the AbortController of the view on screen

/** Breadcrumbs: [[label, href], ..., [label]] (the last one is the page). */
function setCrumbs(items) {
  replace(crumbs, h("ol", null, items.map(([label, href], i) =>
    h("li", null, href && i < items.length - 1 ? h("a", { href }, label) : h("span", { "aria-current": "page" }, label)))));
  document.title = [...items.map(([l]) => l)].reverse().concat("Flyte").join(" · ");
}

async function show(path) {
  current?.abort();
  const ctrl = new AbortController();
  current = ctrl;
  const m = match(path);
  if (!m) {
    setCrumbs([["Projects", "/v2/projects"], ["Not found"]]);
    replace(main, h("h1", null, "Not found"), h("p", null, "No page at ", h("code", null, path), "."));
    return;
  }
  try {
    const view = await m.load();
    if (ctrl.signal.aborted) return;
    replace(main);
    await view.default(main, m.params, { signal: ctrl.signal, setCrumbs, navigate });
  } catch (e) {
    if (ctrl.signal.aborted || e.name === "AbortError") return;
    replace(main, errorBox(e));
  }
}

function applyTheme(theme) {
  if (theme) document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
}

applyTheme(localStorage.getItem("theme"));
document.getElementById("theme").addEventListener("click", () => {
  const dark = document.documentElement.dataset.theme
    ? document.documentElement.dataset.theme === "dark"
    : matchMedia("(prefers-color-scheme: dark)").matches;
  const next = dark ? "light" : "dark";
  localStorage.setItem("theme", next);
  applyTheme(next);
});

// Signing in, when the manager requires it: the sign-in page stands in
// for every view until a session is open; the header names who is signed
// in, with a sign-out button. With auth off none of this shows.
const who = h("span", { id: "who", class: "muted" });
const signOutButton = h("button", { id: "signout", type: "button", onclick: async () => {
  signOutButton.disabled = true;
  try {
    await signOut();
    showSignIn(await currentSession());
  } catch (e) {
    replace(main, errorBox(e));
  } finally {
    signOutButton.disabled = false;
  }
} }, "Sign out");
let authOn = false;
let started = false;

function showSignedIn(session) {
  signingIn = false;
  if (session.state === "in") {
    authOn = true;
    replace(who, "Signed in as ", h("strong", null, session.name));
    document.getElementById("theme").before(who, signOutButton);
  }
  if (!started) {
    started = true;
    start((path) => {
      if (signingIn) return;
      show(path);
      main.focus({ preventScroll: true });
    });
  } else {
    show(location.pathname);
  }
}

let signingIn = false;
function showSignIn(info) {
  authOn = true;
  signingIn = true;
  current?.abort();
  current = null;
  who.remove();
  signOutButton.remove();
  setCrumbs([["Sign in"]]);
  signInPage(main, info, (session) => showSignedIn(session));
}

window.addEventListener("flyte:unauthenticated", () => {
  if (authOn && !signingIn) currentSession().then((s) => { if (s.state === "out") showSignIn(s); }).catch(() => {});
});

try {
  const session = await currentSession();
  if (session.state === "out") showSignIn(session);
  else showSignedIn(session);
} catch (e) {
  replace(main, errorBox(e));
}

// Leaving the page (a reload, another site, the back/forward cache) ends
// the view's streams at once rather than when the browser gets round to
// it; a page restored from that cache shows its view afresh.
window.addEventListener("pagehide", () => {
  current?.abort();
  current = null;
});
window.addEventListener("pageshow", (e) => {
  if (e.persisted && !signingIn) show(location.pathname);
});
