"""Read the local store with DuckDB, through the same `records` table that Logfire's SQL uses.

`connect()` gives an in-memory DuckDB connection with a `records` view over every segment file of
the store. The view re-lists the segment files on every query, so segments that writers create
after `connect()` show up in later queries. Segments may be appended to while they are read: a line
that is not complete yet (or was torn by a killed writer) is skipped.

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
from ._schema import SEGMENT_SUFFIX, SEGMENTS_DIR, empty_source_sql, read_json_sql, view_sql

__all__ = ["connect", "default_store_path", "query", "segment_files"]

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


def segment_files(path: str | os.PathLike[str] | None = None) -> list[Path]:
    """The segment files of the store at `path` (default: `default_store_path()`), sorted by name."""
    folder = _store_path(path) / SEGMENTS_DIR
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.name.endswith(SEGMENT_SUFFIX) and p.is_file())


def connect(path: str | os.PathLike[str] | None = None) -> duckdb.DuckDBPyConnection:
    """Open an in-memory DuckDB connection with a `records` view over the store.

    A missing or empty store gives an empty `records` with the same columns, and so does not see
    segments created after `connect()`: open a new connection then. The same holds for a store path
    containing glob characters (`*?[]{}`). The session time zone
    is UTC, so `start_timestamp > now() - interval '1 hour'` compares like Logfire does. Close the
    connection when done (it is also a context manager).

    Args:
        path: The store folder; default `default_store_path()`.

    Returns:
        A DuckDB connection. Errors raised by queries on it are DuckDB's own; `query()` translates
        them to `StoreError`.

    Raises:
        StoreError: DuckDB could not create the view.
    """
    store = _store_path(path)
    files = segment_files(store)
    if not files:
        source = empty_source_sql()
    elif any(c in str(store) for c in _GLOB_CHARS):
        # DuckDB globs cannot escape these: list today's segments instead of matching per query.
        source = read_json_sql([str(f) for f in files])
    else:
        # Files are matched per query, so segments written later are seen too.
        source = read_json_sql(str(store / SEGMENTS_DIR / f"*{SEGMENT_SUFFIX}"))
    try:
        con = duckdb.connect(":memory:")
    except duckdb.Error as exc:  # pragma: no cover - an in-memory database has nothing to fail on
        raise StoreError(f"cannot start DuckDB: {exc}") from exc
    try:
        # Timestamps are naive UTC: comparing them with now() must happen in UTC too.
        con.execute("SET TimeZone = 'UTC'")
        con.execute(view_sql(source))
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
