// The sign-in page, shown instead of any view while the manager requires
// auth and no session is open: the identity provider's button (a plain
// link: the manager redirects to the provider and back) and a form for an
// API key. The key goes to the manager once; the page keeps nothing.
import { h, replace } from "../lib/dom.js";
import { providerSignInURL, signInWithKey } from "../lib/session.js";

/** signInPage(main, info, onSignedIn) renders the page into main. */
export function signInPage(main, info, onSignedIn) {
  const input = h("input", { id: "apikey", name: "key", type: "password", autocomplete: "off", spellcheck: "false",
    required: true, placeholder: "FLYTE_API_KEY or <key id>:<secret>", size: 48 });
  const status = h("p", { id: "signin-error", role: "alert" });
  const submit = h("button", { type: "submit", class: "primary" }, "Sign in");
  const form = h("form", { id: "signin-key", onsubmit: async (e) => {
    e.preventDefault();
    submit.disabled = true;
    replace(status);
    status.className = "";
    try {
      const who = await signInWithKey(input.value);
      input.value = "";
      onSignedIn(who);
    } catch (err) {
      status.className = "error";
      replace(status, err.message || String(err));
    } finally {
      submit.disabled = false;
    }
  } },
  h("label", { for: "apikey" }, h("strong", null, "Sign in with an API key")),
  h("p", { class: "muted" }, "Paste a key from ", h("code", null, "flyte-manager apikey create"), "."),
  h("div", { class: "toolbar" }, input, submit), status);
  replace(main,
    h("h1", null, "Sign in"),
    h("p", { class: "muted" }, "This flyte-manager requires you to sign in."),
    info.provider
      ? h("p", null, h("a", { id: "signin-provider", class: "button primary", href: providerSignInURL(location.pathname + location.search) },
        `Sign in with ${info.provider}`))
      : null,
    form);
  document.title = "Sign in · Flyte";
}
