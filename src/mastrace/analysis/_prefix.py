"""The first spans of a trace in depth-first order, found without reading the whole trace into Python.

A trace of a million spans prints its first lines (`mastrace tree`) or draws its first rows
(`mastrace view`) from two passes over the store and a few small queries:

1. DuckDB copies the trace's skeleton (ids, parent, times, error flag, segment file) into a
   temporary table: one pass over the segments.
2. Level by level from the roots, the children of the spans kept so far are ranked in DuckDB. A
   span is kept only while a lower bound of its depth-first position is below the limit: its
   parent's bound, plus one, plus one and the child count of each earlier sibling. Each level
   returns at most as many rows as the limit, and no level is read whole.
3. Python walks the kept spans depth first and stops at the limit; only those spans are then read
   in full, from the segment files that hold them.

The order is `build_tree`'s: siblings by start, end and span id (start and end in microseconds);
a span whose parent is not in the trace, or that is its own parent, is a root.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from .. import semconv
from ..store._schema import COLUMNS, VALID_ROW_SQL
from ..store.reader import segments_source
from ._store import SpanRow, TraceStore
from ._tree import TreeNode, span_line

__all__ = ["TracePrefix", "read_prefix", "render_trace"]

_SKELETON = "_mastrace_skeleton"
_ERROR_SQL = (
    f"({COLUMNS['otel_status_code'][1]} = 'ERROR' OR {COLUMNS['is_exception'][1]} "
    f"OR {COLUMNS['level'][1]} >= {semconv.LEVEL_ERROR})"
)
_KIDS = "_mastrace_kids"
_TOTALS_SQL = f"SELECT count(*), min(s), max(e), count_if(err) FROM {_SKELETON}"
# Each parent's number of children (self-parents left out).
_KIDS_SQL = (
    f"CREATE OR REPLACE TEMP TABLE {_KIDS} AS "
    f"SELECT parent, count(*) AS kids FROM {_SKELETON} WHERE parent <> span_id GROUP BY parent"
)
# One level of the walk: `c` holds the candidates (a parent's children, or the roots) with the
# lower bound of their parent (`plb`); each comes back with its rank among its siblings, their
# number, its own child count and the lower bound of its depth-first position, when that is below
# the limit.
_LEVEL_SQL = """
WITH a AS ({candidates}),
c AS (SELECT * FROM a WHERE plb + 1 + rank < $bound),
r AS (
    SELECT c.*, coalesce(g.kids, 0) AS kids
    FROM c LEFT JOIN {kids} AS g ON g.parent = c.span_id
),
b AS (
    SELECT span_id, parent, file, rank, n, kids,
           plb + 1 + rank + coalesce(sum(kids) OVER (
               PARTITION BY parent ORDER BY rank ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
           ), 0) AS lb
    FROM r
)
SELECT span_id, parent, file, rank, n, kids, lb FROM b WHERE lb < $bound ORDER BY parent, rank
"""


def _level_sql(parent: str, plb: str, partition: str, source: str, where: str) -> str:
    """`_LEVEL_SQL` over the candidates `source` keeps under `where`, ranked within `partition`,
    with `parent` and their parent's lower bound `plb`."""
    candidates = f"""
    SELECT span_id, {parent} AS parent, file, {plb} AS plb,
           row_number() OVER (PARTITION BY {partition} ORDER BY s, e, span_id) - 1 AS rank,
           count(*) OVER (PARTITION BY {partition}) AS n
    FROM {source}
    WHERE {where}
"""
    return _LEVEL_SQL.format(kids=_KIDS, candidates=candidates)


_ROOTS_SQL = _level_sql(
    parent="NULL::VARCHAR",
    plb="-1",
    partition="NULL",
    source=_SKELETON,
    # a root, its own parent, or an orphan (its parent is not in the trace)
    where=f"parent IS NULL OR parent = span_id OR parent IN ("
    f"SELECT k.parent FROM {_KIDS} AS k ANTI JOIN {_SKELETON} AS p ON p.span_id = k.parent)",
)
_CHILDREN_SQL = _level_sql(
    parent="k.parent",
    plb="f.lb",
    partition="k.parent",
    source=f"{_SKELETON} AS k JOIN "
    "(SELECT unnest($ids::VARCHAR[]) AS id, unnest($lbs::BIGINT[]) AS lb) AS f ON k.parent = f.id",
    where="k.parent <> k.span_id",
)


class _Kept(NamedTuple):
    span_id: str
    parent: str | None
    file: str | None
    rank: int
    n: int
    kids: int
    lb: int


@dataclass
class TracePrefix:
    """The first spans of a trace in depth-first order, read in full; the rest counted, not read.

    Attributes:
        shown: The prefix's nodes in depth-first order, with their depths set.
        last: For each of them, whether it is the last of its siblings.
        total: How many spans the trace has.
        origin_us: The trace's earliest start.
        end_us: The trace's latest end.
        errors: How many of the trace's spans are errors.
        truncated: Whether spans reachable from a root were left out.
    """

    shown: list[TreeNode]
    last: list[bool]
    total: int
    origin_us: int
    end_us: int
    errors: int = 0
    truncated: bool = False


