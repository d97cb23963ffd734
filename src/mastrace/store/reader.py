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

import glob
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import duckdb

from ..exceptions import StoreError
from ._schema import (
    ROOTS_DIR,
    ROOTS_VIEW_NAME,
    SEGMENT_SUFFIX,
    SEGMENTS_DIR,
    SKELETON_DIR,
    SKELETON_SUFFIX,
    VIEW_NAME,
    empty_source_sql,
    read_json_sql,
    skipped_sql,
    view_sql,
)
from ._sql_compat import portable_sql

__all__ = [
    "SkeletonFile",
    "StorePaths",
    "connect",
    "default_store_path",
    "query",
    "root_files",
    "roots_complete",
    "segment_files",
    "skeleton_files",
    "skipped_rows",
    "store_paths",
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


StorePaths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None
"""One store folder, several (read together as one `records` table), or None for the default."""


def _store_path(path: str | os.PathLike[str] | None) -> Path:
    return default_store_path() if path is None else Path(path).expanduser().absolute()


def store_paths(path: StorePaths) -> list[Path]:
    """The store folders `path` names: None is the default store; a glob (`runs/*/.mastrace`) is
    expanded, in name order; several are read together."""
    if path is None or isinstance(path, (str, os.PathLike)):
        items: list[str | os.PathLike[str]] = [] if path is None else [path]
    else:
        items = list(path)
    if not items:
        return [default_store_path()]
    out: list[Path] = []
    for item in items:
        text = os.path.expanduser(os.fspath(item))
        if any(c in text for c in "*?[") and not Path(text).exists():
            out.extend(Path(p).absolute() for p in sorted(glob.glob(text)))
        else:
            out.append(Path(text).absolute())
    return list(dict.fromkeys(out))


def _files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.name.endswith(SEGMENT_SUFFIX) and p.is_file())


def segment_files(path: StorePaths = None) -> list[Path]:
    """The segment files of the store(s) at `path` (default: `default_store_path()`), sorted by name."""
    return [f for store in store_paths(path) for f in _files(store / SEGMENTS_DIR)]


def root_files(path: StorePaths = None) -> list[Path]:
    """The roots files of the store(s) at `path` (default: `default_store_path()`), sorted by name."""
    return [f for store in store_paths(path) for f in _files(store / ROOTS_DIR)]


def roots_complete(path: StorePaths = None) -> bool:
    """Whether `roots` holds exactly the root spans of `records`: roots files and segments pair up.

    Writers create a segment's roots file before the segment, so a segment seen without one was
    written by an older version or lost its roots file after a failed write; a roots file without
    its segment outlived a segment that was deleted.
    """
    return all(
        [p.name for p in _files(store / ROOTS_DIR)] == [p.name for p in _files(store / SEGMENTS_DIR)]
        for store in store_paths(path)
    )


class SkeletonFile(NamedTuple):
    """A segment's skeleton file, and how far its segment holds whole lines."""

    skeleton: Path
    segment: Path
    whole: int  # the size of the segment up to the end of its last complete line


def skeleton_files(path: StorePaths = None) -> tuple[list[SkeletonFile], list[Path]]:
    """The segments of the store(s) at `path` that have a skeleton file, and those that have none.

    A skeleton line describes a span line of its segment that starts before `whole` (the writer
    appends a batch's skeleton lines before the batch's lines, which may still be on their way).
    """
    paired: list[SkeletonFile] = []
    alone: list[Path] = []
    for store in store_paths(path):
        folder = store / SKELETON_DIR
        try:
            names = {p.name for p in folder.iterdir() if p.is_file()}
        except OSError:  # no skeleton folder, or one that cannot be listed: read the segments' JSON
            names = set()
        for segment in _files(store / SEGMENTS_DIR):
            name = segment.name[: -len(SEGMENT_SUFFIX)] + SKELETON_SUFFIX
            whole = _whole_lines(segment) if name in names else None
            if whole is None:
                alone.append(segment)
            else:
                paired.append(SkeletonFile(folder / name, segment, whole))
    return paired, alone


