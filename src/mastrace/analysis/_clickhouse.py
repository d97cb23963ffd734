"""Analysis over ClickHouse's `otel_traces` (the OpenTelemetry Collector `clickhouse` exporter's table).

`ClickHouseStore` is a `TraceStore` whose spans come from ClickHouse, through `clickhouse-connect`
(a server over HTTP, or chDB in-process for `chdb:///path`). The questions that span the whole
table (which traces exist, the newest sessions, which ids start with a prefix, the newest runs) are
asked in ClickHouse SQL over `otel_traces` itself, so they read a few columns there. The spans of
the traces a command needs are then read (one trace by its `TraceId`; the newest roots' traces for
`runs`), each row turned back into the span it was (`row_to_span`, attribute types restored from
mastrace's semantic conventions) and written through the local store's own row builder into a
private temporary store: the tree, the analysis, the view, the diff and `mastrace query` (Logfire's
SQL, in DuckDB) read it exactly as they read a local store, and answer the same for the same spans.

Reads are bounded: at most `max_spans` spans are copied (the newest traces first), each ClickHouse
query runs under `max_execution_time`, and a read that was cut says so (`notes`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from .. import semconv
from ..exceptions import StoreError
from ..store._clickhouse import ClickHouseTarget, row_to_span
from ..store._limits import QueryLimits
from ..store._lines import readable_copies_folder
from ..store._rows import RowEncoder
from ..store._schema import ROOTS_DIR, SEGMENT_SUFFIX, SEGMENTS_DIR, SKELETON_DIR
from ..store.reader import refresh_views
from ._store import RunSummary, SpanRow, TraceStore

__all__ = ["CLICKHOUSE_MAX_SPANS", "ClickHouseStore", "open_clickhouse"]

CLICKHOUSE_MAX_SPANS: Final = 2_000_000
"""Spans one command copies out of ClickHouse at most (the newest traces first)."""
DEFAULT_TIMEOUT: Final = 300.0
_IDS_PER_QUERY: Final = 1000
# The columns read for a span, named as `row_to_span` reads them (times as epoch nanoseconds).
_SPAN_SELECT: Final = """
SELECT toUnixTimestamp64Nano(Timestamp) AS ts, TraceId, SpanId, ParentSpanId, SpanName, SpanKind,
       ServiceName, ResourceAttributes, ScopeName, ScopeVersion, SpanAttributes, Duration, StatusCode,
       StatusMessage, arrayMap(t -> toUnixTimestamp64Nano(t), Events.Timestamp) AS ev_ts,
       Events.Name AS ev_name, Events.Attributes AS ev_attrs, Links.TraceId AS lk_trace,
       Links.SpanId AS lk_span, Links.Attributes AS lk_attrs
