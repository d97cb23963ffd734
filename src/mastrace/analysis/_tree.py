"""Arrange a trace's spans as a tree and render it as text with box-drawing indentation."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .. import semconv
from .._texttable import text_table
from ._kinds import format_duration, format_value
from ._store import RunSummary, SpanRow, TraceStore

__all__ = [
    "TracePrefix",
    "TreeNode",
    "build_tree",
    "key_attributes",
    "read_prefix",
    "render_runs",
    "render_trace",
    "render_tree",
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
    ("ttfc", (semconv.MASTRACE_TIME_TO_FIRST_CHUNK,)),
    ("interrupted", (semconv.MASTRACE_INTERRUPTED,)),
)


@dataclass
class TreeNode:
    """A span with its depth and its children, ordered by start time."""

    span: SpanRow
    depth: int = 0
    children: list[TreeNode] = field(default_factory=list)


def build_tree(spans: Sequence[SpanRow]) -> list[TreeNode]:
    """The root nodes of `spans`; a span whose parent is not in `spans` is a root too."""
    nodes = {s.span_id: TreeNode(s) for s in spans}
    roots: list[TreeNode] = []
    for span in spans:
        node = nodes[span.span_id]
        parent = nodes.get(span.parent_span_id) if span.parent_span_id else None
        if parent is None or parent is node:
            roots.append(node)
        else:
            parent.children.append(node)
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
        return f"cost=${value:.4f}"
    if label == "ttfc" and isinstance(value, (int, float)):
        return f"ttfc={format_duration(float(value))}"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{label}={format_value(value, 40)}"


def key_attributes(span: SpanRow) -> list[str]:
    """The few attributes worth showing next to a span in a tree, as `label=value` strings."""
    attrs = span.attributes
    out = []
    for label, keys in _KEY_ATTRIBUTES:
        for key in keys:
            value = attrs.get(key)
            if value is not None and value != "":
                out.append(_shown(label, value))
                break
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


def _line(node: TreeNode, origin_us: int) -> str:
    span = node.span
    mark = "✗ " if span.is_error else ""
    timing = f"+{format_duration((span.start_us - origin_us) / 1e6)}"
    if span.span_type == "log" or span.end_us == span.start_us:
        parts = [f"{mark}{span.label}", f"• {timing}"]
    else:
        parts = [f"{mark}{span.label}", format_duration(span.duration), f"({timing})"]
    parts += key_attributes(span)
    if span.is_error:
        parts.append(f"✗ {_error_text(span)}")
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
    return _render(roots, len(spans), min(s.start_us for s in spans), max_spans)


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
        lines.append(f"{indent}{branch}{_line(node, origin)}")
        shown += 1
        child_indent = indent if is_root else indent + ("    " if last else "│   ")
        for i, child in enumerate(reversed(node.children)):
            stack.append((child, child_indent, i == 0, False))
    return "\n".join(lines) + "\n"


# The hierarchy only: ids, in the order `build_tree` sorts siblings (start, end, span id).
_SKELETON_SQL = """
SELECT span_id, parent_span_id, epoch_us(start_timestamp) AS start_us
FROM records WHERE trace_id = ?
ORDER BY start_timestamp, end_timestamp, span_id
"""


@dataclass
class TracePrefix:
    """The first spans of a trace in depth-first order, read in full; the rest counted, not read.

    Attributes:
        roots: The root nodes; a node's children past the prefix are placeholders never shown.
        shown: The prefix's nodes in depth-first order, with their depths set.
        total: How many spans the trace has.
        origin_us: The trace's earliest start.
    """

    roots: list[TreeNode]
    shown: list[TreeNode]
    total: int
    origin_us: int


def read_prefix(store: TraceStore, trace_id: str, max_spans: int | None) -> TracePrefix:
    """Read a trace's hierarchy as ids, then only its first `max_spans` spans (None: all) in full.

    A trace of a million spans is read in seconds, with memory that grows with what is shown.
    The order is `build_tree`'s: siblings by start, end and span id; orphans are roots.
    """
    _, rows = store.table(_SKELETON_SQL, [trace_id])
    if not rows:
        store.require_trace(trace_id, found=False)
    present = {row[0] for row in rows}
    children: dict[str, list[str]] = {}
    top: list[str] = []
    for span_id, parent, _start in rows:
        if parent is None or parent == span_id or parent not in present:
            top.append(span_id)
        else:
            children.setdefault(parent, []).append(span_id)
    del present
    chosen: list[tuple[str, int]] = []
    stack = [(r, 0) for r in reversed(top)]
    while stack and (max_spans is None or len(chosen) < max_spans):
        span_id, depth = stack.pop()
        chosen.append((span_id, depth))
        stack.extend((child, depth + 1) for child in reversed(children.get(span_id, ())))
    full = {span.span_id: span for span in store.spans(trace_id, only=[i for i, _ in chosen])}
    nodes: dict[str, TreeNode] = {}

    def node(span_id: str) -> TreeNode:
        found = nodes.get(span_id)
        if found is None:  # a sibling past the limit: never shown, only drawn as a branch
            span = full.get(span_id) or SpanRow(trace_id, span_id, None, "", 0, 0, 0.0)
            found = nodes[span_id] = TreeNode(span)
        return found

    shown = []
    for span_id, depth in chosen:
        current = node(span_id)
        current.depth = depth
        current.children = [node(child) for child in children.get(span_id, ())]
        shown.append(current)
    return TracePrefix([node(r) for r in top], shown, len(rows), rows[0][2])


def render_trace(store: TraceStore, trace_id: str, *, max_spans: int | None = 2000) -> str:
    """`render_tree` of a trace read from `store`, reading attributes only for the printed spans.

    A trace of a million spans prints its first `max_spans` lines in seconds, with memory that
    grows with what is printed, not with the trace.

    Args:
        store: The open store.
        trace_id: The trace (see `TraceStore.resolve`).
        max_spans: Print at most this many spans (None: all).
    """
    prefix = read_prefix(store, trace_id, max_spans)
    return _render(prefix.roots, prefix.total, prefix.origin_us, max_spans)


def render_runs(runs: Sequence[RunSummary]) -> str:
    """The runs as a text table: trace id, root span, start (UTC), duration, spans, errors, tokens, cost."""
    rows = [
        (
            r.trace_id,
            r.name,
            datetime.fromtimestamp(r.start_us / 1e6, tz=UTC).strftime("%Y-%m-%d %H:%M:%S"),
            format_duration(r.duration),
            r.spans,
            r.errors or "",
            ""
            if r.input_tokens is None and r.output_tokens is None
            else f"{(r.input_tokens or 0) + (r.output_tokens or 0):,.0f}",
            f"${r.cost:.4f}" if r.cost is not None else "",
        )
        for r in runs
    ]
    headers = ["trace id", "root span", "started (UTC)", "duration", "spans", "errors", "tokens", "cost"]
    return text_table(headers, rows, align="lllrrrrr")
