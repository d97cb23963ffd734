"""Read runs and spans out of the local store for the analysis and the CLI.

Every query here goes through the store's `records` view, so the same code would run on any
table with Logfire's columns, except that `latest` and `previous` are found in the small `roots`
view when it holds every root span of the store (see `mastrace.store.reader.roots_complete`). Queries are
set-based: each one scans the store at most once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import duckdb

from .. import semconv
from ..exceptions import StoreError
from ..store._limits import QueryLimits, QueryTimeout, run_limited
from ..store._schema import SEGMENTS_DIR, VALID_ROW_SQL, read_json_sql, view_sql
from ..store._sql_compat import portable_sql
from ..store.reader import (
    StoreHealth,
    StorePaths,
    check_store,
    compact_generation,
    compacted_files,
    connect,
    pending_files,
    readable_files,
    refresh_views,
    roots_complete,
    segment_files,
    store_paths,
)
from ._kinds import AGENT_SPAN_SQL, format_cost
from ._spans import SpanRow, loads_as, span_from_line, span_row

__all__ = ["RunRef", "RunSummary", "SpanRow", "TraceStore", "span_from_line"]

_HEX = re.compile(r"^[0-9a-f]+$")
_READS_RECORDS = re.compile(r"\brecords\b", re.IGNORECASE)
T = TypeVar("T")
_MIN_PREFIX = 4
_ALIASES = {"latest": 0, "last": 0, "previous": 1, "prev": 1}

# One light scan: which traces exist, when they started, and whether they are coordination sessions.
_INDEX_SQL = f"""
SELECT trace_id,
       epoch_us(min(start_timestamp)) AS start_us,
       bool_or(span_name = '{semconv.SPAN_COORDINATION_SESSION}' AND parent_span_id IS NULL) AS is_session
FROM records
GROUP BY trace_id
"""

# The common case of `latest`/`previous`: only root spans are grouped, so the scan stays light;
# on `roots` (every root span, when complete) it reads a few lines instead of the whole store.
_SESSIONS_SQL = """
SELECT trace_id, epoch_us(min(start_timestamp)) AS start_us
FROM {table}
WHERE parent_span_id IS NULL
GROUP BY trace_id
ORDER BY start_us DESC
LIMIT ?
"""

# The start records of spans still open (`pending/`, see `mastrace.analysis.open_spans`), per trace:
# its earliest start, and its earliest root span's. Small files, read without `records`.
_STARTED_SQL = f"""
SELECT trace_id, min(start_ns) // 1000 AS start_us,
       min(start_ns) FILTER (WHERE parent_span_id IS NULL) // 1000 AS root_us
