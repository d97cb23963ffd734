"""Arrange a trace's spans as a tree and render it as text with box-drawing indentation."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .. import semconv
from ._kinds import format_cost, format_duration, format_value
from ._store import RunSummary, SpanRow
from ._texttable import text_table

__all__ = [
    "CYCLE_NOTE",
    "REUSED_NOTE",
    "TreeNode",
    "build_tree",
    "cycle_entries",
    "key_attributes",
    "render_runs",
    "render_tree",
    "span_line",
    "walk",
]

# (label, attribute keys tried in order) shown after a span's name.
_KEY_ATTRIBUTES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("task", (semconv.MASSGEN_TASK,)),
    ("type", (semconv.MASSGEN_ROUND_TYPE,)),
    ("outcome", (semconv.MASSGEN_OUTCOME,)),
    ("answer", (semconv.MASSGEN_ANSWER_LABEL,)),
    ("voted_for", (semconv.MASSGEN_VOTED_FOR,)),
    ("label", (semconv.MASSGEN_VOTED_FOR_LABEL,)),
    ("winner", (semconv.MASSGEN_WINNER,)),
    ("model", (semconv.GEN_AI_REQUEST_MODEL,)),
    ("in", (semconv.MASSGEN_USAGE_INPUT, semconv.GEN_AI_USAGE_INPUT_TOKENS)),
    ("out", (semconv.MASSGEN_USAGE_OUTPUT, semconv.GEN_AI_USAGE_OUTPUT_TOKENS)),
    ("cached", (semconv.MASSGEN_USAGE_CACHED_INPUT, semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS)),
    ("cost", (semconv.MASSGEN_USAGE_COST,)),
    ("ttfc", (semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, semconv.LEGACY_TIME_TO_FIRST_CHUNK)),
    ("interrupted", (semconv.MASTRACE_INTERRUPTED,)),
)


REUSED_NOTE = "span id stored {n} times with different content: showing the copy that ended last"
CYCLE_NOTE = "in a parent cycle: its parent is also its descendant, so it is shown as a root"


@dataclass
class TreeNode:
    """A span with its depth and its children, ordered by start time.

    `note` says what is odd about the span's place in the trace (its id reused by different spans,
    a parent cycle), so that a tree shows it rather than hiding spans.
    """

    span: SpanRow
    depth: int = 0
    children: list[TreeNode] = field(default_factory=list)
    note: str = ""


def cycle_entries(parents: dict[Any, Any], order: Any) -> list[Any]:
    """The spans to show as roots so that spans in parent cycles are not hidden: one per cycle.

    Args:
        parents: Span → parent, for the spans no root reaches (each one's parent is among them or
            leads into a cycle of them).
        order: A sort key for span ids: the first member of each cycle in this order is chosen.
    """
    state: dict[Any, int] = {}  # 1: on the current path, 2: done
    entries = []
    for start in parents:
        path = []
        node = start
        while node in parents and state.get(node, 0) == 0:
            state[node] = 1
            path.append(node)
            node = parents[node]
        if state.get(node) == 1:  # came back to the current path: a cycle from `node` on
            cycle = path[path.index(node) :]
            entries.append(min(cycle, key=order))
        for member in path:
            state[member] = 2
    return entries


def build_tree(spans: Sequence[SpanRow]) -> list[TreeNode]:
    """The root nodes of `spans`; a span whose parent is not in `spans` is a root too.

    A span id given more than once is shown once (the copy that ended last), with a note when the
    copies differ; the spans of a parent cycle (which no root reaches) hang under one of them,
    shown as a root with a note.
    """
    nodes: dict[str, TreeNode] = {}
    copies: dict[str, list[SpanRow]] = {}
    for span in spans:
        known = nodes.get(span.span_id)
        if known is None:
            nodes[span.span_id] = TreeNode(span)
            continue
        copies.setdefault(span.span_id, [known.span]).append(span)
        if (span.end_us, span.start_us) > (known.span.end_us, known.span.start_us):
            known.span = span
    for span_id, versions in copies.items():
        if len({(v.parent_span_id, v.start_us, v.end_us, v.name) for v in versions}) > 1:
            nodes[span_id].note = REUSED_NOTE.format(n=len(versions))
    roots: list[TreeNode] = []
    for node in nodes.values():
        span = node.span
        parent = nodes.get(span.parent_span_id) if span.parent_span_id else None
        if parent is None or parent is node:
            roots.append(node)
        else:
            parent.children.append(node)
    reached = {id(node) for node in walk(roots)}
    if len(reached) < len(nodes):
        stranded = {
            node.span.span_id: node.span.parent_span_id for node in nodes.values() if id(node) not in reached
        }
        for span_id in cycle_entries(stranded, lambda i: _order_key(nodes[i])):
            node = nodes[span_id]
            parent = nodes[node.span.parent_span_id or ""]
            parent.children.remove(node)
            node.note = CYCLE_NOTE
            roots.append(node)
    order = _order_key
    for node in nodes.values():
        node.children.sort(key=order)
    roots.sort(key=order)
    for root in roots:
        for node in walk([root]):
            for child in node.children:
                child.depth = node.depth + 1
    return roots


def _order_key(node: TreeNode) -> tuple[int, int, str]:
    return (node.span.start_us, node.span.end_us, node.span.span_id)


def walk(roots: Sequence[TreeNode]) -> Iterator[TreeNode]:
    """Depth-first, pre-order traversal (iterative: deep traces do not hit the recursion limit)."""
    stack = list(reversed(roots))
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def _shown(label: str, value: Any) -> str:
    if label == "cost" and isinstance(value, (int, float)):
        return f"cost={format_cost(value)}"
    if label == "ttfc" and isinstance(value, (int, float)):
        return f"ttfc={format_duration(float(value))}"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{label}={format_value(value, 40)}"


def _llm_call_cost(attrs: dict[str, Any]) -> float | None:
    """An instrumented SDK call's own price, from its `mastrace.usage` record (None: not priced)."""
    usage = attrs.get(semconv.MASTRACE_USAGE)
    if isinstance(usage, str) and usage.startswith("{"):
        try:
            usage = json.loads(usage)
        except ValueError:
            return None
    cost = usage.get("cost") if isinstance(usage, dict) else None
    if cost is None:  # the development GenAI conventions' cost attribute
        cost = attrs.get(semconv.GEN_AI_USAGE_COST_AMOUNT)
    return float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None