def _whole_lines(segment: Path, chunk: int = 1 << 16) -> int | None:
    """The size of `segment` up to the end of its last complete line; None if it cannot be read."""
    try:
        with open(segment, "rb") as file:
            end = os.fstat(file.fileno()).st_size
            while end > 0:
                start = max(0, end - chunk)
                data = os.pread(file.fileno(), end - start, start)
                newline = data.rfind(b"\n")
                if newline >= 0:
                    return start + newline + 1
                end = start
            return 0
    except OSError:
        return None


def _source(stores: list[Path], folder: str) -> str:
    """The `read_json` source over the stores' files in `folder`, or an empty relation."""
    sources: list[str] = []
    for store in stores:
        files = _files(store / folder)
        if not files:
            continue
        if any(c in str(store) for c in _GLOB_CHARS):
            # DuckDB globs cannot escape these: list today's files instead of matching per query.
            sources.extend(str(f) for f in files)
        else:  # files are matched per query, so files written later are seen too
            sources.append(str(store / folder / f"*{SEGMENT_SUFFIX}"))
    if not sources:
        return empty_source_sql()
    return read_json_sql(sources[0] if len(sources) == 1 else sources)


def skipped_rows(con: duckdb.DuckDBPyConnection, path: StorePaths = None) -> int:
    """How many lines of the store's segments the `records` view leaves out as malformed.

    Torn lines (a writer killed mid-write) and lines edited by hand with mistyped fields count.
    """
    source = _source(store_paths(path), SEGMENTS_DIR)
    row = con.execute(skipped_sql(source)).fetchone()
    return int(row[0]) if row else 0


def connect(path: StorePaths = None, *, external_access: bool = True) -> duckdb.DuckDBPyConnection:
    """Open an in-memory DuckDB connection with `records` and `roots` views over the store.

    A missing or empty store gives an empty `records` with the same columns, and so does not see
    segments created after `connect()`: open a new connection then. The same holds for a store path
    containing glob characters (`*?[]{}`), and for `roots` and the roots files. The session time zone
    is UTC, so `start_timestamp > now() - interval '1 hour'` compares like Logfire does. Close the
    connection when done (it is also a context manager).

    Args:
        path: The store folder, or several (or a glob) read together as one `records` table, e.g.
            the stores of worker processes whose spans continue one trace; default
            `default_store_path()`.
        external_access: False locks the connection to the store: SQL on it cannot read or write
            other files (`read_csv`, `COPY … TO`, `ATTACH`), load extensions or change settings.

    Returns:
        A DuckDB connection. Errors raised by queries on it are DuckDB's own; `query()` translates
        them to `StoreError`. On DuckDB 1.x (Python 3.10) SQL run on it directly reads the JSON
        arrows with DuckDB 1's low precedence (`a AND attributes->>'k' IS NULL` fails): `query()`
        and `mastrace sql` rewrite such SQL to read as it does on DuckDB 2 and in Logfire.

    Raises:
        StoreError: DuckDB could not create the views.
    """
    stores = store_paths(path)
    source, roots_source = _source(stores, SEGMENTS_DIR), _source(stores, ROOTS_DIR)
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
            folders = [str(s / d) + os.sep for s in stores for d in (SEGMENTS_DIR, ROOTS_DIR, SKELETON_DIR)]
            con.execute("SET allowed_directories = ?", [folders])
            con.execute("SET enable_external_access = false")
            con.execute("SET lock_configuration = true")
    except duckdb.Error as exc:
        con.close()
        raise StoreError(f"cannot open the local store at {', '.join(map(str, stores))}: {exc}") from exc
    return con


def query(
    sql: str,
    path: StorePaths = None,
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
        sql = portable_sql(sql)
        cursor = con.execute(sql, params) if params is not None else con.execute(sql)
        names = [d[0] for d in cursor.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    except duckdb.Error as exc:
        raise StoreError(f"query failed on the local store: {exc}") from exc
    finally:
        con.close()