def read_prefix(store: TraceStore, trace_id: str, max_spans: int | None) -> TracePrefix:
    """Read the first `max_spans` spans (None: all) of a trace in depth-first order, in full.

    Raises:
        StoreError: The trace has no spans in the store.
    """
    source = segments_source(store.paths)
    file_column = "filename" if source.startswith("read_json(") else "NULL::VARCHAR"
    store.execute(
        f"CREATE OR REPLACE TEMP TABLE {_SKELETON} AS "
        f"SELECT span_id, parent_span_id AS parent, start_ns // 1000 AS s, end_ns // 1000 AS e, "
        f"{_ERROR_SQL} AS err, {file_column} AS file "
        f"FROM {source} AS segments WHERE trace_id = ? AND {VALID_ROW_SQL}",
        [trace_id],
    )
    try:
        total, origin, end, errors = store.table(_TOTALS_SQL)[1][0]
        if not total:
            store.require_trace(trace_id, found=False)
        store.execute(_KIDS_SQL)
        # One more than asked: whether spans reachable from a root were left out.
        bound = (1 << 62) if max_spans is None else max(0, max_spans) + 1
        order = _walk(_levels(store, bound), bound)
    finally:
        store.execute(f"DROP TABLE IF EXISTS {_SKELETON}; DROP TABLE IF EXISTS {_KIDS}")
    truncated = max_spans is not None and len(order) > max_spans
    if truncated:
        order = order[: max(0, max_spans or 0)]
    files = sorted({kept.file for kept, _ in order if kept.file})
    ids = [kept.span_id for kept, _ in order]
    full = {span.span_id: span for span in store.spans(trace_id, only=ids, files=files or None)}
    shown = [
        TreeNode(full.get(kept.span_id) or SpanRow(trace_id, kept.span_id, None, "", 0, 0, 0.0), depth)
        for kept, depth in order
    ]
    last = [kept.rank == kept.n - 1 for kept, _ in order]
    return TracePrefix(shown, last, int(total), int(origin), int(end), int(errors or 0), truncated)


def render_trace(store: TraceStore, trace_id: str, *, max_spans: int | None = 2000) -> str:
    """`render_tree` of a trace read from `store`, reading only the printed spans.

    A trace of a million spans prints its first `max_spans` lines in about a second: only the
    printed spans are read into Python; DuckDB holds the trace's skeleton (about 60 bytes a span)
    while it runs.

    Args:
        store: The open store.
        trace_id: The trace (see `TraceStore.resolve`).
        max_spans: Print at most this many spans (None: all).
    """
    prefix = read_prefix(store, trace_id, max_spans)
    lines: list[str] = []
    # The indentation each open ancestor adds (depth 1 and below): blank under a last sibling.
    rails: list[str] = []
    for node, last in zip(prefix.shown, prefix.last, strict=True):
        depth = node.depth
        del rails[max(0, depth - 1) :]
        branch = "" if depth == 0 else ("└── " if last else "├── ")
        lines.append(f"{''.join(rails)}{branch}{span_line(node, prefix.origin_us)}")
        if depth > 0:
            rails.append("    " if last else "│   ")
    if prefix.truncated:
        lines.append(f"… {prefix.total - len(prefix.shown)} more span(s) not shown (raise --max-spans)")
    return "\n".join(lines) + "\n" if lines else ""


def _levels(store: TraceStore, bound: int) -> dict[str | None, list[_Kept]]:
    """The kept spans, as the kept children of each parent (None: the roots) in sibling order."""
    children: dict[str | None, list[_Kept]] = {}
    expanded: set[str] = set()  # a span id written twice is expanded once
    rows: Sequence[tuple[Any, ...]] = store.table(_ROOTS_SQL, {"bound": bound})[1]
    while rows:
        frontier: dict[str, int] = {}
        for row in rows:
            kept = _Kept(*row)
            children.setdefault(kept.parent, []).append(kept)
            if kept.kids and kept.lb + 1 < bound:
                frontier[kept.span_id] = kept.lb
        frontier = {k: v for k, v in frontier.items() if k not in expanded}
        if not frontier:
            break
        expanded.update(frontier)
        rows = store.table(
            _CHILDREN_SQL, {"ids": list(frontier), "lbs": list(frontier.values()), "bound": bound}
        )[1]
    return children


def _walk(children: dict[str | None, list[_Kept]], bound: int) -> list[tuple[_Kept, int]]:
    """The first `bound` kept spans in depth-first order, each with its depth."""
    order: list[tuple[_Kept, int]] = []
    stack = [(kept, 0) for kept in reversed(children.get(None, []))]
    while stack and len(order) < bound:
        kept, depth = stack.pop()
        order.append((kept, depth))
        stack.extend((child, depth + 1) for child in reversed(children.get(kept.span_id, [])))
    return order
