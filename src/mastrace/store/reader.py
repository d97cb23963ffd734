"""Read the local store with DuckDB, through the same `records` table that Logfire's SQL uses.

`connect()` gives an in-memory DuckDB connection with a `records` view over every segment file of
the store and its compacted (Parquet) files (see `_compact`). Until the store is first compacted, the
view re-lists the segment files on every query, so segments that writers create after `connect()`
show up in later queries; a compacted store's files are listed when the view is made (`TraceStore`
lists them again when they change). Segments may be appended to while they are read: a line
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

import contextlib
import glob
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import duckdb

from ..exceptions import StoreError
from ._limits import QueryLimits
from ._lines import MAX_LINE_BYTES, long_lines, readable_copies_folder, readable_file
from ._manifest import COMPACT_DIR, compact_generation, list_store
from ._retention import held
from ._schema import (
    PENDING_DIR,
    ROOTS_DIR,
    ROOTS_VIEW_NAME,
    SEGMENT_SUFFIX,
    SEGMENTS_DIR,
    SKELETON_DIR,
    SKELETON_SUFFIX,
    VIEW_NAME,
    WINDOW,
    duplicate_keys_sql,
    duplicates_sql,
    empty_source_sql,
    read_json_sql,
    read_parquet_sql,
    view_sql,
)
from ._sql_compat import portable_sql

__all__ = [
    "PendingFile",
    "SkeletonFile",
    "StoreHealth",
    "StorePaths",
    "check_store",
    "compact_generation",
    "compacted_files",
    "connect",
    "default_store_path",
    "pending_files",
    "query",
    "readable_files",
    "refresh_views",
    "root_files",
    "roots_complete",
    "segment_files",
    "skeleton_files",
    "skipped_rows",
    "store_fingerprint",
    "store_health",
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
    """The store's files in `folder`, sorted; symbolic links (the folder itself, or a file) and files
    this process cannot read are left out (see `unsafe_entries`): a link would reach outside the
    store (and out of a sandboxed statement's reach, failing every statement), an unreadable file
    would fail every statement too."""
    if folder.is_symlink() or not folder.is_dir():
        return []
    return sorted(
        p
        for p in folder.iterdir()
        if p.name.endswith(SEGMENT_SUFFIX) and not p.is_symlink() and p.is_file() and os.access(p, os.R_OK)
    )


def unsafe_entries(path: StorePaths = None) -> int:
    """How many symbolic links (folders or files) and unreadable files the store(s) hold where
    segments, roots and skeletons are: each is left out by every reader, and said."""
    count = 0
    for store in store_paths(path):
        for name in (SEGMENTS_DIR, ROOTS_DIR, SKELETON_DIR):
            folder = store / name
            if folder.is_symlink():
                count += 1
                continue
            if not folder.is_dir():
                continue
            with contextlib.suppress(OSError):
                count += sum(
                    1
                    for p in folder.iterdir()
                    if p.is_symlink() or (p.is_file() and not os.access(p, os.R_OK))
                )
    return count


def segment_files(path: StorePaths = None) -> list[Path]:
    """The NDJSON segment files of the store(s) at `path` (default: `default_store_path()`), sorted by
    name; segments that a compaction replaced (and is deleting) are left out."""
    return [f for store in store_paths(path) for f in list_store(store).segments]


def compacted_files(path: StorePaths = None) -> list[Path]:
    """The compacted (Parquet) files of the store(s) at `path` that readers read, sorted by name."""
    return [f for store in store_paths(path) for f in list_store(store).parquet]


def _root_files(store: Path, replaced: set[str]) -> list[Path]:
    return [f for f in _files(store / ROOTS_DIR) if f.name not in replaced]


def root_files(path: StorePaths = None) -> list[Path]:
    """The roots files of the store(s) at `path` (default: `default_store_path()`), sorted by name."""
    out = []
    for store in store_paths(path):
        out.extend(_root_files(store, list_store(store).replaced))
    return out


def roots_complete(path: StorePaths = None) -> bool:
    """Whether `roots` holds exactly the root spans of `records`: roots files and segments pair up.

    Writers create a segment's roots file before the segment, so a segment seen without one was
    written by an older version or lost its roots file after a failed write; a roots file without
    its segment outlived a segment that was deleted. Compacted files need none: `roots` reads their
    root spans from them.
    """
    for store in store_paths(path):
        listing = list_store(store)
        if [p.name for p in _root_files(store, listing.replaced)] != [p.name for p in listing.segments]:
            return False
    return True


class PendingFile(NamedTuple):
    """A file of start records of spans that were open at a flush (see `store._writer`)."""

    path: Path
    running: bool
    """Whether its writer still runs (it holds the file): its open spans are running, not unfinished."""


def pending_files(path: StorePaths = None) -> list[PendingFile]:
    """The pending files of the store(s) at `path` (default: `default_store_path()`), sorted by name."""
    return [PendingFile(f, held(f)) for store in store_paths(path) for f in _files(store / PENDING_DIR)]


def store_fingerprint(path: StorePaths = None) -> str:
    """A text that changes whenever the store's segments, roots, pending or compacted files do
    (names, sizes, times) or a pending file's writer ends: equal fingerprints mean equal contents,
    without reading them."""
    parts = []
    for store in store_paths(path):
        for folder in (SEGMENTS_DIR, ROOTS_DIR, PENDING_DIR):
            for file in _files(store / folder):
                with contextlib.suppress(OSError):
                    stat = file.stat()
                    running = f":{held(file)}" if folder == PENDING_DIR else ""
                    parts.append(f"{file}:{stat.st_size}:{stat.st_mtime_ns}{running}")
        parts.extend(f"{store}:{name}" for name in compact_generation(store))
    return "\n".join(parts)


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
            linked = folder.is_symlink()
            names = (
                set() if linked else {p.name for p in folder.iterdir() if p.is_file() and not p.is_symlink()}
            )
        except OSError:  # no skeleton folder, or one that cannot be listed: read the segments' JSON
            names = set()
        for segment in list_store(store).segments:
            name = segment.name[: -len(SEGMENT_SUFFIX)] + SKELETON_SUFFIX
            whole = _whole_lines(segment) if name in names else None
            if whole is None or not _covers(folder / name, segment, whole):
                alone.append(segment)
            else:
                paired.append(SkeletonFile(folder / name, segment, whole))
    return paired, alone


def _covers(skeleton: Path, segment: Path, whole: int, chunk: int = 1 << 16) -> bool:
    """Whether the skeleton file describes the segment's last whole line: a line appended by anyone
    but the segment's writer (by hand, by another program) has none, and then the segment's JSON is
    read instead, so that no span goes unseen."""
    if whole == 0:
        return True
    try:
        with open(segment, "rb") as file:
            end = whole - 1  # the last line's newline
            last_line = 0
            while end > 0:
                start = max(0, end - chunk)
                newline = os.pread(file.fileno(), end - start, start).rfind(b"\n")
                if newline >= 0:
                    last_line = start + newline + 1
                    break
                if whole - start > MAX_LINE_BYTES:
                    return False  # longer than any line a writer of the store writes
                end = start
        with open(skeleton, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            tail = os.pread(file.fileno(), min(size, 4096), max(0, size - 4096))
        lines = tail.split(b"\n")
        complete = lines[-2] if len(lines) >= 2 else b""
        rel, base = complete.split(b",", 2)[:2]
        return int(base) + int(rel) >= last_line
    except (OSError, ValueError):
        return False


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


def _readable(files: list[Path]) -> tuple[list[str], int]:
    """`files` as DuckDB may read them: each file, or a copy of it without its over-long lines
    (see `_lines`); and how many such lines were left out."""
    out: list[str] = []
    left_out = 0
    for path in files:
        ranges = long_lines(path)
        if ranges:
            with contextlib.suppress(OSError):  # gone meanwhile, or unreadable: nothing of it is read
                out.append(str(readable_file(path, ranges)))
            left_out += len(ranges)
        else:
            out.append(str(path))
    return out, left_out


def readable_files(files: Sequence[str | os.PathLike[str]]) -> list[str]:
    """The files DuckDB reads for `files` (segment or roots files), one for one: a copy of a file that
    holds a line too long to read, without that line; the file itself otherwise."""
    out = []
    for file in files:
        path = Path(file)
        ranges = long_lines(path)
        try:
            out.append(str(readable_file(path, ranges)) if ranges else str(path))
        except OSError:
            out.append(str(path))
    return out


def _has_unsafe(folder: Path) -> bool:
    """Whether `folder` holds a file its glob would match that `_files` leaves out."""
    try:
        return any(
            p.name.endswith(SEGMENT_SUFFIX) and (p.is_symlink() or not os.access(p, os.R_OK))
            for p in folder.iterdir()
        )
    except OSError:
        return False


def _source(stores: list[Path], folder: str) -> tuple[str, int]:
    """The source over the stores' files in `folder` (`segments` or `roots`) and their compacted
    files (or an empty relation), and how many over-long lines it leaves out."""
    sources: list[str] = []
    parquet: list[str] = []
    left_out = 0
    for store in stores:
        listing = list_store(store)
        parquet.extend(map(str, listing.parquet))
        if folder == SEGMENTS_DIR:
            files, stale = listing.segments, bool(listing.stale)
        else:
            everything = _files(store / folder)
            files = [f for f in everything if f.name not in listing.replaced]
            stale = len(files) != len(everything)
        if not files:
            continue
        readable, skipped = _readable(files)
        left_out += skipped
        # Once a store is compacted, its segments are listed: a glob matched after a compaction deleted
        # the segments it replaced would read neither them nor the compacted file this view lacks.
        if (
            skipped
            or stale
            or listing.manifests
            or _has_unsafe(store / folder)
            or any(c in str(store) for c in _GLOB_CHARS)
        ):
            # DuckDB globs cannot leave a file out nor escape these: list today's files instead.
            sources.extend(readable)
        else:  # files are matched per query, so files written later are seen too
            sources.append(str(store / folder / f"*{SEGMENT_SUFFIX}"))
    parts = []
    if sources:
        parts.append(f"SELECT * FROM {read_json_sql(sources[0] if len(sources) == 1 else sources)}")
    if parquet:
        roots_only = " WHERE parent_span_id IS NULL" if folder == ROOTS_DIR else ""
        parts.append(f"SELECT * FROM {read_parquet_sql(parquet)} AS compacted{roots_only}")
    if not parts:
        return empty_source_sql(), left_out
    if len(parts) == 1 and sources:
        return read_json_sql(sources[0] if len(sources) == 1 else sources), left_out
    return "(" + " UNION ALL ".join(parts) + ")", left_out


class StoreHealth(NamedTuple):
    """What the `records` view leaves out of the store's segments, or shows once."""

    skipped: int  # malformed lines: torn, edited by hand with mistyped fields, or too long to read
    duplicates: int  # extra copies of spans stored more than once (the view shows each span once)

    def lines(self, where: str) -> list[str]:
        """What to tell a reader of the store at `where`: one sentence per finding (none when clean)."""
        out = []
        if self.skipped:
            out.append(f"skipped {self.skipped} malformed row(s) in {where}")
        if self.duplicates:
            out.append(
                f"{self.duplicates} extra copy(ies) of spans stored more than once in {where}; "
                "each span is shown once (the copy that ended last)"
            )
        return out


_DUPLICATE_KEYS = "_mastrace_duplicate_keys"
_HEALTH = "_mastrace_health"


def check_store(con: duckdb.DuckDBPyConnection, path: StorePaths = None) -> StoreHealth:
    """Find the spans stored more than once and the malformed lines (one scan of the segments), and
    make `records` on `con` show each span once; returns what was found (also kept on `con`).

    `connect()` does this unless told not to (`check=False`), for callers that check later, or
    only when they read `records` (`TraceStore` does).
    """
    source, too_long = _source(store_paths(path), SEGMENTS_DIR)
    con.execute(duplicate_keys_sql(source, _DUPLICATE_KEYS))
    malformed, keys = 0, 0
    for key, n in con.execute(f"SELECT key IS NULL, n FROM {_DUPLICATE_KEYS}").fetchall():
        if key:
            malformed = int(n)
        else:
            keys += 1
    duplicates = 0
    if keys:
        row = con.execute(duplicates_sql(source, _DUPLICATE_KEYS)).fetchone()
        duplicates = int(row[0] or 0) if row else 0
    con.execute(view_sql(source, VIEW_NAME, once=_DUPLICATE_KEYS if keys else None))
    health = StoreHealth(malformed + too_long, duplicates)
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {_HEALTH} AS SELECT ? AS skipped, ? AS duplicates", list(health)
    )
    return health


