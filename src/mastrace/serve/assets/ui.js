"use strict";
// Shared by the pages of `mastrace serve`. Every value from a span is put in the page as text
// (textContent), never as HTML.
const UI = (() => {
  const el = (tag, text, cls) => {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  };
  const nf = new Intl.NumberFormat("en-US");
  // Whole numbers with thousands separators: 12,345.
  const int = (n) => (n === null || n === undefined || n === "" ? "" : nf.format(Math.round(Number(n))));
  // A duration in microseconds: 850 µs, 12.3 ms, 1.24 s, 2 m 05 s.
  const dur = (us) => {
    if (us === null || us === undefined) return "";
    if (us < 1e3) return Math.round(us) + " µs";
    if (us < 1e6) return (us / 1e3).toFixed(us < 1e4 ? 2 : 1) + " ms";
    if (us < 6e7) return (us / 1e6).toFixed(2) + " s";
    const s = Math.round(us / 1e6);
    return Math.floor(s / 60) + " m " + String(s % 60).padStart(2, "0") + " s";
  };
  // A cost in dollars with enough digits to be read: $12.35, $0.0258, $0.00018. Partly unpriced, the
  // known part and the unpriced models ("$0.0369 + unpriced: house-model"); nothing known is "—".
  const cost = (value, unknown, models) => {
    if (unknown) {
      const names = models && models.length ? models.join(", ") : "";
      const known = Number(value);
      if (value === null || value === undefined || value === "" || !Number.isFinite(known) || known === 0)
        return names ? "— (no price for " + names + ")" : "—";
      return cost(value) + " + unpriced" + (names ? ": " + names : "");
    }
    if (value === null || value === undefined || value === "") return "";
    const v = Number(value);
    if (v === 0) return "$0";
    if (Math.abs(v) >= 1) return "$" + v.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
    if (Math.abs(v) >= 0.01) {
      let s = v.toFixed(4);
      while (s.endsWith("0") && s.split(".")[1].length > 2) s = s.slice(0, -1);
      return "$" + s;
    }
    return "$" + Number(v.toPrecision(2)).toFixed(Math.max(2, 1 - Math.floor(Math.log10(Math.abs(v)))));
  };
  // A float without binary noise: 0.026272499999999997 reads 0.0262725 (12 significant digits).
  const num = (v) => (Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(12))));
  const utc = (us) => new Date(us / 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC";
  // Poll with `once` every `ms`, never two requests at a time: the next starts after the answer.
  const poller = (once, ms) => {
    let inFlight = false, again = false, timer = null;
    const tick = async () => {
      if (inFlight) { again = true; return; }
      inFlight = true;
      clearTimeout(timer);
      try { await once(); } finally {
        inFlight = false;
        if (again) { again = false; tick(); } else { timer = setTimeout(tick, ms); }
      }
    };
    return tick;
  };
  // GET `url` as JSON, sending the ETag of the last answer from the same key (304: unchanged).
  const etags = new Map();
  const getJSON = async (url, key) => {
    const headers = etags.has(key) ? { "If-None-Match": etags.get(key) } : {};
    const reply = await fetch(url, { cache: "no-store", headers });
    if (reply.status === 304) return { unchanged: true, reply };
    const tag = reply.headers.get("ETag");
    if (tag && reply.ok) etags.set(key, tag); else etags.delete(key);
    return { reply, data: reply.ok ? await reply.json() : null };
  };
  const forget = (key) => etags.delete(key);
  // What the server says it left out of its answer (malformed lines of the store), for the status line.
  const skipped = (reply) => {
    const n = Number(reply.headers.get("X-Mastrace-Skipped-Rows") || 0);
    return n ? ", " + int(n) + " malformed row(s) skipped" : "";
  };

  // A value that is JSON text (an object or a list) as the value it holds; anything else as it is.
  const parsed = (value) => {
    if (typeof value === "string" && /^\s*[\[{]/.test(value)) {
      try { return JSON.parse(value); } catch (e) { /* shown as the string it is */ }
    }
    return value;
  };
  // A dotted key that may break only after its dots, never inside a word.
  const keyText = (key, cls) => {
    const box = el("span", null, cls);
    String(key).split(/(?<=[.\/_])(?=[^.\/_])/).forEach((part, i) => {
      if (i) box.appendChild(document.createElement("wbr"));
      box.appendChild(document.createTextNode(part));
    });
    return box;
  };
  const leaf = (value, key) => {
    if (typeof value === "number") {
      const text = /(^|\.)cost$/.test(String(key)) ? cost(value) : num(value);
      const span = el("span", text, "jt-val jt-num");
      if (text !== String(value)) span.title = String(value);
      return span;
    }
    if (typeof value === "string") return el("span", value, "jt-val jt-str");
    return el("span", JSON.stringify(value), "jt-val jt-lit");
  };
  // Nested JSON as a collapsible tree: each level indents by a fixed step and values take the
  // remaining width (wrapped at any length), so depth never squeezes text into a column.
  const jsonTree = (value, key, depth) => {
    value = parsed(value);
    depth = depth || 0;
    if (value === null || typeof value !== "object") return leaf(value, key);
    const box = el("details", null, "json jt");
    const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
    box.appendChild(el("summary", Array.isArray(value) ? "[" + entries.length + " items]" : "{" + entries.length + " keys}"));
    box.open = entries.length <= 12 && depth < 6;
    const body = el("div", null, "jt-body");
    for (const [k, v] of entries) {
      const row = el("div", null, "jt-row");
      row.appendChild(keyText(k, "jt-key json-key"));
      row.appendChild(jsonTree(v, k, depth + 1));
      body.appendChild(row);
    }
    box.appendChild(body);
    return box;
  };

  // -- LLM conversations in the GenAI conventions' shape ({role, parts: [...]}) -------------------
  const pretty = (value) => {
    value = parsed(value);
    return typeof value === "string" ? value : JSON.stringify(value, null, 2);
  };
  const asMessages = (value) => {
    value = parsed(value);
    if (value === undefined || value === null || value === "") return [];
    if (!Array.isArray(value)) value = [value];
    return value.map((m) => (m && typeof m === "object" && !Array.isArray(m) ? m : { role: "user", parts: [{ type: "text", content: String(m) }] }));
  };
  const partsOf = (m) => {
    if (Array.isArray(m.parts)) return m.parts;
    if (m.content !== undefined) return typeof m.content === "string" ? [{ type: "text", content: m.content }] : Array.isArray(m.content) ? m.content : [m.content];
    return [];
  };
  // One part of a message: text, a tool call, a tool result (named after its call), reasoning, other.
  const partNode = (p, calls) => {
    if (p === null || typeof p !== "object") return el("div", String(p), "part text");
    const type = p.type || "text";
    if (type === "text") return el("div", p.content ?? p.text ?? "", "part text");
    if (type === "reasoning" || type === "thinking") {
      const box = el("details", null, "part reasoning");
      box.open = true;
      box.appendChild(el("summary", "reasoning"));
      box.appendChild(el("div", p.content ?? p.text ?? "", "text"));
      return box;
    }
    if (type === "tool_call") {
      if (p.id) calls.set(String(p.id), p.name);
      const box = el("div", null, "part tool-call");
      box.dataset.callId = p.id || "";
      const head = el("div", null, "part-head");
      head.append(el("span", "tool call", "tag"), el("b", p.name || "?", "tool-name"));
      if (p.id) head.appendChild(el("code", p.id, "call-id"));
      box.append(head, el("pre", pretty(p.arguments ?? {}), "args"));
      return box;
    }
    if (type === "tool_call_response") {
      const box = el("div", null, "part tool-result");
      box.dataset.callId = p.id || "";
      const head = el("div", null, "part-head");
      const name = p.id ? calls.get(String(p.id)) : undefined;
      head.append(el("span", "tool result", "tag"), el("b", name || "(call not in view)", "tool-name"));
      if (p.id) head.appendChild(el("code", p.id, "call-id"));
      box.append(head, el("pre", pretty(p.response ?? p.result ?? ""), "result"));
      return box;
    }
    const box = el("div", null, "part other");
    box.append(el("span", type, "tag"), jsonTree(p, type, 1));
    return box;
  };
  const messageNode = (m, calls, cls) => {
    const role = String(m.role || "unknown");
    const box = el("div", null, "msg role-" + role.replace(/[^a-z_]/gi, "") + (cls ? " " + cls : ""));
    box.dataset.role = role;
    const head = el("div", null, "msg-head");
    head.appendChild(el("span", role, "role"));
    if (m.name) head.appendChild(el("span", m.name, "who"));
    if (m.finish_reason) head.appendChild(el("span", "finish: " + m.finish_reason, "finish"));
    box.appendChild(head);
    for (const p of partsOf(m)) box.appendChild(partNode(p, calls));
    return box;
  };
  const attr = (a, ...keys) => { for (const k of keys) if (a[k] !== undefined && a[k] !== null && a[k] !== "") return a[k]; return undefined; };
  // The conversation of one LLM call (`attrs` are its span's attributes), or null when it has none.
  // `seen`, when given, holds messages shown already (a run-level view leaves repeated history out).
  const conversation = (attrs, seen, calls) => {
    const a = attrs || {};
    const system = parsed(a["gen_ai.system_instructions"]);
    const input = asMessages(a["gen_ai.input.messages"]);
    const output = asMessages(a["gen_ai.output.messages"]);
    if (system === undefined && !input.length && !output.length) return null;
    calls = calls || new Map();
    const box = el("div", null, "conversation");
    const keyOf = (m) => JSON.stringify([m.role, m.name || null, partsOf(m)]);
    const fresh = (m) => {
      if (!seen) return true;
      const key = keyOf(m);
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    };
    if (system !== undefined && system !== null) {
      const sys = { role: "system", parts: Array.isArray(system) ? system : [typeof system === "string" ? { type: "text", content: system } : system] };
      if (fresh(sys)) box.appendChild(messageNode(sys, calls, "input"));
    }
    for (const m of input) if (fresh(m)) box.appendChild(messageNode(m, calls, "input"));
    for (const m of output) { if (seen) seen.add(keyOf(m)); box.appendChild(messageNode(m, calls, "output")); }
    const usage = parsed(a["mastrace.usage"]) || {};
    const facts = [];
    const model = attr(a, "gen_ai.response.model", "gen_ai.request.model");
    if (model) facts.push(model);
    const tin = attr(a, "gen_ai.usage.input_tokens"), tout = attr(a, "gen_ai.usage.output_tokens");
    if (tin !== undefined || tout !== undefined) facts.push(int(tin || 0) + " in / " + int(tout || 0) + " out");
    const reasoning = attr(a, "gen_ai.usage.reasoning.output_tokens");
    if (reasoning) facts.push(int(reasoning) + " reasoning");
    const cached = attr(a, "gen_ai.usage.cache_read.input_tokens");
    if (cached) facts.push(int(cached) + " cached");
    const price = attr(a, "massgen.usage.cost") ?? (typeof usage === "object" ? usage.cost : undefined);
    if (a["mastrace.cost.unknown"] === true) facts.push("cost —");
    else if (price !== undefined && price !== null) facts.push(cost(price));
    const finish = parsed(a["gen_ai.response.finish_reasons"]);
    if (finish && !output.some((m) => m.finish_reason)) facts.push("finish: " + (Array.isArray(finish) ? finish.join(", ") : finish));
    if (facts.length) box.appendChild(el("div", facts.join(" · "), "conv-facts"));
    return box;
  };
  return { el, int, dur, cost, num, utc, poller, getJSON, forget, skipped, parsed, keyText, jsonTree, conversation };
})();