FROM {{source}} AS pending
WHERE {VALID_ROW_SQL}
GROUP BY trace_id
"""

_ROOT_KEY = (
    f"[CASE WHEN span_name = '{semconv.SPAN_COORDINATION_SESSION}' AND parent_span_id IS NULL THEN 0 "
    "WHEN parent_span_id IS NULL THEN 1 ELSE 2 END, epoch_us(start_timestamp)]"
)


def _usage_sum(massgen_key: str, gen_ai_key: str) -> str:
    # Round spans carry their own usage; LLM spans are the fallback when no round span has any (the
    # cost too: an LLM span's price is in its `mastrace.usage`, see _RUNS_SQL).
    return (
        f"coalesce(sum(TRY_CAST(attributes->>'{massgen_key}' AS DOUBLE)) FILTER (WHERE {AGENT_SPAN_SQL}), "
        f"sum(TRY_CAST(attributes->>'{gen_ai_key}' AS DOUBLE)) "
        f"FILTER (WHERE span_name LIKE '{semconv.SPAN_LLM_PREFIX}%'))"
    )


def unknown_models(texts: Any) -> list[str]:
    """Model names from `mastrace.cost.unknown_models` values (JSON lists as stored), deduplicated."""
    out: dict[str, None] = {}
    for text in texts or ():
        try:
            value = json.loads(text) if isinstance(text, str) else text
        except ValueError:
            value = [text]
        for model in value if isinstance(value, list) else [value]:
            if model:
                out.setdefault(str(model), None)
    return sorted(out)


_RUNS_SQL = f"""
SELECT trace_id,
       arg_min(span_name, {_ROOT_KEY}) AS name,
       arg_min(service_name, {_ROOT_KEY}) AS service_name,
       epoch_us(min(start_timestamp)) AS start_us,
       coalesce(arg_min(duration, {_ROOT_KEY}) FILTER (WHERE parent_span_id IS NULL),
                (epoch_us(max(end_timestamp)) - epoch_us(min(start_timestamp))) / 1e6) AS duration,
       count(*) AS spans,
       count(*) FILTER (WHERE otel_status_code = 'ERROR' OR is_exception) AS errors,
       {_usage_sum(semconv.MASSGEN_USAGE_INPUT, semconv.GEN_AI_USAGE_INPUT_TOKENS)} AS input_tokens,
       {_usage_sum(semconv.MASSGEN_USAGE_OUTPUT, semconv.GEN_AI_USAGE_OUTPUT_TOKENS)} AS output_tokens,
       round(coalesce(fsum(TRY_CAST(attributes->>'{semconv.MASSGEN_USAGE_COST}' AS DOUBLE))
                    FILTER (WHERE {AGENT_SPAN_SQL}),
                fsum(coalesce(TRY_CAST(attributes->'{semconv.MASTRACE_USAGE}'->>'cost' AS DOUBLE),
                              TRY_CAST(attributes->>'{semconv.GEN_AI_USAGE_COST_AMOUNT}' AS DOUBLE)))
                    FILTER (WHERE span_name LIKE '{semconv.SPAN_LLM_PREFIX}%')), 12) AS cost,
       bool_or(span_name = '{semconv.SPAN_COORDINATION_SESSION}' AND parent_span_id IS NULL) AS is_session,
       list(DISTINCT attributes->>'{semconv.MASTRACE_COST_UNKNOWN_MODELS}')
           FILTER (WHERE attributes->>'{semconv.MASTRACE_COST_UNKNOWN}' = 'true'
                   AND span_name LIKE '{semconv.SPAN_LLM_PREFIX}%') AS unknown_models
FROM records
GROUP BY trace_id
ORDER BY start_us DESC
"""

_SPAN_DETAILS = """
       CAST(attributes AS VARCHAR) AS attributes, CAST(otel_events AS VARCHAR) AS otel_events,
       CAST(otel_links AS VARCHAR) AS otel_links, exception_stacktrace,
       CAST(otel_resource_attributes AS VARCHAR) AS resource"""
_SPAN_SKELETON = """
SELECT trace_id, span_id, parent_span_id, span_name, message, span_type, level,
       epoch_us(start_timestamp) AS start_us, epoch_us(end_timestamp) AS end_us, duration,
       is_exception, exception_type, exception_message, otel_status_code, otel_status_message, otel_kind,
       otel_scope_name, otel_scope_version, service_name{details}
