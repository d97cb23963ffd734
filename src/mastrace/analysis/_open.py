"""Spans that started and have not ended: what a live run is doing now, what a killed one left open.

Writers record the start of each span still open at a flush in the store's `pending/` folder (see
`mastrace.store`), which the `records` view never reads: no count or answer of its SQL changes.
Here those start records are merged with the spans that ended: a span whose end is in `records` is
that span, the others are open, `running` while their writer runs and `unfinished` once it ended.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import duckdb

from .. import semconv
from ..exceptions import StoreError
from ..store._schema import read_json_sql, view_sql
from ..store.reader import pending_files, readable_files
from ._spans import SpanRow, span_row
from ._store import RunSummary, TraceStore

__all__ = ["RUNNING", "UNFINISHED", "OpenRun", "open_runs", "open_spans", "with_open_runs"]

RUNNING = "running"
UNFINISHED = "unfinished"

_VIEW = "_mastrace_open_{state}"
_COLUMNS = """trace_id, span_id, parent_span_id, span_name, message, span_type, level,
       epoch_us(start_timestamp) AS start_us, epoch_us(start_timestamp) AS end_us, 0.0 AS duration,
       is_exception, exception_type, exception_message, otel_status_code, otel_status_message, otel_kind,
       otel_scope_name, otel_scope_version, service_name,
       CAST(attributes AS VARCHAR) AS attributes, CAST(otel_events AS VARCHAR) AS otel_events,
       CAST(otel_links AS VARCHAR) AS otel_links, exception_stacktrace,
       CAST(otel_resource_attributes AS VARCHAR) AS resource, start_timestamp"""
# The start records of every pending file, each with its writer's state, in one statement: spans
# that ended are left out (with `check`) in one pass over `records`.
_OPEN_SQL = """
SELECT * EXCLUDE (start_timestamp) FROM ({union}) AS p
WHERE {only}{ended}
ORDER BY start_timestamp, span_id
"""
_PART_SQL = "SELECT {columns}, '{state}' AS state FROM {view}"
_ENDED_SQL = (
    "\n  AND NOT EXISTS (SELECT 1 FROM records AS r WHERE r.trace_id = p.trace_id AND r.span_id = p.span_id)"
)


@dataclass(frozen=True)
class OpenRun:
    """A run with open spans: whether its process still runs, its open root (if open) and count."""

    trace_id: str
    state: str
    """`running` when any of its open spans is running, else `unfinished`."""
    start_us: int
    open: int
    root: SpanRow | None


def open_spans(store: TraceStore, trace_id: str | None = None, *, check: bool = True) -> list[SpanRow]:
    """The spans of `trace_id` (None: of every trace) that started and have not ended, by start time.

    Each has `state` set (`running` or `unfinished`) and its end equal to its start.

    Args:
        store: The store.
        trace_id: The trace; None for every trace.
        check: Leave out the spans whose end is in `records` (one pass over it). False: every start
            record, some of whose spans may have ended since, for a caller that finds those in a
            pass over `records` (or the trace's skeleton) that it makes anyway.
    """
    if not getattr(store, "paths", None):
        return []  # another source (ClickHouse, a Query API) has no start records
    for attempt in (1, 2):
        try:
            return _read_open(store, trace_id, check)
        except StoreError:
            # A writer that shut down deleted its pending file meanwhile: list them again. Start
            # records are a view of what runs now, never a reason for a page or command to fail.
            if attempt == 2:
                return []
    return []


def _read_open(store: TraceStore, trace_id: str | None, check: bool) -> list[SpanRow]:
    files = pending_files(store.paths)
    parts = []
    for state, running in ((RUNNING, True), (UNFINISHED, False)):
        names = readable_files([str(f.path) for f in files if f.running == running])
        if not names:
            continue
        view = _VIEW.format(state=state)
        # On the connection itself: `store.execute` would take `read_json`'s `records = true` for a
        # read of `records` and first scan the store for spans stored twice.
        try:
            store.con.execute(view_sql(read_json_sql(names), view))
        except duckdb.Error as exc:
            raise StoreError(f"cannot read the pending spans: {exc}") from exc
        parts.append(_PART_SQL.format(columns=_COLUMNS, state=state, view=view))
    if not parts:
        return []
    sql = _OPEN_SQL.format(
        union="\n  UNION ALL\n".join(parts),
        only="true" if trace_id is None else "trace_id = ?",
        ended=_ENDED_SQL if check else "",
    )
    found: list[SpanRow] = []
    for row in store.rows(sql, None if trace_id is None else [trace_id]):
        state = row.pop("state")
        span = span_row(row)
        span.state = state
        found.append(span)
    found.sort(key=lambda s: (s.start_us, s.span_id))
    return found


def open_runs(store: TraceStore) -> dict[str, OpenRun]:
    """Trace id → its open spans, summed up, for every trace that has any."""
    by_trace: dict[str, list[SpanRow]] = {}
    for span in open_spans(store):
        by_trace.setdefault(span.trace_id, []).append(span)
    out = {}
    for trace_id, spans in by_trace.items():
        roots = [s for s in spans if not s.parent_span_id]
        state = RUNNING if any(s.state == RUNNING for s in spans) else UNFINISHED
        out[trace_id] = OpenRun(
            trace_id, state, min(s.start_us for s in spans), len(spans), roots[0] if roots else None
        )
    return out


def with_open_runs(
    runs: Sequence[RunSummary], found: dict[str, OpenRun], *, now_us: int | None = None
) -> list[RunSummary]:
    """`runs` (newest first) with the runs that have no ended span yet added, and each run whose root is
    still open named after it. Totals (spans, errors, tokens, cost) stay those of the ended spans."""
    now = time.time_ns() // 1000 if now_us is None else now_us
    out = []
    for run in runs:
        opened = found.get(run.trace_id)
        if opened is not None and opened.root is not None:
            start = min(run.start_us, opened.root.start_us)
            run = replace(
                run,
                name=opened.root.name,
                start_us=start,
                duration=_so_far(opened, start, now, run.start_us + int(run.duration * 1e6)),
                is_session=opened.root.name == semconv.SPAN_COORDINATION_SESSION,
            )
        out.append(run)
    known = {run.trace_id for run in runs}
    for opened in found.values():
        if opened.trace_id in known:
            continue
        root = opened.root
        out.append(
            RunSummary(
                trace_id=opened.trace_id,
                name=root.name if root is not None else "(no span ended yet)",
                service_name=root.service_name if root is not None else None,
                start_us=opened.start_us,
                duration=_so_far(opened, opened.start_us, now, opened.start_us),
                spans=0,
                errors=0,
                input_tokens=None,
                output_tokens=None,
                cost=None,
                is_session=root is not None and root.name == semconv.SPAN_COORDINATION_SESSION,
            )
        )
    out.sort(key=lambda r: r.start_us, reverse=True)
    return out


def _so_far(opened: OpenRun, start_us: int, now_us: int, last_us: int) -> float:
    """Seconds a run has run: until now while running, until its last ended span when unfinished."""
    end = now_us if opened.state == RUNNING else max(last_us, start_us)
    return max(0, end - start_us) / 1e6
