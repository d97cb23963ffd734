"""Render a trace as one self-contained HTML file: a waterfall with an attributes panel.

The file has no external resources (inline CSS and JavaScript, no CDN) so it opens offline. Bars
are rendered on the server side; the script only fills the panel when a span is clicked. Opening
the file with `#select=<span_id>` in the URL clicks that span's bar on load.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from typing import Any

from ._kinds import format_duration, span_category
from ._store import SpanRow
from ._tree import TreeNode, build_tree, walk

__all__ = ["DEFAULT_MAX_SPANS", "render_html"]

DEFAULT_MAX_SPANS = 20_000
_INDENT_PX = 14

_CSS = """
:root { --session:#64748b; --agent:#3b82f6; --llm:#8b5cf6; --tool:#f59e0b; --event:#10b981;
        --error:#ef4444; --other:#94a3b8; --line:#e5e7eb; --muted:#6b7280; }
* { box-sizing: border-box; }
body { margin: 0; font: 13px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: #111827; }
header { padding: 12px 16px; border-bottom: 1px solid var(--line); }
h1 { font-size: 17px; margin: 0 0 4px; }
.meta { color: var(--muted); }
.legend { margin-top: 6px; display: flex; gap: 14px; flex-wrap: wrap; }
.legend span::before { content: ""; display: inline-block; width: 10px; height: 10px; margin-right: 4px;
                       border-radius: 2px; background: var(--c); vertical-align: -1px; }
main { display: grid; grid-template-columns: minmax(0, 1fr) 400px; height: calc(100vh - 84px); }
#waterfall { overflow: auto; border-right: 1px solid var(--line); }
.row, .axis-row { display: flex; align-items: center; }
.row { height: 22px; border-bottom: 1px solid #f3f4f6; cursor: pointer; }
.row:hover { background: #f9fafb; } .row.selected { background: #eff6ff; }
.label-col { flex: 0 0 380px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis;
             padding-right: 8px; }
.label-col .dur { color: var(--muted); margin-left: 6px; font-variant-numeric: tabular-nums; }
.label-col .err { color: var(--error); font-weight: 600; margin-right: 3px; }
.track { position: relative; flex: 1 1 auto; height: 100%; margin-right: 12px; }
.axis-row { position: sticky; top: 0; background: #fff; z-index: 2; height: 24px;
            border-bottom: 1px solid var(--line); }
.tick { position: absolute; top: 0; height: 100%; border-left: 1px solid var(--line); padding-left: 3px;
        color: var(--muted); font-size: 11px; line-height: 24px; white-space: nowrap; }
.span-bar { position: absolute; top: 5px; height: 12px; min-width: 2px; border-radius: 2px;
            background: var(--other); }
.kind-session { background: var(--session); } .kind-agent { background: var(--agent); }
.kind-llm { background: var(--llm); } .kind-tool { background: var(--tool); }
.kind-event { background: var(--event); min-width: 4px; } .kind-error { background: var(--error); }
.kind-other { background: var(--other); }
#attr-panel { overflow: auto; padding: 12px 16px; }
#attr-panel h2 { font-size: 15px; margin: 0 0 8px; word-break: break-all; }
#attr-panel h3 { font-size: 13px; margin: 14px 0 4px; color: var(--muted); text-transform: uppercase; }
#attr-panel table { border-collapse: collapse; width: 100%; }
#attr-panel th { text-align: left; vertical-align: top; padding: 2px 8px 2px 0; color: #374151; width: 40%;
                 word-break: break-all; font-weight: 500; }
#attr-panel td { padding: 2px 0; word-break: break-word; }
#attr-panel pre { margin: 0; white-space: pre-wrap; font-size: 12px; }
.hint, .note { color: var(--muted); }
.note { padding: 6px 16px; }
"""

_JS = """
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("span-data").textContent);
  var panel = document.getElementById("attr-panel");
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function valueNode(v, key) {
    if (key === "stacktrace" && typeof v === "string") return el("pre", "stacktrace", v);
    if (v !== null && typeof v === "object") {
      var pre = el("pre", "json");
      pre.textContent = JSON.stringify(v, null, 2);
      return pre;
    }
    return document.createTextNode(String(v));
  }
  function table(obj, cls, sort) {
    var t = el("table", cls), keys = Object.keys(obj);
    if (sort) keys.sort();
    if (!keys.length) t.appendChild(el("tr")).appendChild(el("td", "hint", "(none)"));
    keys.forEach(function (k) {
      var tr = el("tr"), td = el("td");
      tr.appendChild(el("th", null, k));
      td.appendChild(valueNode(obj[k], k));
      tr.appendChild(td);
      t.appendChild(tr);
    });
    return t;
  }
  function section(title, node) { panel.appendChild(el("h3", null, title)); panel.appendChild(node); }
  function select(id) {
    var s = data.spans[id];
    if (!s) return;
    document.querySelectorAll(".row.selected").forEach(function (r) { r.classList.remove("selected"); });
    var row = document.querySelector('.row[data-span-id="' + id + '"]');
    if (row) row.classList.add("selected");
    panel.replaceChildren();
    panel.setAttribute("data-span-id", id);
    panel.appendChild(el("h2", null, s.name));
    section("Span", table({"span id": id, "parent span id": s.parent || "(root)", "category": s.category,
      "start": "+" + s.offset, "duration": s.duration, "status": s.status, "span kind": s.otel_kind,
      "service": s.service || "-"}, "span-fields", false));
    if (s.exception) section("Exception", table(s.exception, "exception", false));
    section("Attributes", table(s.attributes, "attributes", true));
    if (s.events.length) section("Events", valueNode(s.events));
    if (s.links.length) section("Links", valueNode(s.links));
  }
  document.getElementById("rows").addEventListener("click", function (ev) {
    var target = ev.target.closest("[data-span-id]");
    if (target) select(target.getAttribute("data-span-id"));
  });
  document.getElementById("rows").addEventListener("keydown", function (ev) {
    var target = ev.target.closest(".row");
    if (target && (ev.key === "Enter" || ev.key === " ")) {
      ev.preventDefault();
      select(target.getAttribute("data-span-id"));
    }
  });
  function fromHash() {
    var m = /select=([0-9a-fA-F]+)/.exec(location.hash);
    if (!m) return;
    var bar = document.querySelector('.span-bar[data-span-id="' + m[1].toLowerCase() + '"]');
    if (!bar) return;
    // A real click event, so the same listener as a mouse click fills the panel.
    bar.dispatchEvent(new MouseEvent("click", {bubbles: true}));
    bar.closest(".row").scrollIntoView({block: "center"});
  }
  window.addEventListener("hashchange", fromHash);
  fromHash();
})();
"""


def _nice_step(total: float, target: int = 8) -> float:
    if total <= 0:
        return 1.0
    raw = total / target
    magnitude = 10.0 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10 * magnitude  # pragma: no cover - the loop always returns


def _ticks(total: float) -> str:
    step = _nice_step(total)
    out = []
    value = 0.0
    while value <= total + 1e-12:
        left = 100.0 * value / total if total > 0 else 0.0
        out.append(f'<div class="tick" style="left:{left:.4f}%">{html.escape(format_duration(value))}</div>')
        value += step
    return "".join(out)


def _status(span: SpanRow) -> str:
    if span.otel_status_message:
        return f"{span.otel_status_code}: {span.otel_status_message}"
    return span.otel_status_code


def _span_data(span: SpanRow, category: str, origin_us: int) -> dict[str, Any]:
    exception = None
    if span.is_exception or span.exception_type:
        exception = {
            "type": span.exception_type,
            "message": span.exception_message,
            "stacktrace": span.exception_stacktrace,
        }
    return {
        "name": span.label,
        "span_name": span.name,
        "parent": span.parent_span_id,
        "category": category,
        "offset": format_duration((span.start_us - origin_us) / 1e6),
        "duration": format_duration(span.duration),
        "status": _status(span),
        "otel_kind": span.otel_kind,
        "service": span.service_name,
        "attributes": span.attributes,
        "events": span.events,
        "links": span.links,
        "exception": exception,
    }


def _row(node: TreeNode, category: str, origin_us: int, total_us: int) -> str:
    span = node.span
    left = 100.0 * (span.start_us - origin_us) / total_us
    width = 100.0 * max(0, span.end_us - span.start_us) / total_us
    sid = html.escape(span.span_id)
    name = html.escape(span.label)
    mark = '<span class="err">✗</span>' if category == "error" else ""
    title = html.escape(f"{span.label} · {format_duration(span.duration)}")
    pad = 8 + node.depth * _INDENT_PX
    instant = span.span_type == "log" or span.end_us == span.start_us
    duration = "event" if instant else html.escape(format_duration(span.duration))
    return (
        f'<div class="row" tabindex="0" data-span-id="{sid}">'
        f'<div class="label-col" style="padding-left:{pad}px" title="{title}">{mark}'
        f'<span class="name">{name}</span><span class="dur">{duration}</span></div>'
        f'<div class="track"><div class="span-bar kind-{category}" data-depth="{node.depth}" '
        f'data-span-id="{sid}" '
        f'style="left:{left:.4f}%;width:{width:.4f}%" title="{title}"></div></div></div>'
    )


def _script_json(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
    # Inside <script>, "<", ">" and "&" must not appear raw, or a value could close the tag.
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _legend() -> str:
    names = ("session", "agent", "llm", "tool", "event", "error", "other")
    labels = {"agent": "agent round", "tool": "mcp / tool", "event": "event / log"}
    return "".join(f'<span style="--c:var(--{n})">{labels.get(n, n)}</span>' for n in names)


def render_html(spans: Sequence[SpanRow], *, max_spans: int = DEFAULT_MAX_SPANS) -> str:
    """The waterfall page of one trace.

    Args:
        spans: The spans of one trace.
        max_spans: Draw at most this many spans (depth-first order); the page says how many were left out.
    """
    nodes = list(walk(build_tree(spans)))[:max_spans]
    origin = min((s.start_us for s in spans), default=0)
    end = max((s.end_us for s in spans), default=origin)
    total_us = max(1, end - origin)
    rows, data = [], {}
    for node in nodes:
        category = span_category(node.span.name, node.span.span_type, node.span.is_error)
        rows.append(_row(node, category, origin, total_us))
        data[node.span.span_id] = _span_data(node.span, category, origin)
    root = nodes[0].span if nodes else None
    title = root.label if root else "empty trace"
    errors = sum(1 for s in spans if s.is_error)
    meta = (
        f"trace {spans[0].trace_id if spans else '-'} · {format_duration(total_us / 1e6)} · "
        f"{len(spans)} spans · {errors} with errors"
    )
    note = ""
    if len(spans) > len(nodes):
        note = f'<div class="note">Showing {len(nodes)} of {len(spans)} spans.</div>'
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)} · trace</title><style>{_CSS}</style></head><body>"
        f'<header><h1>{html.escape(title)}</h1><div class="meta">{html.escape(meta)}</div>'
        f'<div class="legend">{_legend()}</div></header>{note}'
        '<main><section id="waterfall">'
        '<div class="axis-row"><div class="label-col">Span</div>'
        f'<div class="track">{_ticks(total_us / 1e6)}</div></div>'
        f'<div id="rows">{"".join(rows)}</div></section>'
        '<aside id="attr-panel"><p class="hint">Click a span to see its attributes.</p></aside></main>'
        f'<script type="application/json" id="span-data">{_script_json({"spans": data})}</script>'
        f"<script>{_JS}</script></body></html>\n"
    )
