"""The first spans of a trace in depth-first order, found without reading the whole trace into Python.

A trace of a million spans prints its first lines (`mastrace tree`) or draws its first rows
(`mastrace view`) from two passes over the store and a few small queries:

1. DuckDB copies the trace's skeleton (ids, parent, times, error flag, segment file and where the
   span's line starts in it) into a temporary table, from the small skeleton files that writers
   keep beside their segments (or, for a segment without one, from the segment itself).
2. Level by level from the roots, the children of the spans kept so far are ranked in DuckDB. A
   span is kept only while a lower bound of its depth-first position is below the limit: its
   parent's bound, plus one, plus one and the child count of each earlier sibling. Each level
   returns at most as many rows as the limit, and no level is read whole.
3. Python walks the kept spans depth first and stops at the limit; only those spans are then read
   in full: their lines straight from where the skeleton says they start (each checked to be the
   span's, and read as `records` reads it), or through DuckDB when that fails.

The order is `build_tree`'s: siblings by start, end and span id (start and end in microseconds);
a span whose parent is not in the trace, or that is its own parent, is a root.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from .. import semconv
from ..exceptions import StoreError
from ..store._lines import MAX_LINE_BYTES
from ..store._schema import COLUMNS, VALID_ROW_SQL, read_json_sql, read_skeleton_sql
from ..store.reader import SkeletonFile, compacted_files, readable_files, skeleton_files
from ._open import open_spans
from ._spans import SpanRow, span_from_line
from ._store import TraceStore
from ._tree import CYCLE_NOTE, REUSED_NOTE, TreeNode, cycle_entries, span_line

__all__ = ["TracePrefix", "read_prefix", "render_trace"]

_SKELETON = "_mastrace_skeleton"
_ERROR_SQL = (
    f"({COLUMNS['otel_status_code'][1]} = 'ERROR' OR {COLUMNS['is_exception'][1]} "
    f"OR {COLUMNS['level'][1]} >= {semconv.LEVEL_ERROR})"
)
_KIDS = "_mastrace_kids"
_TOTALS_SQL = f"SELECT count(*), min(s), max(e), count_if(err) FROM {_SKELETON}"
# A span stored more than once is one span: the copy that ended last is kept (as in `records`).
_DISTINCT_SQL = f"SELECT count(*), count(DISTINCT span_id) FROM {_SKELETON}"
_REUSED_SQL = (
    f"SELECT span_id, count(*) FROM {_SKELETON} GROUP BY span_id HAVING count(DISTINCT (parent, s, e)) > 1"
)
_ONCE_SQL = f"""
DELETE FROM {_SKELETON} WHERE rowid IN (
    SELECT rowid FROM (
        SELECT rowid,
               row_number() OVER (PARTITION BY span_id ORDER BY e DESC, file DESC, off DESC NULLS LAST) AS r
        FROM {_SKELETON}
    ) WHERE r > 1
)"""
# Spans the walk from the roots did not reach (they hang under a parent cycle), and the cycle
# members that become roots so that they are shown.
_STRANDED_SQL = (
    f"SELECT span_id, parent, s, e FROM {_SKELETON} WHERE span_id NOT IN (SELECT unnest($ids::UBIGINT[]))"
)
_ROOTED_SQL = f"UPDATE {_SKELETON} SET parent = NULL WHERE span_id IN (SELECT unnest($ids::UBIGINT[]))"
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
    SELECT span_id, parent, file, off, rank, n, kids,
           plb + 1 + rank + coalesce(sum(kids) OVER (
               PARTITION BY parent ORDER BY rank ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
           ), 0) AS lb
    FROM r
)
SELECT span_id, parent, file, off, rank, n, kids, lb FROM b WHERE lb < $bound ORDER BY parent, rank
"""