FROM {table}
WHERE TraceId IN {ids:Array(String)}
ORDER BY TraceId, Timestamp
LIMIT {room:UInt64}
"""
_RENAMED: Final = {
    "ts": "Timestamp",
    "ev_ts": "Events.Timestamp",
    "ev_name": "Events.Name",
    "ev_attrs": "Events.Attributes",
    "lk_trace": "Links.TraceId",
    "lk_span": "Links.SpanId",
    "lk_attrs": "Links.Attributes",
}
_SESSION_ROOT: Final = f"ParentSpanId = '' AND SpanName = '{semconv.SPAN_COORDINATION_SESSION}'"


def open_clickhouse(
    source: str,
    *,
    sandbox: bool = False,
    limits: QueryLimits | None = None,
    max_spans: int = CLICKHOUSE_MAX_SPANS,
) -> ClickHouseStore:
    """A `ClickHouseStore` over the `clickhouse://` or `chdb://` URL `source`; with `sandbox`, the
    newest spans (up to `max_spans`) are copied at once and the local SQL is locked to them, for
    SQL someone else wrote (the Query API, MCP).

    Raises:
        StoreError: Not a ClickHouse URL, or ClickHouse cannot be reached or read.
    """
    from ..store._clickhouse import parse_target

    store = ClickHouseStore(parse_target(source), limits=limits, max_spans=max_spans)
    if sandbox:
        try:
            store.load_newest(None)
            store.lock()
        except BaseException:
            store.close()
            raise
    return store


class ClickHouseStore(TraceStore):
    """A `TraceStore` over ClickHouse's `otel_traces`.

    Args:
        target: The table (see `mastrace.store._clickhouse.parse_target`).
        limits: Time, memory and row limits of the local SQL (as `TraceStore` has); its timeout is
            also each ClickHouse query's `max_execution_time`.
        max_spans: Spans copied out of ClickHouse at most, over the store's life.

    Example:
        ```python
        with ClickHouseStore(parse_target("chdb:///data/ch")) as store:
            report = build_report(store, store.resolve("latest"))
        ```
    """

    def __init__(
        self,
        target: ClickHouseTarget,
        *,
        limits: QueryLimits | None = None,
        max_spans: int = CLICKHOUSE_MAX_SPANS,
    ) -> None:
        self.target = target
        self.max_spans = max_spans
        self.timeout = (limits.timeout if limits is not None else None) or DEFAULT_TIMEOUT
        self.client = target.client(self.timeout)
        self._folder = Path(tempfile.mkdtemp(prefix="mastrace-clickhouse-"))
        for sub in (SEGMENTS_DIR, ROOTS_DIR):
            (self._folder / sub).mkdir()
        try:
            super().__init__(self._folder, limits=limits)
        except BaseException:
            shutil.rmtree(self._folder, ignore_errors=True)
            raise
        self.notes: list[str] = []
        """What a read left out, one line each (the CLI says them on stderr)."""
        self.copied = 0
        self._loaded: set[str] = set()
        self._segments = 0
        self._encoder = RowEncoder()

    @property
    def where(self) -> str:
        return self.target.url

    def close(self) -> None:
        try:
            super().close()
        finally:
            with contextlib.suppress(Exception):
                self.client.close()
            shutil.rmtree(self._folder, ignore_errors=True)

    # -- ClickHouse ----------------------------------------------------------------------------------
    def remote(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Rows of ClickHouse SQL `sql` (`{table}` is the target table), as dicts.

        Raises:
            StoreError: ClickHouse refused the query or did not answer in time.
        """
        try:
            result = self.client.query(
                sql.replace("{table}", self.target.qualified),
                parameters=parameters,
                settings={"max_execution_time": int(self.timeout)},
            )
        except Exception as exc:  # the client's errors differ by backend
            lines = str(exc).strip().splitlines()
            if "UNKNOWN_TABLE" in str(exc) or "UNKNOWN_DATABASE" in str(exc):
                raise StoreError(
                    f"no table {self.target.qualified} in ClickHouse at {self.target.url} (the Collector's "
                    "clickhouse exporter, `mastrace push --to` and `mastrace serve --to` create it)"
                ) from exc
            raise StoreError(
                f"ClickHouse at {self.target.url} refused a query: {lines[0][:500] if lines else exc!r}"
            ) from exc
        names = list(result.column_names)
        return [dict(zip(names, row, strict=True)) for row in result.result_rows]

    def ensure_not_empty(self) -> None:
        if not self.remote("SELECT 1 AS one FROM {table} LIMIT 1"):
            raise StoreError(f"the ClickHouse table at {self.target.url} has no spans")

    def index(self) -> list[Any]:
        from ._store import RunRef

        found = self.remote(
            "SELECT TraceId, toUnixTimestamp64Micro(min(Timestamp)) AS start_us, "
            f"max({_SESSION_ROOT}) AS is_session FROM {{table}} GROUP BY TraceId"
        )
        refs = [RunRef(str(r["TraceId"]), int(r["start_us"]), bool(r["is_session"])) for r in found]
        refs.sort(key=lambda r: (r.is_session, r.start_us), reverse=True)
        return refs

    def _latest_sessions(self, limit: int) -> list[str]:
        found = self.remote(
            f"SELECT TraceId, min(Timestamp) AS started FROM {{table}} WHERE {_SESSION_ROOT} "
            "GROUP BY TraceId ORDER BY started DESC LIMIT {n:UInt32}",
            {"n": limit},
        )
        return [str(r["TraceId"]) for r in found]

    def _matching(self, prefix: str) -> list[str]:
        found = self.remote(
            "SELECT DISTINCT TraceId FROM {table} WHERE startsWith(TraceId, {p:String}) LIMIT 3",
            {"p": prefix},
        )
        return [str(r["TraceId"]) for r in found]

    def newest_traces(self, limit: int | None) -> list[str]:
        """The trace ids of the newest `limit` root spans (all when None), newest first."""
        found = self.remote(
            "SELECT TraceId, min(Timestamp) AS started FROM {table} WHERE ParentSpanId = '' "
            "GROUP BY TraceId ORDER BY started DESC" + (" LIMIT {n:UInt32}" if limit else ""),
            {"n": limit} if limit else None,
        )
        return [str(r["TraceId"]) for r in found]

    # -- copying spans here --------------------------------------------------------------------------
    def load(self, trace_ids: Sequence[str]) -> None:
        """Copy every span of these traces into the local store (within `max_spans` in all)."""
        wanted = [t for t in dict.fromkeys(trace_ids) if t not in self._loaded]
        lines: list[str] = []
        roots: list[str] = []
        cut = 0
        cache: dict[Any, Any] = {}
        for start in range(0, len(wanted), _IDS_PER_QUERY):
            ids = wanted[start : start + _IDS_PER_QUERY]
            room = self.max_spans - self.copied - len(lines)
            if room <= 0:
                cut += len(wanted) - start
                break
            rows = self.remote(_SPAN_SELECT, {"ids": ids, "room": room + 1})
            if len(rows) > room:
                rows = rows[:room]
                cut += 1
            for row in rows:
                try:
                    span = row_to_span({_RENAMED.get(k, k): v for k, v in row.items()}, cache)
                except (ValueError, TypeError, KeyError):
                    continue
                line = self._encoder.line(span, span.end_time or 0)
                lines.append(line)
                if span.parent is None:
                    roots.append(line)
            self._loaded.update(ids)
        if cut:
            self.notes.append(
                f"only {self.max_spans:,} spans were read from ClickHouse at {self.target.url}: "
                f"the rest of {cut:,} trace(s) was left out (raise --max-spans-read)"
            )
        self._write(lines, roots)

    def _write(self, lines: list[str], roots: list[str]) -> None:
        if not lines:
            return
        self._segments += 1
        name = f"clickhouse-{self._segments:06d}{SEGMENT_SUFFIX}"
        (self._folder / ROOTS_DIR / name).write_text("".join(roots), encoding="utf-8")
        (self._folder / SEGMENTS_DIR / name).write_text("".join(lines), encoding="utf-8")
        self.copied += len(lines)
        refresh_views(self.con, self.paths, check=False)
        self._health = None

    def load_newest(self, limit: int | None) -> None:
        """Copy the newest `limit` runs (all when None), newest first, within `max_spans`."""
        self.load(self.newest_traces(limit))

    def lock(self) -> None:
        """Lock the local SQL to the copied spans, as a sandboxed local store is: no other files,
        databases, extensions or settings (for SQL someone else wrote)."""
        folders = [str(self._folder / d) + os.sep for d in (SEGMENTS_DIR, ROOTS_DIR, SKELETON_DIR)]
        folders.append(str(readable_copies_folder()) + os.sep)
        self.con.execute("SET allowed_directories = ?", [folders])
        self.con.execute("SET enable_external_access = false")
        self.con.execute("SET lock_configuration = true")

    # -- the TraceStore questions, on copied spans --------------------------------------------------
    def resolve(self, ref: str | None) -> str:
        """Turn `ref` into a trace id, as `TraceStore.resolve` does, and copy that trace's spans here."""
        trace_id = super().resolve(ref)
        self.load([trace_id])
        return trace_id

    def runs(self, limit: int | None = None) -> list[RunSummary]:
        """One summary per trace, newest first: the traces of the newest `limit` root spans."""
        self.load_newest(limit or None)
        found = super().runs(limit)
        if not found:
            self.ensure_not_empty()
        return found

    def spans(self, trace_id: str, **kwargs: Any) -> list[SpanRow]:
        self.load([trace_id])
        return super().spans(trace_id, **kwargs)

    def fill(self, trace_id: str, spans: Sequence[SpanRow]) -> None:
        self.load([trace_id])
        super().fill(trace_id, spans)

    def require_trace(self, trace_id: str, *, found: bool) -> None:
        if found:
            return
        self.ensure_not_empty()
        raise StoreError(f"no trace {trace_id!r} in ClickHouse at {self.target.url} (see `mastrace runs`)")