FROM {table}
WHERE trace_id = ?{only}
ORDER BY start_timestamp, span_id
"""
_SPANS_SQL = _SPAN_SKELETON.format(details="," + _SPAN_DETAILS, only="", table="records")
_LIGHT_SPANS_SQL = _SPAN_SKELETON.format(details="", only="", table="records")
_LIGHT_SPANS_SINCE_SQL = _SPAN_SKELETON.format(
    details="", only=" AND end_timestamp >= make_timestamp(CAST(? AS BIGINT))", table="records"
)
_SOME_FILES_VIEW = "_mastrace_some_files"  # `records` over a few segment files
_SOME_SPANS_SQL, _SOME_SPANS_IN_FILES_SQL = (
    _SPAN_SKELETON.format(
        details="," + _SPAN_DETAILS, only=" AND span_id IN (SELECT unnest(CAST(? AS VARCHAR[])))", table=table
    )
    for table in ("records", _SOME_FILES_VIEW)
)
_DETAILS_SQL = f"""
SELECT span_id, {_SPAN_DETAILS}
FROM records
WHERE trace_id = ? AND list_contains(?, span_id)
"""


@dataclass(frozen=True)
class RunRef:
    """A trace in the store: its id, when it started and whether it is a coordination session."""

    trace_id: str
    start_us: int
    is_session: bool


def _with_started(refs: Sequence[RunRef], started: Mapping[str, tuple[int, int | None]]) -> list[RunRef]:
    """`refs` (every run, newest first) with the runs none of whose spans ended yet, a run starting at
    its earliest span, ended or open."""
    if not started:
        return list(refs)
    known = {ref.trace_id: ref for ref in refs}
    out = [
        RunRef(ref.trace_id, min(ref.start_us, started[ref.trace_id][0]), ref.is_session)
        if ref.trace_id in started
        else ref
        for ref in refs
    ]
    out += [RunRef(t, start, False) for t, (start, _) in started.items() if t not in known]
    out.sort(key=lambda r: r.start_us, reverse=True)
    return out


@dataclass(frozen=True)
class RunSummary:
    """One row of `mastrace runs`: a trace with its root span and totals."""

    trace_id: str
    name: str
    service_name: str | None
    start_us: int
    duration: float
    spans: int
    errors: int
    input_tokens: float | None
    output_tokens: float | None
    cost: float | None
    is_session: bool = False
    cost_unknown_models: list[str] = field(default_factory=list)
    """Models of calls without a known price: the run's cost is unknown when this is not empty."""
    cost_text: str = ""
    """The cost as printed: significant digits, or unknown with the models named; empty without usage."""


def _naive_utc(relation: duckdb.DuckDBPyRelation) -> duckdb.DuckDBPyRelation:
    """`relation` with TIMESTAMPTZ columns as naive UTC timestamps (the session is in UTC).

    Fetching a TIMESTAMPTZ into Python needs `pytz`, which mastrace does not depend on.
    """
    types = [str(t) for t in relation.types]
    if "TIMESTAMP WITH TIME ZONE" not in types:
        return relation
    columns = []
    for name, kind in zip(relation.columns, types, strict=True):
        quoted = '"' + name.replace('"', '""') + '"'
        columns.append(
            f"CAST({quoted} AS TIMESTAMP) AS {quoted}" if kind == "TIMESTAMP WITH TIME ZONE" else quoted
        )
    return relation.project(", ".join(columns))


def _vanished(exc: duckdb.Error) -> bool:
    """Whether DuckDB failed because a file it was to read is gone (compacted or pruned away)."""
    text = str(exc)
    return isinstance(exc, duckdb.IOException) and (
        "No such file" in text or "No files found" in text or "does not exist" in text
    )


def _require_store_folder(path: Path) -> None:
    """Raise `StoreError` saying what `path` is when it cannot be a store (missing, a file, other)."""
    if not path.exists():
        raise StoreError(f"no local store at {path} (pass --store DIR or set MASTRACE_DIR)")
    if not path.is_dir():
        raise StoreError(f"{path} is a file, not a mastrace store (a store is a folder: pass --store DIR)")
    if not (path / SEGMENTS_DIR).is_dir() and any(path.iterdir()):
        raise StoreError(
            f"{path} is not a mastrace store: it has no {SEGMENTS_DIR}/ folder "
            "(a store is the folder that configure() or `mastrace serve` writes)"
        )