def _level_sql(parent: str, plb: str, partition: str, source: str, where: str, n: str = "") -> str:
    """`_LEVEL_SQL` over the candidates `source` keeps under `where`, ranked within `partition`,
    with `parent`, their parent's lower bound `plb` and their number `n` (default: counted)."""
    candidates = f"""
    SELECT span_id, {parent} AS parent, file, off, {plb} AS plb,
           row_number() OVER (PARTITION BY {partition} ORDER BY s, e, span_id) - 1 AS rank,
           {n or f"count(*) OVER (PARTITION BY {partition})"} AS n
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
    "(SELECT unnest($ids::UBIGINT[]) AS id, unnest($lbs::BIGINT[]) AS lb) AS f ON k.parent = f.id",
    where="k.parent <> k.span_id",
)
# The children of one parent (`$id`, with `$n` children and lower bound `$plb`): only the first
# `$bound - $plb - 1` can be kept, which DuckDB finds without sorting them all.
_ONLY_CHILDREN_SQL = _level_sql(
    parent="parent",
    plb="$plb",
    partition="NULL",
    source=f"(SELECT * FROM {_SKELETON} WHERE parent = $id AND parent <> span_id "
    "ORDER BY s, e, span_id LIMIT greatest($bound - $plb - 1, 0))",
    where="true",
    n="$n",
)
# The segment files, numbered as the skeleton's `file` column numbers them.
_FILES = (
    "(SELECT unnest($names::VARCHAR[]) AS name, unnest($whole::BIGINT[]) AS whole, "
    "generate_subscripts($names::VARCHAR[], 1) - 1 AS i) AS f"
)
# Span ids are 64-bit numbers in the skeleton (as in its files), which DuckDB joins faster than text.
_FROM_SKELETON_FILES = f"""
SELECT k.span_id, k.parent, k.start_ns // 1000 AS s, k.end_ns // 1000 AS e, k.err = 1 AS err, f.i AS file,
       k.base + k.rel AS off
FROM {{source}} AS k JOIN {_FILES} ON f.name = k.filename
WHERE k.trace_id = $trace AND k.err IS NOT NULL AND k.span_id IS NOT NULL AND k.start_ns IS NOT NULL
      AND k.end_ns IS NOT NULL AND k.base + k.rel < f.whole
"""
_FROM_SEGMENTS = f"""
SELECT TRY_CAST('0x' || span_id AS UBIGINT) AS span_id, TRY_CAST('0x' || parent_span_id AS UBIGINT) AS parent,
       start_ns // 1000 AS s, end_ns // 1000 AS e, {_ERROR_SQL} AS err, f.i AS file, NULL::BIGINT AS off
FROM {{source}} AS segments JOIN {_FILES} ON f.name = segments.filename
WHERE trace_id = $trace AND {VALID_ROW_SQL} AND TRY_CAST('0x' || span_id AS UBIGINT) IS NOT NULL
"""


# A store with no files of its own (`SourceStore`): the skeleton comes from `records` itself.
_FROM_RECORDS = f"""
SELECT TRY_CAST('0x' || span_id AS UBIGINT) AS span_id, TRY_CAST('0x' || parent_span_id AS UBIGINT) AS parent,
       epoch_us(start_timestamp) AS s, epoch_us(end_timestamp) AS e,
       (otel_status_code = 'ERROR' OR is_exception OR level >= {semconv.LEVEL_ERROR}) AS err,
       NULL::BIGINT AS file, NULL::BIGINT AS off