def key_attributes(span: SpanRow) -> list[str]:
    """The few attributes worth showing next to a span in a tree, as `label=value` strings."""
    attrs = span.attributes
    out = []
    for label, keys in _KEY_ATTRIBUTES:
        value = next((v for v in map(attrs.get, keys) if v is not None and v != ""), None)
        if value is None and label == "cost" and span.name.startswith(semconv.SPAN_LLM_PREFIX):
            value = _llm_call_cost(attrs)
        if value is not None:
            out.append(_shown(label, value))
    if attrs.get(semconv.MASTRACE_COST_UNKNOWN) is True:  # not a real $0: part of the cost has no price
        models = attrs.get(semconv.MASTRACE_COST_UNKNOWN_MODELS)
        known = attrs.get(semconv.MASSGEN_USAGE_COST)
        if not isinstance(known, (int, float)) or isinstance(known, bool):
            known = _llm_call_cost(attrs) if span.name.startswith(semconv.SPAN_LLM_PREFIX) else None
        out = [o for o in out if not o.startswith("cost=")]
        out.append("cost=" + format_cost(known, models if isinstance(models, list) and models else ["?"]))
    if attrs.get(semconv.MASSGEN_IS_WINNER) is True:
        out.append("winner")
    return out


def _error_text(span: SpanRow) -> str:
    if span.exception_type:
        message = f": {span.exception_message}" if span.exception_message else ""
        return format_value(f"{span.exception_type}{message}", 80)
    return format_value(
        span.otel_status_message or span.attributes.get(semconv.MASSGEN_ERROR_MESSAGE) or "error", 80
    )