def store_health(con: duckdb.DuckDBPyConnection, path: StorePaths = None) -> StoreHealth:
    """How many lines of the store's segments `records` leaves out as malformed, and how many extra
    copies of spans it shows once: as found when `con` was checked (see `check_store`), else now."""
    try:
        row = con.execute(f"SELECT skipped, duplicates FROM {_HEALTH}").fetchone()
    except duckdb.CatalogException:
        row = None
    if row is None:
        return check_store(con, path)
    return StoreHealth(int(row[0]), int(row[1]))


def skipped_rows(con: duckdb.DuckDBPyConnection, path: StorePaths = None) -> int:
    """How many lines of the store's segments the `records` view leaves out as malformed.

    Torn lines (a writer killed mid-write), lines edited by hand with mistyped fields and lines too
    long for any reader (over 16 MiB, which mastrace's writer never writes) count.
    """
    return store_health(con, path).skipped


def refresh_views(con: duckdb.DuckDBPyConnection, path: StorePaths = None, *, check: bool = True) -> None:
    """(Re)create `records` and `roots` on `con` over the store's files as they are now, lines too
    long to read left out; with `check`, also find the spans stored more than once (`check_store`)."""
    stores = store_paths(path)
    con.execute(view_sql(_source(stores, SEGMENTS_DIR)[0], VIEW_NAME, once=None))
    con.execute(view_sql(_source(stores, ROOTS_DIR)[0], ROOTS_VIEW_NAME, once=WINDOW))  # few lines
    if check:
        check_store(con, stores)