FROM records
WHERE trace_id = $trace AND TRY_CAST('0x' || span_id AS UBIGINT) IS NOT NULL
"""


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class _Kept(NamedTuple):
    span_id: int
    parent: int | None
    file: int | None
    off: int | None
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
    if store.paths:
        paired, alone = skeleton_files(store.paths)
        compacted = compacted_files(store.paths)  # listed after the segments (see `store._manifest`)
        try:
            _copy_skeleton(store, trace_id, paired, alone, compacted)
        except StoreError:  # a skeleton file that cannot be read: every segment's JSON instead
            paired, alone = [], [f.segment for f in paired] + alone
            _copy_skeleton(store, trace_id, paired, alone, compacted)
        files = [str(f.segment) for f in paired] + [str(p) for p in alone] + [str(p) for p in compacted]
        opened = _add_open(store, trace_id)
    else:
        store.execute(f"CREATE OR REPLACE TEMP TABLE {_SKELETON} AS {_FROM_RECORDS}", {"trace": trace_id})
        files, opened = [], {}
    try:
        notes = _once(store)
        total, origin, end, errors = store.table(_TOTALS_SQL)[1][0]
        if not total:
            store.require_trace(trace_id, found=False)
        store.execute(_KIDS_SQL)
        # One more than asked: whether spans reachable from a root were left out.
        bound = (1 << 62) if max_spans is None else max(0, max_spans) + 1
        order = _walk(_levels(store, bound), bound)
        if len(order) < min(bound, total) and _break_cycles(store, order, notes):
            order = _walk(_levels(store, bound), bound)
    finally:
        store.execute(f"DROP TABLE IF EXISTS {_SKELETON}; DROP TABLE IF EXISTS {_KIDS}")
    truncated = max_spans is not None and len(order) > max_spans
    if truncated:
        order = order[: max(0, max_spans or 0)]
    ended = [kept for kept, _ in order if f"{kept.span_id:016x}" not in opened]
    full = _read_spans(store, trace_id, ended, files)
    full.update(opened)
    shown = []
    for kept, depth in order:
        span_id = f"{kept.span_id:016x}"
        row = full.get(span_id) or SpanRow(trace_id, span_id, None, "", 0, 0, 0.0)
        shown.append(TreeNode(row, depth, note=notes.get(kept.span_id, "")))
    last = [kept.rank == kept.n - 1 for kept, _ in order]
    return TracePrefix(shown, last, int(total), int(origin), int(end), int(errors or 0), truncated)


def _add_open(store: TraceStore, trace_id: str) -> dict[str, SpanRow]:
    """Add the trace's open spans (started, not ended: see `_open`) to `_SKELETON`; return them by id.

    A start record whose span's end is in the skeleton (the trace's ended spans, just copied) is that
    span: `records` is not read for it."""
    opened = {span.span_id: span for span in open_spans(store, trace_id, check=False)}
    if opened:
        ended = store.table(
            f"SELECT span_id FROM {_SKELETON} WHERE span_id IN (SELECT unnest($i::UBIGINT[]))",
            {"i": [int(span_id, 16) for span_id in opened]},
        )[1]
        for (span_id,) in ended:
            opened.pop(f"{int(span_id):016x}", None)
    if opened:
        spans = list(opened.values())
        store.execute(
            f"INSERT INTO {_SKELETON} SELECT unnest($i::UBIGINT[]), unnest($p::UBIGINT[]), "
            "unnest($s::BIGINT[]), unnest($s::BIGINT[]), false, NULL, NULL",
            {
                "i": [int(s.span_id, 16) for s in spans],
                "p": [int(s.parent_span_id, 16) if s.parent_span_id else None for s in spans],
                "s": [s.start_us for s in spans],
            },
        )
    return opened


def _once(store: TraceStore) -> dict[int, str]:
    """Keep one copy of each span in `_SKELETON` (the one that ended last, as `records` does); return
    a note for each span id whose copies differ (an id reused by different spans)."""
    (rows, distinct), *_ = store.table(_DISTINCT_SQL)[1]
    if rows == distinct:
        return {}
    notes = {int(span_id): REUSED_NOTE.format(n=n) for span_id, n in store.table(_REUSED_SQL)[1]}
    store.execute(_ONCE_SQL)
    return notes


def _break_cycles(store: TraceStore, order: list[tuple[_Kept, int]], notes: dict[int, str]) -> bool:
    """Every span a root reaches was walked and some are left: they hang under parent cycles. Make
    one span of each cycle a root (noted in `notes`); return whether there was any."""
    reached = [kept.span_id for kept, _ in order]
    rows = store.table(_STRANDED_SQL, {"ids": reached})[1]
    parents = {int(span_id): int(parent) for span_id, parent, _, _ in rows if parent is not None}
    order_key = {int(span_id): (s, e, int(span_id)) for span_id, _, s, e in rows}
    entries = cycle_entries(parents, order_key.__getitem__)
    if not entries:
        return False
    store.execute(_ROOTED_SQL, {"ids": entries})
    store.execute(_KIDS_SQL)
    notes.update(dict.fromkeys(entries, CYCLE_NOTE))
    return True


def _copy_skeleton(
    store: TraceStore, trace_id: str, paired: list[SkeletonFile], alone: list[Path], compacted: list[Path]
) -> None:
    """Copy the trace's skeleton into `_SKELETON`: from skeleton files, from segments without one,
    and from compacted files (sorted by trace: DuckDB reads only the row groups that may hold it)."""
    names = [str(f.skeleton) for f in paired] + [str(p) for p in alone] + [str(p) for p in compacted]
    whole = [f.whole for f in paired] + [0] * (len(alone) + len(compacted))
    parts = []
    if paired:
        parts.append(_FROM_SKELETON_FILES.format(source=read_skeleton_sql(names[: len(paired)])))
    if alone:
        # A segment holding a line too long to read is read as a copy without it: named as DuckDB sees it.
        names[len(paired) : len(paired) + len(alone)] = readable_files(
            names[len(paired) : len(paired) + len(alone)]
        )
        parts.append(
            _FROM_SEGMENTS.format(source=read_json_sql(names[len(paired) : len(paired) + len(alone)]))
        )
    if compacted:
        source = "read_parquet([" + ", ".join(_quote(n) for n in names[-len(compacted) :]) + "])"
        parts.append(_FROM_SEGMENTS.format(source=source))
    select = " UNION ALL ".join(parts) or (
        "SELECT NULL::UBIGINT AS span_id, NULL::UBIGINT AS parent, 0 AS s, 0 AS e, false AS err, "
        "0 AS file, NULL::BIGINT AS off WHERE false"
    )
    params = {"trace": trace_id, "names": names, "whole": whole} if parts else None
    store.execute(f"CREATE OR REPLACE TEMP TABLE {_SKELETON} AS {select}", params)


def _read_spans(store: TraceStore, trace_id: str, kept: list[_Kept], files: list[str]) -> dict[str, SpanRow]:
    """The `kept` spans in full, by span id: read at their offsets when the skeleton has them, else with
    DuckDB from the segments that hold them."""
    rows: dict[str, SpanRow] = {}
    by_file: dict[int, list[_Kept]] = {}
    rest: list[_Kept] = []
    for span in kept:
        if span.off is not None and span.file is not None:
            by_file.setdefault(span.file, []).append(span)
        else:
            rest.append(span)
    for index, spans in by_file.items():
        for line in _read_lines(files[index], spans):
            row = span_from_line(line)
            if row is not None and row.trace_id == trace_id:  # a stale offset reads some other line
                rows[row.span_id] = row
        rest.extend(span for span in spans if f"{span.span_id:016x}" not in rows)
    if rest:  # what has no skeleton, and lines that only DuckDB can read as `records` does
        found = store.spans(
            trace_id,
            only=[f"{span.span_id:016x}" for span in rest],
            files=sorted({files[span.file] for span in rest if span.file is not None}) or None,
        )  # (files that include a compacted one are not used: `records` is read, sorted by trace)
        rows.update((row.span_id, row) for row in found)
    return rows


def _read_lines(path: str, spans: list[_Kept], chunk: int = 4096) -> list[bytes]:
    """The lines that start where the skeleton says `spans` start in the segment at `path`; a line
    that is not there whole is left out (what a line holds is checked by the caller)."""
    found: list[bytes] = []
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return found
    try:
        for offset in sorted(span.off or 0 for span in spans):
            data = os.pread(fd, chunk, offset)
            end = data.find(b"\n")
            while end < 0 and len(data) % chunk == 0 and 0 < len(data) <= MAX_LINE_BYTES:  # a long line
                more = os.pread(fd, len(data), offset + len(data))
                if not more:
                    break
                data += more
                end = data.find(b"\n")
            if end >= 0:
                found.append(data[: end + 1])
    except OSError:
        pass
    finally:
        os.close(fd)
    return found


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


def _levels(store: TraceStore, bound: int) -> dict[int | None, list[_Kept]]:
    """The kept spans, as the kept children of each parent (None: the roots) in sibling order."""
    children: dict[int | None, list[_Kept]] = {}
    expanded: set[int] = set()  # a span id written twice is expanded once
    rows: Sequence[tuple[Any, ...]] = store.table(_ROOTS_SQL, {"bound": bound})[1]
    while rows:
        frontier: dict[int, _Kept] = {}
        for row in rows:
            kept = _Kept(*row)
            children.setdefault(kept.parent, []).append(kept)
            if kept.kids and kept.lb + 1 < bound and kept.span_id not in expanded:
                frontier[kept.span_id] = kept
        if not frontier:
            break
        expanded.update(frontier)
        if len(frontier) == 1:  # e.g. a session's rounds: a wide level under one span
            (only,) = frontier.values()
            params = {"id": only.span_id, "plb": only.lb, "n": only.kids, "bound": bound}
            rows = store.table(_ONLY_CHILDREN_SQL, params)[1]
        else:
            lbs = [kept.lb for kept in frontier.values()]
            rows = store.table(_CHILDREN_SQL, {"ids": list(frontier), "lbs": lbs, "bound": bound})[1]
    return children


def _walk(children: dict[int | None, list[_Kept]], bound: int) -> list[tuple[_Kept, int]]:
    """The first `bound` kept spans in depth-first order, each with its depth."""
    order: list[tuple[_Kept, int]] = []
    stack = [(kept, 0) for kept in reversed(children.get(None, []))]
    while stack and len(order) < bound:
        kept, depth = stack.pop()
        order.append((kept, depth))
        stack.extend((child, depth + 1) for child in reversed(children.get(kept.span_id, [])))
    return order
