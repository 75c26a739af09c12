// Literals (flyteidl2.core.Literal as protojson) rendered readably, always
// as text: a string output that looks like markup stays a string.
// Dataclasses and pydantic models arrive from the SDK as msgpack binaries
// (tag "msgpack"); they are decoded here, anything else undecodable shows
// its type and size.
import { h } from "./dom.js";

/** literalsTable([{name, value}]) is a definition list of named literals. */
export function literalsTable(named, { empty = "None." } = {}) {
  if (!named?.length) return h("p", { class: "muted" }, empty);
  return h("dl", { class: "literals" }, named.map((n) => [
    h("dt", { class: "mono" }, n.name),
    h("dd", { dataset: { literal: n.name } }, literal(n.value)),
  ]));
}

/** literal(lit) is a DOM node for one Literal. */
export function literal(lit) {
  if (!lit) return h("span", { class: "muted" }, "(unset)");
  if (lit.scalar) return scalar(lit.scalar);
  if (lit.collection) {
    const items = lit.collection.literals || [];
    return items.length
      ? h("ol", { class: "lit-list", start: 0 }, items.map((x) => h("li", null, literal(x))))
      : h("span", { class: "mono" }, "[]");
  }
  if (lit.map) {
    const entries = Object.entries(lit.map.literals || {});
    return entries.length
      ? h("dl", { class: "lit-map" }, entries.map(([k, v]) => [h("dt", { class: "mono" }, k), h("dd", null, literal(v))]))
      : h("span", { class: "mono" }, "{}");
  }
  if (lit.offloadedMetadata) {
    const m = lit.offloadedMetadata;
    return h("span", null, "offloaded value, ", sizeLabel(m.sizeBytes), " at ", h("code", null, m.uri || ""));
  }
  return h("span", { class: "muted" }, "(empty literal)");
}

function scalar(s) {
  if (s.primitive) return primitive(s.primitive);
  if (s.noneType) return h("span", { class: "mono" }, "None");
  if (s.blob) return blob(s.blob);
  if (s.binary) return binary(s.binary);
  if (s.generic) return pre(JSON.stringify(s.generic, null, 2));
  if (s.union) return literal(s.union.value);
  if (s.structuredDataset) {
    const fmt = s.structuredDataset.metadata?.structuredDatasetType?.format;
    return h("span", null, "dataframe", fmt ? ` (${fmt})` : "", " at ", h("code", null, s.structuredDataset.uri || ""));
  }
  if (s.schema) return h("span", null, "schema at ", h("code", null, s.schema.uri || ""));
  if (s.error) return h("span", { class: "error-text" }, "error from ", s.error.failedNodeId || "a node", ": ", s.error.message || "");
  return h("span", { class: "muted" }, "(empty scalar)");
}

function primitive(p) {
  if ("stringValue" in p) return pre(p.stringValue, "lit-string");
  if ("integer" in p) return h("span", { class: "mono" }, String(p.integer));
  if ("floatValue" in p) return h("span", { class: "mono" }, String(p.floatValue));
  if ("boolean" in p) return h("span", { class: "mono" }, p.boolean ? "True" : "False");
  if ("datetime" in p) return h("time", { class: "mono", datetime: p.datetime }, p.datetime);
  if ("duration" in p) return h("span", { class: "mono" }, p.duration);
  // proto3 leaves zero values out of JSON: {} is 0, "" or false; the type says which.
  return h("span", { class: "mono" }, "(zero value)");
}

function blob(b) {
  const multipart = b.metadata?.type?.dimensionality === "MULTIPART";
  const fmt = b.metadata?.type?.format;
  // Blob URIs point into the manager's storage; the manager signs links only
  // for reports and code bundles, so a file is named by its URI.
  return h("span", { class: "lit-blob", dataset: { blob: multipart ? "directory" : "file" } },
    multipart ? "directory" : "file", fmt ? ` (${fmt})` : "", ": ", h("code", null, b.uri || ""));
}

function binary(b) {
  const bytes = base64Bytes(b.value || "");
  if (b.tag === "msgpack") {
    try {
      return pre(JSON.stringify(toJSONable(decodeMsgpack(bytes)), null, 2), "lit-struct");
    } catch { /* not msgpack after all: fall through to the raw view */ }
  }
  const href = URL.createObjectURL(new Blob([bytes], { type: "application/octet-stream" }));
  return h("span", null, `binary${b.tag ? ` (${b.tag})` : ""}, ${sizeLabel(bytes.length)} `,
    h("a", { href, download: "value.bin" }, "download"));
}

