"""The layout of the local store: segment files on disk and the `records` view over them.

Beside each segment, `roots/<segment name>` holds the lines of the segment's root spans (those with
no parent), in the same format: the `roots` view reads them with the same columns as `records`, so
that finding the latest run does not scan every span. A segment written before these files existed
has none; `roots_complete()` in the reader tells whether segments and roots files pair up.

Beside each segment too, `skeleton/<segment stem>.csv` holds one short line per span of the segment:
where its line starts in the segment, and what a trace's tree needs (ids, parent, times, whether it
is an error), so that `mastrace tree` and `mastrace view` find the first spans of a huge trace
without parsing its JSON; see `SKELETON_FIELDS`.

This module is the only place column names live. Two shapes are described here:

- the *stored fields*: the keys of one NDJSON line in a segment file, written by `_rows.py`. Fields
  that are usually empty (``message``, ``tags``, events, links, exception details) are left out of a
  line when they have no value, which keeps lines short and the writer fast;
- the *columns* of the `records` view that DuckDB exposes, named and typed like Logfire's `records`
  table, each an SQL expression over the stored fields.

Timestamps are stored as integer nanoseconds since the epoch and exposed as naive UTC ``TIMESTAMP``
values (microseconds), so that DuckDB hands them to Python without needing ``pytz``.

Links are stored as ``[{"trace_id", "span_id", "attributes"}]`` and events as
``[{"name", "timestamp", "attributes"}]`` with an ISO-8601 UTC timestamp.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "COLUMNS",
    "COLUMN_NAMES",
    "LATEST_FIRST_SQL",
    "ORIGIN",
    "PENDING_DIR",
    "ROOTS_DIR",
    "ROOTS_VIEW_NAME",
    "SEGMENTS_DIR",
    "SEGMENT_SUFFIX",
    "SKELETON_BASE",
    "SKELETON_DIR",
    "SKELETON_FIELDS",
    "SKELETON_SUFFIX",
    "SPAN_KEY_SQL",
    "STORED_FIELDS",
    "VALID_ROW_SQL",
    "VIEW_NAME",
    "WINDOW",
    "duplicate_keys_sql",
    "duplicates_sql",
    "empty_source_sql",
    "read_json_sql",
    "read_parquet_sql",
    "read_skeleton_sql",
    "view_sql",
]

ORIGIN: Final = "origin"
"""The compacted files' column naming the segment a row was first written to (see `_replay_compacted`)."""
VIEW_NAME: Final = "records"
ROOTS_VIEW_NAME: Final = "roots"
SEGMENTS_DIR: Final = "segments"
ROOTS_DIR: Final = "roots"
PENDING_DIR: Final = "pending"
"""Where writers put the start records of spans still open at a flush (see `_writer`): never read by
the `records` view, so no count or answer of its SQL changes; readers merge them with the spans that
ended (`TraceStore.open_spans`)."""
SEGMENT_SUFFIX: Final = ".ndjson"
SKELETON_DIR: Final = "skeleton"
SKELETON_SUFFIX: Final = ".csv"
SKELETON_BASE: Final = b"@"
"""What a writer puts in a skeleton line where the segment's size before its batch goes: the
batch's lines are encoded before the writer knows where they will land, then this is replaced."""

# Stored field -> DuckDB type used when reading the NDJSON segments.
STORED_FIELDS: Final[dict[str, str]] = {
    "trace_id": "VARCHAR",
    "span_id": "VARCHAR",
    "parent_span_id": "VARCHAR",
    "start_ns": "BIGINT",
    "end_ns": "BIGINT",
    "created_ns": "BIGINT",
    "span_name": "VARCHAR",
    "message": "VARCHAR",
    "level": "SMALLINT",
    "span_type": "VARCHAR",
    "otel_kind": "VARCHAR",
    "attributes": "JSON",
    "attributes_json_schema": "VARCHAR",
    "tags": "VARCHAR[]",
    "otel_links": "JSON",
    "otel_events": "JSON",
    "is_exception": "BOOLEAN",
    "exception_type": "VARCHAR",
    "exception_message": "VARCHAR",
    "exception_stacktrace": "VARCHAR",
    "otel_status_code": "VARCHAR",
    "otel_status_message": "VARCHAR",
    "otel_scope_name": "VARCHAR",
    "otel_scope_version": "VARCHAR",
    "otel_scope_attributes": "JSON",
    "service_namespace": "VARCHAR",
    "service_name": "VARCHAR",
    "service_version": "VARCHAR",
    "service_instance_id": "VARCHAR",
    "process_pid": "INTEGER",
    "otel_resource_attributes": "JSON",
}