def connect(
    path: StorePaths = None,
    *,
    external_access: bool = True,
    check: bool = True,
    limits: QueryLimits | None = None,
) -> duckdb.DuckDBPyConnection:
    """Open an in-memory DuckDB connection with `records` and `roots` views over the store.

    Each span shows once in both views, however many times it was stored (its trace and span id
    are its identity; of its copies the one that ended last, then the one stored last, is shown);
    a line that cannot be read (torn, mistyped, or over 16 MiB) is left out. Finding the spans
    stored more than once takes one scan of the store when the connection opens (`check`): copies
    that arrive later show once only on a new connection.

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
        check: Find spans stored more than once now; False leaves `records` showing every copy
            until `check_store(con)` runs (for a caller that may not need it).
        limits: The memory limit to apply (see `QueryLimits`; its timeout is the caller's to apply,
            with `run_limited`).

    Returns:
        A DuckDB connection. Errors raised by queries on it are DuckDB's own; `query()` translates
        them to `StoreError`. On DuckDB 1.x (Python 3.10) SQL run on it directly reads the JSON
        arrows with DuckDB 1's low precedence (`a AND attributes->>'k' IS NULL` fails): `query()`
        and `mastrace sql` rewrite such SQL to read as it does on DuckDB 2 and in Logfire.

    Raises:
        StoreError: DuckDB could not create the views.
    """
    stores = store_paths(path)
    try:
        con = duckdb.connect(":memory:")
    except duckdb.Error as exc:  # pragma: no cover - an in-memory database has nothing to fail on
        raise StoreError(f"cannot start DuckDB: {exc}") from exc
    try:
        # Timestamps are naive UTC: comparing them with now() must happen in UTC too.
        con.execute("SET TimeZone = 'UTC'")
        if limits is not None:
            limits.apply(con)
        refresh_views(con, stores, check=False)
        if not external_access:
            folders = [
                str(s / d) + os.sep
                for s in stores
                for d in (SEGMENTS_DIR, ROOTS_DIR, SKELETON_DIR, COMPACT_DIR)
            ]
            # and where copies of files with lines too long to read go (see `_lines`)
            folders.append(str(readable_copies_folder()) + os.sep)
            # DuckDB lets SQL read its temporary folder (by default `.tmp` in the working folder):
            # nothing spills there, so nothing outside the store is readable.
            con.execute("SET temp_directory = ''")
            con.execute("SET allowed_directories = ?", [folders])
            con.execute("SET enable_external_access = false")
            con.execute("SET lock_configuration = true")
        if check:
            check_store(con, stores)
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
    sql = portable_sql(sql)
    for attempt in (1, 2):
        con = connect(path)
        try:
            cursor = con.execute(sql, params) if params is not None else con.execute(sql)
            names = [d[0] for d in cursor.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        except duckdb.IOException as exc:
            if attempt == 1:  # a file compacted or pruned away since the store was listed: list again
                continue
            raise StoreError(f"query failed on the local store: {exc}") from exc
        except duckdb.Error as exc:
            raise StoreError(f"query failed on the local store: {exc}") from exc
        finally:
            con.close()
    raise AssertionError("unreachable")  # pragma: no cover
