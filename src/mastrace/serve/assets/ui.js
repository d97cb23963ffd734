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
  return { el, int, dur, cost, num, utc, poller, getJSON, forget, skipped };
})();