class TraceStore:
    """A read-only view of a local store for the analysis functions.

    Args:
        path: The store folder; default `$MASTRACE_DIR` or `./.mastrace`.

    Example:
        ```python
        with TraceStore(".mastrace") as store:
            trace_id = store.resolve("latest")
            spans = store.spans(trace_id)
        ```
    """

    def __init__(
        self, path: StorePaths = None, *, sandbox: bool = False, limits: QueryLimits | None = None
    ) -> None:
        self.paths = store_paths(path)
        self.path = self.paths[0]
        self.limits = limits
        # The scan that finds spans stored more than once waits until `records` is read: drawing
        # a trace from its skeleton files does without it.
        # Taken before the views are made: a compaction committed meanwhile makes the first query
        # list the store again.
        self._generation = self._compactions()
        self.con = connect(self.paths, external_access=not sandbox, check=False, limits=limits)
        self._health: StoreHealth | None = None
        self.truncated = False  # whether the last `table()` left rows out (`limits.max_rows`)

    @property
    def where(self) -> str:
        """The store folder(s), for messages."""
        return ", ".join(map(str, self.paths))

    def skipped_rows(self) -> int:
        """Lines of the store(s) that the `records` view leaves out as malformed."""
        return self.health().skipped

    def health(self) -> StoreHealth:
        """Lines of the store(s) that `records` leaves out as malformed, and extra copies of spans
        stored more than once (shown once)."""
        if self._health is None:
            try:
                self._health = check_store(self.con, self.paths)
            except duckdb.Error:
                return StoreHealth(0, 0)
        return self._health

    def health_found(self) -> StoreHealth | None:
        """What `health()` says, when reading `records` already found it; None rather than a scan."""
        return self._health

    def _compactions(self) -> tuple[str, ...]:
        """The store's compactions, and its segments once it has any (then listed, not globbed)."""
        names = tuple(name for path in self.paths for name in compact_generation(path))
        return names + tuple(map(str, segment_files(self.paths))) if names else names

    def _checked(self, sql: str) -> None:
        """Make `records` show each span once before `sql` reads it (one scan, the first time); when a
        compaction committed since the views were made, list the store again first (the views would
        otherwise miss the spans it moved, or read them twice)."""
        generation = self._compactions()
        if generation != self._generation:
            self._generation = generation
            self._reopen_views()
        if self._health is None and _READS_RECORDS.search(sql):
            try:
                self._health = check_store(self.con, self.paths)
            except duckdb.Error as exc:
                raise StoreError(f"cannot read the local store at {self.where}: {exc}") from exc

    def __enter__(self) -> TraceStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the DuckDB connection."""
        self.con.close()

    # -- plain SQL ---------------------------------------------------------------------------------
    def rows(self, sql: str, params: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        """Run `sql` and return its rows as dicts; DuckDB errors become `StoreError`."""
        names, values = self.table(sql, params)
        return [dict(zip(names, row, strict=True)) for row in values]

    def table(
        self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run `sql` and return its column names and row tuples; DuckDB errors become `StoreError`.

        Under `limits`, the statement is stopped when its time is up and at most `max_rows` rows
        are returned (see `truncated`).
        """
        limits = self.limits
        max_rows = limits.max_rows if limits is not None else None

        def run() -> tuple[list[str], list[tuple[Any, ...]]]:
            relation = self.con.sql(portable_sql(sql), params=params)
            if relation is None:  # a statement without a result
                return [], []
            relation = _naive_utc(relation)
            if max_rows is None:
                return list(relation.columns), relation.fetchall()
            rows = relation.limit(max_rows + 1).fetchall()
            self.truncated = len(rows) > max_rows
            return list(relation.columns), rows[:max_rows]

        self._checked(sql)
        self.truncated = False
        return self._run(run)

    def relation(
        self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None
    ) -> duckdb.DuckDBPyRelation | None:
        """`sql` as a DuckDB relation, not run yet (None for a statement without a result).

        What reads the result in another shape than Python tuples (Arrow batches, JSON text) starts
        here; fetching it may still raise `duckdb.Error`.

        Raises:
            StoreError: The SQL does not parse or bind.
        """
        self._checked(sql)
        try:
            return self.con.sql(portable_sql(sql), params=params)
        except duckdb.Error as exc:
            raise StoreError(f"query failed: {exc}") from exc

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None) -> None:
        """Run a statement that returns nothing (e.g. `CREATE TEMP TABLE`)."""
        self._checked(sql)
        sql = portable_sql(sql)
        self._run(lambda: self.con.execute(sql, params) if params is not None else self.con.execute(sql))

    def _run(self, run: Callable[[], T]) -> T:
        """`run()` under the time limit, DuckDB's errors as `StoreError`; a query that met a line
        too long to read (one written since the store was opened) is run again without it."""
        timeout = self.limits.timeout if self.limits is not None else None
        for attempt in (1, 2):
            try:
                return run_limited(self.con, timeout, run)
            except QueryTimeout as exc:
                raise StoreError(f"{exc} (raise the time limit: --timeout)") from exc
            except duckdb.OutOfMemoryException as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else "out of memory"
                raise StoreError(
                    f"the query needs more memory than its limit (raise it: --memory): {first}"
                ) from exc
            except duckdb.Error as exc:
                if attempt == 1 and ("maximum_object_size" in str(exc) or _vanished(exc)):
                    # a line too long to read written meanwhile, or a file compacted or pruned away
                    self._generation = self._compactions()
                    self._reopen_views()
                    continue
                raise StoreError(f"query failed: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _reopen_views(self) -> None:
        """Build the views again: files are listed anew, and lines too long to read left out."""
        try:
            refresh_views(self.con, self.paths, check=self._health is not None)
            self._health = None
        except duckdb.Error:
            pass

    # -- runs and trace references -----------------------------------------------------------------
    def ensure_not_empty(self) -> None:
        """Raise `StoreError` with a helpful message when the store has no spans."""
        for path in self.paths:
            _require_store_folder(path)
        if not (segment_files(self.paths) or compacted_files(self.paths)) or not self.rows(
            "SELECT 1 AS one FROM records LIMIT 1"
        ):
            raise StoreError(f"the local store at {self.where} has no spans yet")

    def index(self) -> list[RunRef]:
        """Every trace, newest first (a coordination session or a plain SDK call alike)."""
        refs = [
            RunRef(r["trace_id"], int(r["start_us"]), bool(r["is_session"])) for r in self.rows(_INDEX_SQL)
        ]
        refs.sort(key=lambda r: r.start_us, reverse=True)
        return refs

    def runs(self, limit: int | None = None) -> list[RunSummary]:
        """One summary per trace, newest first."""
        sql = _RUNS_SQL + (f"LIMIT {int(limit)}\n" if limit else "")
        found = []
        for row in self.rows(sql):
            row["cost_unknown_models"] = unknown_models(row.pop("unknown_models", None))
            if row["cost"] is not None or row["cost_unknown_models"]:
                row["cost_text"] = format_cost(row["cost"], row["cost_unknown_models"])
            found.append(RunSummary(**row))
        if not found:
            self.ensure_not_empty()
        return found

    def resolve(self, ref: str | None) -> str:
        """Turn `latest`, `previous`, a full trace id or a unique prefix into a trace id.

        `latest` is the most recent run of any kind (a coordination session, a script's own spans, a
        plain SDK call: the trace whose root span started last), `previous` the one before it. A run
        whose root span has not ended yet counts from its start record (see `open_spans`), and a
        prefix also matches the runs none of whose spans ended yet.

        Raises:
            StoreError: The store is empty, or no (or more than one) trace matches.
        """
        text = (ref or "latest").strip().lower()
        if text in _ALIASES:
            return self._by_position(_ALIASES[text], text)
        if not _HEX.match(text):
            raise StoreError(
                f"{ref!r} is not a trace id: use a hex trace id, a prefix of one, 'latest' or 'previous'"
            )
        if len(text) == 32:
            return text
        if len(text) < _MIN_PREFIX:
            raise StoreError(f"trace id prefix {ref!r} is too short: give at least {_MIN_PREFIX} characters")
        found = self._matching(text)
        if len(found) < 2:  # and the runs that so far have only open spans
            found = list(dict.fromkeys([*found, *sorted(t for t in self._started() if t.startswith(text))]))
        if len(found) == 1:
            return str(found[0])
        if not found:
            self.ensure_not_empty()
            raise StoreError(f"no trace matching {ref!r} in the store at {self.where} (see `mastrace runs`)")
        raise StoreError(f"trace id prefix {ref!r} is ambiguous: {', '.join(found[:2])}, …")

    def _matching(self, prefix: str) -> list[str]:
        """Up to three trace ids that start with `prefix` (lower-case hex)."""
        sql = "SELECT DISTINCT trace_id FROM records WHERE starts_with(trace_id, ?) LIMIT 3"
        return [str(r["trace_id"]) for r in self.rows(sql, [prefix])]

    def aliases(self, runs: Sequence[RunSummary] | None = None, limit: int | None = None) -> dict[str, str]:
        """Trace id → `latest` / `previous`, for the runs those words pick (there may be no previous).

        Args:
            runs: What `runs(limit=limit)` returned, when the caller has it: the answer is read off it
                when it can be (two sessions in it, or every run of the store), with no query.
            limit: The limit those runs were read with.
        """
        started = self._started()
        newest = self._newest(2, started)  # the common case, in one look at the roots
        if len(newest) < 2:
            if runs is not None and (not limit or len(runs) < limit):
                every = [RunRef(r.trace_id, r.start_us, r.is_session) for r in runs]
            else:
                every = self.index()
            newest = [r.trace_id for r in _with_started(every, started)][:2]
        return dict(zip(newest, ("latest", "previous"), strict=False))

    def _by_position(self, position: int, alias: str) -> str:
        started = self._started()
        newest = self._newest(position + 1, started)
        if len(newest) > position:
            return newest[position]
        refs = _with_started(self.index(), started)
        if not refs:
            self.ensure_not_empty()
        sessions = refs
        if position >= len(sessions):
            raise StoreError(
                f"there is no {alias!r} run: the store at {self.where} has {len(sessions)} "
                f"run{'' if len(sessions) == 1 else 's'}"
            )
        return sessions[position].trace_id

    def _newest(self, limit: int, started: Mapping[str, tuple[int, int | None]]) -> list[str]:
        """The trace ids of the `limit` newest runs (traces with a root span), newest first, a root span
        still open (its start record) counting as one that ended."""
        opened = {trace_id: root for trace_id, (_, root) in started.items() if root is not None}
        if not opened:
            return self._latest_sessions(limit)  # a store without start records: as it always was
        starts: dict[str, int] = {}
        for trace_id, start in [*self._root_starts(limit), *opened.items()]:
            starts[trace_id] = min(start, starts.get(trace_id, start))
        # A root that ended since its start record was written is the same run at the same start;
        # one older than the `limit` newest ended roots comes after them.
        return sorted(starts, key=lambda t: (starts[t], t), reverse=True)[:limit]

    def _started(self) -> dict[str, tuple[int, int | None]]:
        """Trace id → (earliest start, earliest root span start or None) of the start records of
        spans open at a flush (`pending/`), some of which may have ended since; {} when there are none.

        Read in the writers' small files, never in `records`; a file deleted meanwhile (its writer
        shut down with every span ended) is read again without it.
        """
        if not self.paths:
            return {}  # another source (a Query API, ClickHouse) keeps no start records
        timeout = self.limits.timeout if self.limits is not None else None
        for _ in (1, 2):
            names = readable_files([str(f.path) for f in pending_files(self.paths)])
            if not names:
                return {}
            sql = _STARTED_SQL.format(source=read_json_sql(names))

            def read(sql: str = sql) -> list[tuple[Any, ...]]:
                # on the connection itself: `execute` would first check `records` (a scan)
                return self.con.execute(sql).fetchall()

            try:
                rows = run_limited(self.con, timeout, read)
            except duckdb.Error:
                continue
            except QueryTimeout:
                return {}
            return {str(t): (int(start), None if root is None else int(root)) for t, start, root in rows}
        return {}

    def _latest_sessions(self, limit: int) -> list[str]:
        """The trace ids of the `limit` newest runs (traces with a root span), newest first."""
        return [trace_id for trace_id, _ in self._root_starts(limit)]

    def _root_starts(self, limit: int) -> list[tuple[str, int]]:
        """`_latest_sessions` with each run's start (µs)."""
        if roots_complete(self.paths):
            try:
                return self._session_starts("roots", limit)
            except StoreError:
                pass  # a roots file given up by its writer since the check: scan the segments
        return self._session_starts("records", limit)

    def _session_starts(self, table: str, limit: int) -> list[tuple[str, int]]:
        rows = self.rows(_SESSIONS_SQL.format(table=table), [limit])
        return [(str(r["trace_id"]), int(r["start_us"])) for r in rows]

    # -- spans -------------------------------------------------------------------------------------
    def spans(
        self,
        trace_id: str,
        *,
        details: bool = True,
        only: Sequence[str] | None = None,
        files: Sequence[str] | None = None,
        ended_since_us: int | None = None,
    ) -> list[SpanRow]:
        """Every span of `trace_id`, ordered by start time.

        Args:
            trace_id: The trace.
            details: Also read attributes, events, links, stack traces and resources. Without
                them a trace of a million spans reads in seconds; `fill()` adds them to the few
                spans a view shows.
            only: Read just these span ids (with details), e.g. the spans a view prints.
            files: With `only`, the segment files that hold those spans (as DuckDB's `filename`
                names them): the others are not read.
            ended_since_us: Without details, only the spans that ended at or after this time
                (µs since the epoch): what a live page does not have yet. No error when none did.

        Raises:
            StoreError: The trace has no spans in the store.
        """
        if only is not None:
            params = [trace_id, list(only)]
            if files and not any(str(f).endswith(".parquet") for f in files):
                try:
                    self.execute(view_sql(read_json_sql(readable_files(files)), _SOME_FILES_VIEW))
                    return [span_row(row) for row in self.rows(_SOME_SPANS_IN_FILES_SQL, params)]
                except StoreError:  # a segment went away meanwhile: read them all
                    pass
            return [span_row(row) for row in self.rows(_SOME_SPANS_SQL, params)]
        if ended_since_us is not None and not details:
            return [span_row(row) for row in self.rows(_LIGHT_SPANS_SINCE_SQL, [trace_id, ended_since_us])]
        found = [span_row(row) for row in self.rows(_SPANS_SQL if details else _LIGHT_SPANS_SQL, [trace_id])]
        if not found:
            self.require_trace(trace_id, found=False)
        return found

    def fill(self, trace_id: str, spans: Sequence[SpanRow]) -> None:
        """Read the attributes, events, links, stack trace and resource of `spans` (in place)."""
        by_id = {s.span_id: s for s in spans}
        for row in self.rows(_DETAILS_SQL, [trace_id, list(by_id)]):
            span = by_id.get(row["span_id"])
            if span is None:
                continue
            span.attributes = loads_as(row["attributes"], {})
            span.events = loads_as(row["otel_events"], [])
            span.links = loads_as(row["otel_links"], [])
            span.exception_stacktrace = row["exception_stacktrace"]
            span.resource = loads_as(row["resource"], {})

    def require_trace(self, trace_id: str, *, found: bool) -> None:
        """Raise the right `StoreError` when `trace_id` had no rows (`found` False)."""
        if found:
            return
        if trace_id in self._started():
            raise StoreError(
                f"no span of run {trace_id} has ended yet: its spans are open "
                f"(`mastrace tree {trace_id}` shows them)"
            )
        self.ensure_not_empty()
        raise StoreError(f"no trace {trace_id!r} in the store at {self.where} (see `mastrace runs`)")
