"""Read the local store with DuckDB, through the same `records` table that Logfire's SQL uses.

`connect()` gives an in-memory DuckDB connection with a `records` view over every segment file of
the store. The view re-lists the segment files on every query, so segments that writers create
after `connect()` show up in later queries. Segments may be appended to while they are read: a line
that is not complete yet (or was torn by a killed writer) is skipped.

A second view, `roots`, has the same columns and holds only root spans (no parent), read from the
small roots files that writers keep beside their segments. It matches the root spans of `records`
only when `roots_complete()` is true; otherwise (a store written by an older version, after a
failed write, or with segments deleted) select `WHERE parent_span_id IS NULL` from `records`.

Example:
    ```python
    from mastrace.store import query

    rows = query(
        "SELECT attributes->>'massgen.agent_id' AS agent, count(*) AS rounds "
        "FROM records WHERE span_name LIKE 'agent.%' GROUP BY 1"
    )
    ```
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb

from ..exceptions import StoreError
from ._schema import (
    ROOTS_DIR,
    ROOTS_VIEW_NAME,
    SEGMENT_SUFFIX,
    SEGMENTS_DIR,
    VIEW_NAME,
    empty_source_sql,
    read_json_sql,
    skipped_sql,
    view_sql,
)

__all__ = [
    "connect",
    "default_store_path",
    "query",
    "root_files",
    "roots_complete",
    "segment_files",
    "skipped_rows",
]

ENV_STORE_DIR = "MASTRACE_DIR"
DEFAULT_DIR_NAME = ".mastrace"
_GLOB_CHARS = "*?[]{}"


def default_store_path() -> Path:
    """The store folder used when none is given: `$MASTRACE_DIR`, else `./.mastrace`.

    Returns:
        An absolute path (relative values are resolved against the current directory).
    """
    configured = os.environ.get(ENV_STORE_DIR)
    return Path(configured or DEFAULT_DIR_NAME).expanduser().absolute()


def _store_path(path: str | os.PathLike[str] | None) -> Path:
    return default_store_path() if path is None else Path(path).expanduser().absolute()


def _files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.name.endswith(SEGMENT_SUFFIX) and p.is_file())


def segment_files(path: str | os.PathLike[str] | None = None) -> list[Path]:
    """The segment files of the store at `path` (default: `default_store_path()`), sorted by name."""
    return _files(_store_path(path) / SEGMENTS_DIR)


def root_files(path: str | os.PathLike[str] | None = None) -> list[Path]:
    """The roots files of the store at `path` (default: `default_store_path()`), sorted by name."""
    return _files(_store_path(path) / ROOTS_DIR)


def roots_complete(path: str | os.PathLike[str] | None = None) -> bool:
    """Whether `roots` holds exactly the root spans of `records`: roots files and segments pair up.

    Writers create a segment's roots file before the segment, so a segment seen without one was
    written by an older version or lost its roots file after a failed write; a roots file without
    its segment outlived a segment that was deleted.
    """
    store = _store_path(path)
    return [p.name for p in root_files(store)] == [p.name for p in segment_files(store)]


def _source(store: Path, folder: str) -> str:
    """The `read_json` source over the store's files in `folder`, or an empty relation."""
    files = _files(store / folder)
    if not files:
        return empty_source_sql()
    if any(c in str(store) for c in _GLOB_CHARS):
        # DuckDB globs cannot escape these: list today's files instead of matching per query.
        return read_json_sql([str(f) for f in files])
    # Files are matched per query, so files written later are seen too.
    return read_json_sql(str(store / folder / f"*{SEGMENT_SUFFIX}"))


def skipped_rows(con: duckdb.DuckDBPyConnection, path: str | os.PathLike[str] | None = None) -> int:
    """How many lines of the store's segments the `records` view leaves out as malformed.

    Torn lines (a writer killed mid-write) and lines edited by hand with mistyped fields count.
    """
    source = _source(_store_path(path), SEGMENTS_DIR)
    row = con.execute(skipped_sql(source)).fetchone()
    return int(row[0]) if row else 0


def connect(
    path: str | os.PathLike[str] | None = None, *, external_access: bool = True
) -> duckdb.DuckDBPyConnection:
    """Open an in-memory DuckDB connection with `records` and `roots` views over the store.

    A missing or empty store gives an empty `records` with the same columns, and so does not see
    segments created after `connect()`: open a new connection then. The same holds for a store path
    containing glob characters (`*?[]{}`), and for `roots` and the roots files. The session time zone
    is UTC, so `start_timestamp > now() - interval '1 hour'` compares like Logfire does. Close the
    connection when done (it is also a context manager).

    Args:
        path: The store folder; default `default_store_path()`.
        external_access: False locks the connection to the store: SQL on it cannot read or write
            other files (`read_csv`, `COPY … TO`, `ATTACH`), load extensions or change settings.

    Returns:
        A DuckDB connection. Errors raised by queries on it are DuckDB's own; `query()` translates
        them to `StoreError`.

    Raises:
        StoreError: DuckDB could not create the views.
    """
    store = _store_path(path)
    source, roots_source = _source(store, SEGMENTS_DIR), _source(store, ROOTS_DIR)
    try:
        con = duckdb.connect(":memory:")
    except duckdb.Error as exc:  # pragma: no cover - an in-memory database has nothing to fail on
        raise StoreError(f"cannot start DuckDB: {exc}") from exc
    try:
        # Timestamps are naive UTC: comparing them with now() must happen in UTC too.
        con.execute("SET TimeZone = 'UTC'")
        con.execute(view_sql(source, VIEW_NAME))
        con.execute(view_sql(roots_source, ROOTS_VIEW_NAME))
        if not external_access:
            folders = [str(store / SEGMENTS_DIR) + os.sep, str(store / ROOTS_DIR) + os.sep]
            con.execute("SET allowed_directories = ?", [folders])
            con.execute("SET enable_external_access = false")
            con.execute("SET lock_configuration = true")
    except duckdb.Error as exc:
        con.close()
        raise StoreError(f"cannot open the local store at {store}: {exc}") from exc
    return con


def query(
    sql: str,
    path: str | os.PathLike[str] | None = None,
    params: Sequence[Any] | dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Run one SQL statement against the store and return its rows as dicts.

    Args:
        sql: Any DuckDB SQL; the table is `records`.
        path: The store folder; default `default_store_path()`.
        params: Values for `?` or `$name` placeholders in `sql`.

    Returns:
        One dict per row, keyed by the result's column names.

    Raises:
        StoreError: The store could not be read or the SQL failed.
    """
    con = connect(path)
    try:
        cursor = con.execute(sql, params) if params is not None else con.execute(sql)
        names = [d[0] for d in cursor.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    except duckdb.Error as exc:
        raise StoreError(f"query failed on the local store: {exc}") from exc
    finally:
        con.close()