function pre(text, cls) {
  return h("pre", { class: ["lit-pre", cls] }, text);
}

function sizeLabel(n) {
  const v = Number(n || 0);
  if (v < 1024) return `${v} B`;
  if (v < 1 << 20) return `${(v / 1024).toFixed(1)} KiB`;
  return `${(v / (1 << 20)).toFixed(1)} MiB`;
}

export function base64Bytes(s) {
  const bin = atob(s.replace(/-/g, "+").replace(/_/g, "/"));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

// Maps with non-string keys and byte strings have no JSON form: show them
// as objects keyed by the key's text and as a byte count.
function toJSONable(v) {
  if (v instanceof Map) return Object.fromEntries([...v].map(([k, x]) => [String(k), toJSONable(x)]));
  if (v instanceof Uint8Array) return `<${v.length} bytes>`;
  if (Array.isArray(v)) return v.map(toJSONable);
  if (typeof v === "bigint") return v.toString();
  return v;
}

/** decodeMsgpack(bytes) decodes one msgpack value (throws on malformed input). */
export function decodeMsgpack(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const text = new TextDecoder("utf-8", { fatal: true });
  let pos = 0;
  const need = (n) => { if (pos + n > bytes.length) throw new Error("truncated msgpack"); };
  const u8 = () => { need(1); return bytes[pos++]; };
  const take = (n) => { need(n); const s = bytes.subarray(pos, pos + n); pos += n; return s; };
  const num = (get, n) => { need(n); const v = view[get](pos); pos += n; return v; };
  const big = (get) => { need(8); const v = view[get](pos); pos += 8; return Number.isSafeInteger(Number(v)) ? Number(v) : v; };
  const arr = (n) => { const a = []; for (let i = 0; i < n; i++) a.push(value()); return a; };
  const map = (n) => {
    const entries = [];
    for (let i = 0; i < n; i++) entries.push([value(), value()]);
    return entries.every(([k]) => typeof k === "string") ? Object.fromEntries(entries) : new Map(entries);
  };
  const ext = (n) => { num("getInt8", 1); return take(n); };
  function value() {
    const b = u8();
    if (b <= 0x7f) return b;
    if (b >= 0xe0) return b - 0x100;
    if ((b & 0xf0) === 0x80) return map(b & 0x0f);
    if ((b & 0xf0) === 0x90) return arr(b & 0x0f);
    if ((b & 0xe0) === 0xa0) return text.decode(take(b & 0x1f));
    switch (b) {
      case 0xc0: return null;
      case 0xc2: return false;
      case 0xc3: return true;
      case 0xc4: return take(num("getUint8", 1));
      case 0xc5: return take(num("getUint16", 2));
      case 0xc6: return take(num("getUint32", 4));
      case 0xc7: return ext(num("getUint8", 1));
      case 0xc8: return ext(num("getUint16", 2));
      case 0xc9: return ext(num("getUint32", 4));
      case 0xca: return num("getFloat32", 4);
      case 0xcb: return num("getFloat64", 8);
      case 0xcc: return num("getUint8", 1);
      case 0xcd: return num("getUint16", 2);
      case 0xce: return num("getUint32", 4);
      case 0xcf: return big("getBigUint64");
      case 0xd0: return num("getInt8", 1);
      case 0xd1: return num("getInt16", 2);
      case 0xd2: return num("getInt32", 4);
      case 0xd3: return big("getBigInt64");
      case 0xd4: return ext(1);
      case 0xd5: return ext(2);
      case 0xd6: return ext(4);
      case 0xd7: return ext(8);
      case 0xd8: return ext(16);
      case 0xd9: return text.decode(take(num("getUint8", 1)));
      case 0xda: return text.decode(take(num("getUint16", 2)));
      case 0xdb: return text.decode(take(num("getUint32", 4)));
      case 0xdc: return arr(num("getUint16", 2));
      case 0xdd: return arr(num("getUint32", 4));
      case 0xde: return map(num("getUint16", 2));
      case 0xdf: return map(num("getUint32", 4));
      default: throw new Error(`msgpack byte 0x${b.toString(16)} is not a value`);
    }
  }
  const v = value();
  if (pos !== bytes.length) throw new Error("trailing bytes after msgpack value");
  return v;
}
