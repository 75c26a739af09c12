// The one way the console builds DOM. Strings always become text nodes and
// attributes are set as properties or with setAttribute, never parsed as
// markup: user content (task names, outputs, log lines) cannot inject HTML.
// Nothing in the console may use innerHTML, outerHTML, insertAdjacentHTML or
// document.write (a test greps for them).

/**
 * h("a", {href: "/x", class: "link", onclick: fn}, "text", child, [more])
 * Attributes: `class`, `style` (an object), `dataset` (an object), `on*`
 * (event listeners), booleans (true sets, false/null/undefined omits),
 * everything else via setAttribute. Children: strings and numbers (text),
 * Nodes, arrays (flattened), null/undefined/false (skipped).
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) setAttrs(el, attrs);
  append(el, children);
  return el;
}

export function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = Array.isArray(v) ? v.filter(Boolean).join(" ") : v;
    else if (k === "style") Object.assign(el.style, v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, "");
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
