// Who is signed in to the console, when the manager requires auth: the
// manager keeps the session in an HttpOnly cookie the page never sees; the
// page only asks who it names, signs in (a pasted API key, sent once) and
// signs out. With auth off the manager has no sign-in routes at all.

const BASE = "/console/auth/";

// The console's request header: the manager accepts the session cookie
// only with it (a cross-site form cannot send it), see internal/consoleauth.
export const CONSOLE_HEADER = "X-Flyte-Console";

async function send(path, method, body) {
  const headers = { [CONSOLE_HEADER]: "1" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  return fetch(BASE + path, { method, headers, credentials: "same-origin", cache: "no-store",
    body: body === undefined ? undefined : JSON.stringify(body) });
}

/**
 * currentSession() resolves to {state: "off"} (auth off), {state: "in",
 * name, subject} or {state: "out", provider} (provider: the identity
 * provider's name, "" when only API keys sign in).
 */
export async function currentSession() {
  let resp;
  try {
    resp = await send("session", "GET");
  } catch {
    return { state: "off" };
  }
  if (resp.status === 404) return { state: "off" };
  const body = await resp.json().catch(() => ({}));
  if (resp.status === 401) return { state: "out", provider: body.provider || "" };
  if (resp.ok) return { state: "in", name: body.name || body.subject || "", subject: body.subject || "" };
  throw new Error(body.error || `the manager answered ${resp.status}`);
}

/** signInWithKey(key) starts a session from an API key, or throws why not. */
export async function signInWithKey(key) {
  const resp = await send("apikey", "POST", { key });
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) throw new Error(body.error || `the manager answered ${resp.status}`);
  return { state: "in", name: body.name || body.subject || "", subject: body.subject || "" };
}

/** signOut() ends the session on the manager and drops the cookie. */
export async function signOut() {
  await send("logout", "POST");
}

/** The provider sign-in's address, returning to path afterwards. */
export function providerSignInURL(path) {
  return `${BASE}login?next=${encodeURIComponent(path)}`;
}