# View column -> (DuckDB type, SQL expression over the stored fields), in Logfire's column order.
COLUMNS: Final[dict[str, tuple[str, str]]] = {
    "start_timestamp": ("TIMESTAMP", "make_timestamp(start_ns // 1000)"),
    "end_timestamp": ("TIMESTAMP", "make_timestamp(end_ns // 1000)"),
    "duration": ("DOUBLE", "(end_ns - start_ns) / 1e9"),
    "created_at": ("TIMESTAMP", "make_timestamp(created_ns // 1000)"),
    "trace_id": ("VARCHAR", "trace_id"),
    "span_id": ("VARCHAR", "span_id"),
    "parent_span_id": ("VARCHAR", "parent_span_id"),
    "kind": ("VARCHAR", "coalesce(span_type, 'span')"),
    "level": ("SMALLINT", "coalesce(level, 9)"),
    "span_name": ("VARCHAR", "span_name"),
    "message": ("VARCHAR", "coalesce(message, span_name)"),
    "attributes": ("JSON", "coalesce(attributes, '{}')"),
    "attributes_json_schema": ("VARCHAR", "attributes_json_schema"),
    "tags": ("VARCHAR[]", "coalesce(tags, []::VARCHAR[])"),
    "otel_links": ("JSON", "coalesce(otel_links, '[]')"),
    "otel_events": ("JSON", "coalesce(otel_events, '[]')"),
    "is_exception": ("BOOLEAN", "coalesce(is_exception, false)"),
    "exception_type": ("VARCHAR", "exception_type"),
    "exception_message": ("VARCHAR", "exception_message"),
    "exception_stacktrace": ("VARCHAR", "exception_stacktrace"),
    "otel_status_code": ("VARCHAR", "coalesce(otel_status_code, 'UNSET')"),
    "otel_status_message": ("VARCHAR", "otel_status_message"),
    "otel_scope_name": ("VARCHAR", "otel_scope_name"),
    "otel_scope_version": ("VARCHAR", "otel_scope_version"),
    "otel_scope_attributes": ("JSON", "coalesce(otel_scope_attributes, '{}')"),
    "service_namespace": ("VARCHAR", "service_namespace"),
    "service_name": ("VARCHAR", "service_name"),
    "service_version": ("VARCHAR", "service_version"),
    "service_instance_id": ("VARCHAR", "service_instance_id"),
    "process_pid": ("INTEGER", "process_pid"),
    "span_type": ("VARCHAR", "coalesce(span_type, 'span')"),
    "otel_kind": ("VARCHAR", "coalesce(otel_kind, 'internal')"),
    "otel_resource_attributes": ("JSON", "coalesce(otel_resource_attributes, '{}')"),
}

COLUMN_NAMES: Final[tuple[str, ...]] = tuple(COLUMNS)

# Skeleton field -> DuckDB type: the comma-separated fields of one line of a skeleton file, in order.
SKELETON_FIELDS: Final[dict[str, str]] = {
    "rel": "BIGINT",  # where the span's line starts, from the start of its batch's data
    "base": "BIGINT",  # the segment's size before that batch: the line starts at base + rel
    "trace_id": "VARCHAR",  # as in the segment (32 hex digits)
    "span_id": "UBIGINT",  # the 64-bit ids as decimal numbers, which DuckDB joins faster than text
    "parent": "UBIGINT",  # empty for a root span
    "start_ns": "BIGINT",
    "end_ns": "BIGINT",
    "err": "TINYINT",  # 1 when the span is an error (ERROR status, an exception or an error level)
}
"""A skeleton line, e.g. `0,@,<trace id>,<span id>,<parent>,<start>,<end>,0` before the writer puts
the base in. Writers append a batch's skeleton lines *before* its segment lines, so a reader keeps
a skeleton line only when the segment already reaches past its start; `err`, last and one digit,
tells a whole line from a torn one."""


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _select_list() -> str:
    return ",\n    ".join(
        f"CAST({expr} AS {sql_type}) AS {name}" for name, (sql_type, expr) in COLUMNS.items()
    )


def read_json_sql(files: str | list[str], *, filename: bool = False) -> str:
    """The `read_json` call that scans `files` (a glob or a list of paths) with explicit types (and,
    with `filename`, DuckDB's `filename` column).

    `ignore_errors` turns a torn last line (a writer killed mid-write) into an all-NULL row, which
    `view_sql` filters out by requiring a span id.
    """
    columns = ", ".join(f"{_quote(name)}: {_quote(sql_type)}" for name, sql_type in STORED_FIELDS.items())
    source = _quote(files) if isinstance(files, str) else "[" + ", ".join(map(_quote, files)) + "]"
    return (
        f"read_json({source}, format = 'newline_delimited', records = true, "
        f"ignore_errors = true, hive_partitioning = false, columns = {{{columns}}}"
        + (", filename = true)" if filename else ")")
    )


def read_parquet_sql(files: list[str], extra: str = "") -> str:
    """A subquery reading compacted Parquet `files` with the stored fields and their types (the
    compactor keeps JSON values as text), in `STORED_FIELDS` order: it unions with `read_json_sql`.
    `extra` is a further column expression (compaction's `origin`)."""
    columns = ", ".join(f"CAST({name} AS {sql_type}) AS {name}" for name, sql_type in STORED_FIELDS.items())
    columns += f", {extra}" if extra else ""
    source = "[" + ", ".join(map(_quote, files)) + "]"
    return f"(SELECT {columns} FROM read_parquet({source}, hive_partitioning = false))"


