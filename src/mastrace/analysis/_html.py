"""Render a trace as one self-contained HTML file: a waterfall with an attributes panel.

The file has no external resources (inline CSS and JavaScript, no CDN) so it opens offline. Bars
are rendered on the server side; the script only fills the panel when a span is clicked. Opening
the file with `#select=<span_id>` in the URL clicks that span's bar on load.
"""

from __future__ import annotations

import contextlib
import gc
import html
import math
import re
from collections.abc import Iterator, Sequence
from importlib.resources import files
from typing import Any

from ..tracing._snapshot import dumps_json
from ._kinds import format_duration, span_category
from ._prefix import read_prefix
from ._store import SpanRow, TraceStore
from ._tree import TreeNode, build_tree, walk

__all__ = ["DEFAULT_MAX_SPANS", "render_html", "render_trace_html"]

DEFAULT_MAX_SPANS = 20_000
_INDENT_PX = 14


def _asset(name: str) -> str:
    """A file of the view shipped in the package (`assets/`), read once."""
    return (files(__package__) / "assets" / name).read_text(encoding="utf-8")


_CSS = _asset("view.css")
_JS = _asset("view.js")


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


def _span_data(span: SpanRow, category: str, offset: str, duration: str) -> dict[str, Any]:
    """What the attributes panel shows of `span`; a value it does not have is left out, not null."""
    data = {
        "name": span.label,
        "span_name": span.name,
        "category": category,
        "offset": offset,
        "duration": duration,
        "status": _status(span),
        "otel_kind": span.otel_kind,
        "attributes": span.attributes,
        "events": span.events,
        "links": span.links,
    }
    if span.parent_span_id is not None:
        data["parent"] = span.parent_span_id
    if span.service_name is not None:
        data["service"] = span.service_name
    if span.is_exception or span.exception_type:
        exception = {
            "type": span.exception_type,
            "message": span.exception_message,
            "stacktrace": span.exception_stacktrace,
        }
        data["exception"] = {k: v for k, v in exception.items() if v is not None}
    return data


def _row(node: TreeNode, category: str, origin_us: int, total_us: int, duration: str) -> str:
    span = node.span
    left = 100.0 * (span.start_us - origin_us) / total_us
    end = origin_us + total_us if span.state else span.end_us  # an open span: to the trace's last time
    width = 100.0 * max(0, end - span.start_us) / total_us
    sid = _escape(span.span_id)
    name = _escape(span.label)
    shown = _escape(duration)
    mark = '<span class="err">✗</span>' if category == "error" else ""
    if node.note:  # an id reused by different spans, or a parent cycle: said, not hidden
        mark += f'<span class="err" title="{_escape(node.note)}">⚠</span>'
    title = f"{name} · {shown}"
    pad = 8 + node.depth * _INDENT_PX
    instant = not span.state and (span.span_type == "log" or span.end_us == span.start_us)
    state = f" open {span.state}" if span.state else ""
    return (
        f'<div class="row{state}" tabindex="0" data-span-id="{sid}">'
        f'<div class="label-col" style="padding-left:{pad}px" title="{title}">{mark}'
        f'<span class="name">{name}</span><span class="dur">{"event" if instant else shown}</span></div>'
        f'<div class="track"><div class="span-bar kind-{category}" data-depth="{node.depth}" '
        f'data-span-id="{sid}" '
        f'style="left:{left:.4f}%;width:{width:.4f}%" title="{title}"></div></div></div>'
    )


def _escape(text: str) -> str:
    """`html.escape(text)`, without its five passes over text that needs none (most labels)."""
    return html.escape(text) if _NEEDS_ESCAPE(text) else text


_NEEDS_ESCAPE = re.compile("[&<>\"']").search


def _script_json(value: Any) -> str:
    text = dumps_json(value)
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
    everything = list(walk(build_tree(spans)))
    nodes = everything[:max_spans]
    origin = min((s.start_us for s in spans), default=0)
    end = max((s.end_us for s in spans), default=origin)
    errors = sum(1 for node in everything if node.span.is_error)
    return _page(nodes, spans[0].trace_id if spans else "-", len(everything), errors, origin, end)


def render_trace_html(store: TraceStore, trace_id: str, *, max_spans: int = DEFAULT_MAX_SPANS) -> str:
    """`render_html` of a trace read from `store`, reading only the drawn spans in full.

    A trace of a million spans gives its page (the first `max_spans` spans) in seconds, with memory
    that grows with what is drawn, not with the trace. Python's cyclic garbage collector is paused
    meanwhile: the tens of thousands of objects built for the page hold no cycles.
    """
    with _collector_paused():
        prefix = read_prefix(store, trace_id, max_spans)
        return _page(prefix.shown, trace_id, prefix.total, prefix.errors, prefix.origin_us, prefix.end_us)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (if it runs) for the block: building many acyclic objects
    otherwise triggers collections that walk every live object, ~8% of a large view."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _page(nodes: Sequence[TreeNode], trace_id: str, total: int, errors: int, origin: int, end: int) -> str:
    total_us = max(1, end - origin)
    rows, data = [], {}
    categories: dict[tuple[str, str, bool], str] = {}  # span names repeat: categorise each once
    for node in nodes:
        span = node.span
        key = (span.name, span.span_type, span.is_error)
        category = categories.get(key)
        if category is None:
            category = categories[key] = span_category(*key)
        # A span that started and has not ended (see `open_spans`): said, never a duration of 0.
        duration = f"… {span.state}" if span.state else format_duration(span.duration)
        rows.append(_row(node, category, origin, total_us, duration))
        offset = format_duration((span.start_us - origin) / 1e6)
        data[span.span_id] = _span_data(span, category, offset, duration)
        if node.note:
            data[span.span_id]["note"] = node.note
    root = nodes[0].span if nodes else None
    title = root.label if root else "empty trace"
    meta = f"trace {trace_id} · {format_duration(total_us / 1e6)} · {total} spans · {errors} with errors"
    note = ""
    if total > len(nodes):
        note = f'<div class="note">Showing {len(nodes)} of {total} spans.</div>'
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