def span_line(node: TreeNode, origin_us: int) -> str:
    """One line of a trace tree (without its indentation): name, duration, offset, key attributes."""
    span = node.span
    mark = "✗ " if span.is_error else ""
    timing = f"+{format_duration((span.start_us - origin_us) / 1e6)}"
    if span.state:  # started and not ended: still running, or left open by a process that ended
        parts = [f"{mark}{span.label}", f"… {span.state}", f"({timing})"]
    elif span.span_type == "log" or span.end_us == span.start_us:
        parts = [f"{mark}{span.label}", f"• {timing}"]
    else:
        parts = [f"{mark}{span.label}", format_duration(span.duration), f"({timing})"]
    parts += key_attributes(span)
    if span.is_error:
        parts.append(f"✗ {_error_text(span)}")
    if node.note:
        parts.append(f"⚠ {node.note}")
    return "  ".join(parts)


def render_tree(
    spans: Sequence[SpanRow], *, max_spans: int | None = None, roots: list[TreeNode] | None = None
) -> str:
    """The trace as text: one line per span with duration, start offset and key attributes.

    Args:
        spans: The spans of one trace.
        max_spans: Show at most this many lines (depth-first order); a note says how many were left out.
        roots: `build_tree(spans)`, when the caller has it already.
    """
    roots = build_tree(spans) if roots is None else roots
    if not roots:
        return ""
    return _render(roots, len({s.span_id for s in spans}), min(s.start_us for s in spans), max_spans)


def _render(roots: Sequence[TreeNode], total: int, origin: int, max_spans: int | None) -> str:
    lines: list[str] = []
    # Each stack entry: node, the indentation before its branch, whether it is the last sibling, is root.
    stack: list[tuple[TreeNode, str, bool, bool]] = [(r, "", True, True) for r in reversed(roots)]
    shown = 0
    while stack:
        node, indent, last, is_root = stack.pop()
        if max_spans is not None and shown >= max_spans:
            lines.append(f"… {total - shown} more span(s) not shown (raise --max-spans)")
            break
        branch = "" if is_root else ("└── " if last else "├── ")
        lines.append(f"{indent}{branch}{span_line(node, origin)}")
        shown += 1
        child_indent = indent if is_root else indent + ("    " if last else "│   ")
        for i, child in enumerate(reversed(node.children)):
            stack.append((child, child_indent, i == 0, False))
    return "\n".join(lines) + "\n"


def render_runs(
    runs: Sequence[RunSummary],
    *,
    marks: Mapping[str, str] | None = None,
    states: Mapping[str, str] | None = None,
) -> str:
    """The runs as a text table: trace id, ref, root span, start (UTC), duration, spans, errors, tokens,
    cost, and a `state` column when any run has spans still open.

    Args:
        runs: The runs, newest first.
        marks: Trace id → what to show in the `ref` column (`latest`, `previous`).
        states: Trace id → `running` or `unfinished`, for runs with open spans (see `open_runs`).
    """
    marks = marks or {}
    states = states or {}
    rows: list[tuple[str, ...]] = [
        (
            r.trace_id,
            marks.get(r.trace_id, ""),
            r.name,
            datetime.fromtimestamp(r.start_us / 1e6, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
            format_duration(r.duration),
            f"{r.spans:,}",
            f"{r.errors:,}" if r.errors else "",
            ""
            if r.input_tokens is None and r.output_tokens is None
            else f"{(r.input_tokens or 0) + (r.output_tokens or 0):,.0f}",
            r.cost_text,
        )
        for r in runs
    ]
    headers = [
        "trace id",
        "ref",
        "root span",
        "started (UTC)",
        "duration",
        "spans",
        "errors",
        "tokens",
        "cost",
    ]
    if any(r.trace_id in states for r in runs):
        headers.append("state")
        rows = [(*row, states.get(r.trace_id, "")) for row, r in zip(rows, runs, strict=True)]
    return text_table(headers, rows, align="llllrrrrrl"[: len(headers)])
