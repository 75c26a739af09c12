// The one way the console builds DOM. Strings always become text nodes and
// attributes are set as properties or with setAttribute, never parsed as
// markup: user content (task names, outputs, log lines) cannot inject HTML.
// Nothing else in the console may use a DOM sink (innerHTML, document.write,
// eval, string timers, javascript: URLs...): console/sinks_test.go scans
// every script for them against a short reviewed allow-list.
//
// h() also refuses what would run code even without markup: an on*
// attribute that is not a function, srcdoc, CSS text, elements that load
// or run code (script, object, embed, base, frame), an iframe without a
// sandbox, and URL attributes whose scheme is not http(s) or blob (a
// javascript: link built from data is left without its URL).

/**
 * h("a", {href: "/x", class: "link", onclick: fn}, "text", child, [more])
 * Attributes: `class`, `style` (an object), `dataset` (an object), `on*`
 * (event listeners), booleans (true sets, false/null/undefined omits),
 * everything else via setAttribute. Children: strings and numbers (text),
 * Nodes, arrays (flattened), null/undefined/false (skipped).
 */
export function h(tag, attrs, ...children) {
  const name = String(tag).toLowerCase();
  if (REFUSED_TAGS.has(name)) throw new TypeError(`h(): <${name}> elements are refused`);
  if (name === "iframe" && !(attrs && typeof attrs.sandbox === "string")) throw new TypeError("h(): an iframe needs a sandbox attribute");
  const el = document.createElement(name);
  if (attrs) setAttrs(el, attrs);
  append(el, children);
  return el;
}

// Elements that load or run code, or change how every URL resolves.
const REFUSED_TAGS = new Set(["script", "object", "embed", "base", "frame", "frameset", "applet", "meta", "link", "style", "template"]);

// Attributes whose value is a URL the browser loads or navigates to.
const URL_ATTRS = new Set(["href", "src", "action", "formaction", "xlink:href", "poster", "data", "cite", "background", "ping", "srcset", "manifest"]);

// Schemes a URL attribute may carry: pages and files over HTTP and the
// console's own blob: downloads. Relative URLs resolve to the page's scheme.
const SAFE_SCHEMES = new Set(["http:", "https:", "blob:"]);

/** safeURL(v) says whether v, resolved against the page, has a safe scheme. */
export function safeURL(v) {
  try {
    return SAFE_SCHEMES.has(new URL(String(v), document.baseURI).protocol);
  } catch {
    return false;
  }
}

export function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    const key = k.toLowerCase();
    if (key.startsWith("on")) {
      if (typeof v !== "function") throw new TypeError(`h(): ${k} must be a function, never a string of code`);
      el.addEventListener(key.slice(2), v);
    } else if (key === "srcdoc") throw new TypeError("h(): srcdoc is refused: frame a URL");
    else if (k === "class") el.className = Array.isArray(v) ? v.filter(Boolean).join(" ") : v;
    else if (k === "style") {
      if (typeof v !== "object") throw new TypeError("h(): style must be an object of properties, never CSS text");
      Object.assign(el.style, v);
    } else if (k === "dataset") Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, "");
    else if (URL_ATTRS.has(key) && !safeURL(v)) el.dataset.refusedUrl = key;
    else el.setAttribute(k, String(v));
  }
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** Replace every child of el with children. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** A link inside the console: the router handles the click (no reload). */
export function link(href, ...children) {
  return h("a", { href }, ...children);
}