def read_skeleton_sql(files: list[str]) -> str:
    """The `read_csv` call that scans skeleton `files`, with DuckDB's `filename` column.

    A torn or malformed line is skipped (a missing field) or read with a NULL `err` (the last
    field cut off): keep rows with `err IS NOT NULL`.
    """
    columns = ", ".join(f"{_quote(name)}: {_quote(sql_type)}" for name, sql_type in SKELETON_FIELDS.items())
    source = "[" + ", ".join(map(_quote, files)) + "]"
    return (
        f"read_csv({source}, columns = {{{columns}}}, header = false, delim = ',', quote = '', "
        "escape = '', auto_detect = false, null_padding = false, ignore_errors = true, filename = true)"
    )


def empty_source_sql() -> str:
    """A typed, empty relation with the stored fields, for a store with no segment yet."""
    nulls = ", ".join(f"CAST(NULL AS {sql_type}) AS {name}" for name, sql_type in STORED_FIELDS.items())
    return f"(SELECT {nulls} WHERE false)"


VALID_ROW_SQL: Final = (
    "length(trace_id) = 32 AND length(span_id) = 16 "
    "AND (parent_span_id IS NULL OR length(parent_span_id) = 16) "
    "AND start_ns >= 0 AND end_ns >= 0 AND (created_ns IS NULL OR created_ns >= 0)"
)
"""A row the views keep: ids of the right length and both times, none before 1970 (so that no
arithmetic on them can overflow). A torn line, a line edited by hand with mistyped fields (read as
NULL, or a list where an id should be) is left out, and counted by `duplicate_keys_sql`."""

LATEST_FIRST_SQL: Final = "end_ns DESC, created_ns DESC NULLS LAST"
"""Which of the copies of one span (the same trace and span id, e.g. sent twice) the views show:
the one that ended last, and of those the one stored last."""


WINDOW: Final = "window"
"""`view_sql(..., once=WINDOW)`: every span shown once by a window over all rows (for small sources)."""


def view_sql(source: str, name: str = VIEW_NAME, *, once: str | None = WINDOW) -> str:
    """The `CREATE VIEW` statement for `name` (`records` or `roots`) over `source`.

    A span is its trace id and span id: however many times it was stored (pushed twice, a
    collector's retry, two intakes), the view shows it once, the copy `LATEST_FIRST_SQL` picks.

    Args:
        source: A `read_json_sql()` call or `empty_source_sql()`.
        name: The view to create.
        once: How spans stored more than once are shown once: `WINDOW` ranks the copies of every
            span (simple, but it holds every row it reads: for small sources); the name of a table
            of `span_key_sql()` values ranks only the copies of those spans (found by one scan, see
            `duplicate_keys_sql`); None shows every copy (a source known to hold no duplicate).
    """
    head = f"CREATE OR REPLACE VIEW {name} AS SELECT\n    {_select_list()}\nFROM "
    rows = f"SELECT * FROM {source} AS segments WHERE {VALID_ROW_SQL}"
    latest = f"QUALIFY row_number() OVER (PARTITION BY trace_id, span_id ORDER BY {LATEST_FIRST_SQL}) = 1"
    if once is None:
        return f"{head}({rows}) AS segments"
    if once == WINDOW:
        return f"{head}({rows}\n      {latest}) AS segments"
    keys = f"(SELECT key FROM {once})"
    return (
        f"{head}({rows} AND {SPAN_KEY_SQL} NOT IN {keys}\n"
        f"UNION ALL\n{rows} AND {SPAN_KEY_SQL} IN {keys}\n      {latest}) AS segments"
    )


SPAN_KEY_SQL: Final = "hash(trace_id, span_id)"
"""A number per span (its trace and span id) to find the spans stored more than once by: equal for
the copies of a span, and rarely for two spans, which are then told apart by their ids."""


def duplicate_keys_sql(source: str, table: str) -> str:
    """`CREATE TEMP TABLE table` of the `SPAN_KEY_SQL` values of the spans of `source` stored more
    than once, and one row with a NULL key counting the rows `view_sql` leaves out as malformed
    (`n`). One scan of `source`."""
    valid = f"coalesce({VALID_ROW_SQL}, false)"
    return (
        f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT key, count(*) AS n FROM "
        f"(SELECT CASE WHEN {valid} THEN {SPAN_KEY_SQL} END AS key FROM {source} AS segments) "
        "GROUP BY key HAVING key IS NULL OR count(*) > 1"
    )


def duplicates_sql(source: str, table: str) -> str:
    """A query counting the extra copies (`n`) of the spans whose keys `table` lists."""
    return (
        "SELECT count(*) - count(DISTINCT (trace_id, span_id)) AS n "
        f"FROM {source} AS segments WHERE {VALID_ROW_SQL} "
        f"AND {SPAN_KEY_SQL} IN (SELECT key FROM {table} WHERE key IS NOT NULL)"
    )
