// A small Connect client over fetch, speaking Connect JSON: the same public
// API and wire format as the SDK's clients (they speak the binary codec).
// Only same-origin calls, so the browser never sends credentials elsewhere.

/** An error answered by the manager, with its Connect code ("not_found"...). */
export class ConnectError extends Error {
  constructor(code, message) {
    super(message || code);
    this.code = code;
  }
}

const enc = new TextEncoder();
const dec = new TextDecoder();

function url(service, method) {
  return `/flyteidl2.${service}/${method}`;
}

async function errorFrom(resp) {
  let body = null;
  try { body = await resp.json(); } catch { /* not JSON: fall back to the status */ }
  return new ConnectError(body?.code || codeForStatus(resp.status), body?.message || resp.statusText);
}

function codeForStatus(status) {
  return { 400: "invalid_argument", 401: "unauthenticated", 403: "permission_denied", 404: "unimplemented",
    408: "deadline_exceeded", 409: "aborted", 429: "unavailable", 502: "unavailable", 503: "unavailable",
    504: "unavailable" }[status] || "unknown";
}

/**
 * call("workflow.RunService", "GetRunDetails", {runId: {...}}) resolves to the
 * response message as protojson (camelCase names, int64 as strings, enums as
 * their names) or rejects with a ConnectError.
 */
export async function call(service, method, request = {}, { signal } = {}) {
  return (await callWithHeaders(service, method, request, { signal })).message;
}

/**
 * callWithHeaders is call that also answers the response's headers, for
 * what the manager says beside the message (e.g. a trigger's next firing,
 * which the IDL has no field for): {message, headers}.
 */
export async function callWithHeaders(service, method, request = {}, { signal } = {}) {
  const resp = await post(service, method, "application/json", JSON.stringify(request), signal);
  return { message: await resp.json(), headers: resp.headers };
}

// post sends one Connect request to this origin (so never with credentials
// for another) and answers the response, or throws the error it carries.
async function post(service, method, contentType, body, signal) {
  let resp;
  try {
    resp = await fetch(url(service, method), {
      method: "POST",
      // The console's header: with auth required the manager accepts the
      // session cookie only on requests that carry it (lib/session.js).
      headers: { "Content-Type": contentType, "Connect-Protocol-Version": "1", "X-Flyte-Console": "1" },
      body,
      credentials: "same-origin",
      signal,
    });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ConnectError("unavailable", "the manager cannot be reached");
  }
  if (!resp.ok) {
    const err = await errorFrom(resp);
    // The session ended (expired, signed out elsewhere, its key revoked):
    // the app shows its sign-in page.
    if (err.code === "unauthenticated") window.dispatchEvent(new CustomEvent("flyte:unauthenticated"));
    throw err;
  }
  return resp;
}

function envelope(message) {
  const data = enc.encode(JSON.stringify(message));
  const out = new Uint8Array(5 + data.length);
  new DataView(out.buffer).setUint32(1, data.length);
  out.set(data, 5);
  return out;
}

/**
 * stream("workflow.RunService", "WatchRuns", req) is an async iterator over a
 * server stream's messages. It ends when the server ends the stream, and
 * throws a ConnectError when the stream ends with one (or on abort).
 */
export async function* stream(service, method, request = {}, { signal } = {}) {
  const resp = await post(service, method, "application/connect+json", envelope(request), signal);
  const reader = resp.body.getReader();
  let buf = new Uint8Array(0);
  for (;;) {
    while (buf.length >= 5) {
      const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
      const flags = view.getUint8(0), size = view.getUint32(1);
      if (buf.length < 5 + size) break;
      const msg = JSON.parse(dec.decode(buf.subarray(5, 5 + size)));
      buf = buf.subarray(5 + size);
      if (flags & 0x02) { // end of stream
        if (msg.error) throw new ConnectError(msg.error.code || "unknown", msg.error.message);
        return;
      }
      yield msg;
    }
    const { value, done } = await reader.read();
    if (done) throw new ConnectError("unavailable", "the stream ended without an end-of-stream message");
    const next = new Uint8Array(buf.length + value.length);
    next.set(buf);
    next.set(value, buf.length);
    buf = next;
  }
}

/**
 * follow(open, onMessage, signal) keeps a watch open until signal aborts:
 * open() returns a fresh stream; when it ends or fails (the manager restarted,
 * a proxy cut it) it is reopened after a backoff. onError sees each failure so
 * a view can show that it is reconnecting; onOpen runs before each (re)open so
 * a view can reset what the new snapshot replaces.
 */
export async function follow(open, onMessage, signal, { onError, onOpen } = {}) {
  let delay = 500;
  while (!signal.aborted) {
    try {
      onOpen?.();
      for await (const msg of open()) {
        delay = 500;
        onMessage(msg);
      }
    } catch (e) {
      if (signal.aborted || e.name === "AbortError") return;
      onError?.(e);
    }
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 10000);
  }
}
