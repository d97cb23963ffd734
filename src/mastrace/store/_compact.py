"""Compaction: closed NDJSON segments rewritten as one Parquet file (ZSTD), swapped in atomically.

A store written by thousands of short processes holds thousands of small segments, and DuckDB pays
for every file it opens; NDJSON also repeats every span's resource and scope on its line. A
compacted file holds the same stored fields (so the `records` view reads it with the same columns),
sorted by trace and start time, compressed column by column: a resource repeated on every span is
stored once per page by Parquet's dictionary encoding, and a lookup of one trace skips the row
groups whose trace-id range (Parquet's statistics, DuckDB's zone maps) cannot hold it.

Only closed segments are compacted: those last written more than `min_age` seconds ago that no
running writer holds (writers take a shared `flock` on their current segment, which retention uses
too). The steps, under the store's compaction lock (one compaction or prune at a time):

1. leftovers of an earlier compaction are cleared: replaced segments still on disk, compacted
   files never committed, compacted files merged into a newer one;
2. the closed segments (and the small compacted files, merged) are copied into
   `compact/<id>.parquet.tmp`, which is synced and renamed to `compact/<id>.parquet`;
3. the manifest `compact/<id>.json` is written and renamed: the commit (see `_manifest`);
4. the replaced segments (with their roots and skeleton files) and merged files are deleted.

A process killed at any step leaves the old files visible (before 3) or the new (from 3 on), never
both and never neither; the next compaction clears what it left.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import duckdb

from ..exceptions import StoreError
from ..tracing._errors import warn_once
from ._manifest import (
    COMPACT_DIR,
    PARQUET_SUFFIX,
    Listing,
    Manifest,
    Step,
    clear_leftovers,
    delete_replaced,
    list_store,
    side_files,
    store_lock,
    sync_folder,
    write_manifest,
)
from ._retention import ACTIVE_SECONDS, held
from ._schema import ORIGIN, STORED_FIELDS, VALID_ROW_SQL, read_json_sql, read_parquet_sql

__all__ = [
    "AUTO_COMPACT_ENV",
    "AUTO_COMPACT_SEGMENTS",
    "DEFAULT_MERGE_BYTES",
    "DEFAULT_ROW_GROUP_ROWS",
    "CompactResult",
    "PeriodicCompaction",
    "compact",
    "compact_if_many",
]

DEFAULT_ROW_GROUP_ROWS: Final = 16_384
"""Rows per Parquet row group: small enough that a one-trace lookup reads little beyond its trace
(row groups are skipped by their trace-id range), large enough to compress well (see the benchmark)."""
DEFAULT_MERGE_BYTES: Final = 64 * 1024 * 1024
"""Compacted files smaller than this are merged into the next compaction's file."""
DEFAULT_GRACE_SECONDS: Final = 1.0
"""Between a compaction's commit and deleting the files it replaced (see `compact`)."""
_PUSHED_DIR: Final = "pushed"


@dataclass
class CompactResult:
    """What `compact()` did."""

    compacted: list[Path] = field(default_factory=list)  # the segments replaced
    merged: int = 0  # older compacted files merged into the new one
    written: Path | None = None  # the new compacted file
    spans: int = 0  # rows in the new file
    bytes_before: int = 0  # segments (with their roots and skeleton files) and merged files
    bytes_after: int = 0
    busy: bool = False  # another compaction or prune held the store
    skipped_open: int = 0  # segments left alone: written recently or held by a running writer
    skipped_unpushed: int = 0  # segments left alone: a `mastrace push` destination has not taken them whole
    cleared: int = 0  # leftovers of earlier compactions removed


def _noop(_: str) -> None:
    return None


def compact(
    store: str | os.PathLike[str],
    *,
    min_age: float = ACTIVE_SECONDS,
    merge_below: int = DEFAULT_MERGE_BYTES,
    row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
    wait: bool = True,
    now: float | None = None,
    grace: float = DEFAULT_GRACE_SECONDS,
    step: Step | None = None,
) -> CompactResult:
    """Compact the store's closed segments into one Parquet file (see the module docstring).

    Args:
        store: The store folder.
        min_age: Leave segments written in the last `min_age` seconds (a writer may still append).
        merge_below: Merge compacted files smaller than this into the new file.
        row_group_rows: Rows per Parquet row group.
        wait: Wait for a compaction or prune running elsewhere; False returns at once (`busy`).
        now: The time ages are counted from (default: now).
        grace: Seconds between the commit and deleting what it replaced, so that a reader that
            matched the store's files by glob just before the commit still finds them.
        step: Called with the name of each step as it is reached (tests stop the process there).

    Raises:
        StoreError: The files could not be read or written (nothing is committed then).
    """
    root = Path(store)
    step = step or _noop
    result = CompactResult()
    with store_lock(root, wait=wait) as locked:
        if not locked:
            result.busy = True
            return result
        result.cleared = clear_leftovers(root, step)
        listing = list_store(root)
        segments = _closed(root, listing, min_age, time.time() if now is None else now, result)
        merge = [m for m in listing.manifests if _size(m.parquet) < merge_below]
        if not segments and len(merge) < 2:
            return result
        step("listed")
        manifest = _write(root, segments, merge, row_group_rows, step, result)
        step("committed")
        if grace > 0:
            time.sleep(grace)
        delete_replaced(root, manifest, merge, step)
    return result


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _closed(root: Path, listing: Listing, min_age: float, now: float, result: CompactResult) -> list[Path]:
    """The listed segments that no writer may still append to and that every push took whole."""
    pushed = _pushed_offsets(root)
    out = []
    for segment in listing.segments:
        try:
            stat = segment.stat()
        except OSError:
            continue
        if now - stat.st_mtime < min_age or held(segment):
            result.skipped_open += 1
        elif any(offsets.get(segment.name, 0) < stat.st_size for offsets in pushed):
            result.skipped_unpushed += 1
        else:
            out.append(segment)
    return out


def _pushed_offsets(root: Path) -> list[dict[str, int]]:
    """What each `mastrace push` destination took of each segment (`push` reads segments only)."""
    out: list[dict[str, int]] = []
    folder = root / _PUSHED_DIR
    if not folder.is_dir():
        return out
    for record in folder.glob("*.json"):
        try:
            offsets = json.loads(record.read_text()).get("offsets") or {}
            out.append({str(k): int(v) for k, v in offsets.items()})
        except (OSError, ValueError, AttributeError, TypeError):
            continue
    return out


def has_origin(con: duckdb.DuckDBPyConnection, path: Path) -> bool:
    """Whether the compacted file at `path` keeps each row's segment of origin (files compacted before
    it was kept do not)."""
    described = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
    return any(row[0] == ORIGIN for row in described)


def _source(con: duckdb.DuckDBPyConnection, segments: list[Path], merge: list[Manifest]) -> str:
    """The rows to compact, each with the segment it was first written to (`origin`: see
    `_replay_compacted`, which lets a push to a new destination send them)."""
    from .reader import readable_files

    parts = []
    if segments:
        readable = readable_files(segments)  # one for one (a copy where a line is too long to read)
        con.execute("CREATE TEMP TABLE origins (path VARCHAR, origin VARCHAR)")
        rows = [[path, segment.name] for path, segment in zip(readable, segments, strict=True)]
        con.executemany("INSERT INTO origins VALUES (?, ?)", rows)
        parts.append(
            f"SELECT s.* EXCLUDE (filename), o.origin FROM {read_json_sql(readable, filename=True)} AS s "
            "JOIN origins AS o ON s.filename = o.path"
        )
    for m in merge:
        origin = ORIGIN if has_origin(con, m.parquet) else f"CAST(NULL AS VARCHAR) AS {ORIGIN}"
        parts.append(f"SELECT * FROM {read_parquet_sql([str(m.parquet)], extra=origin)}")
    return " UNION ALL ".join(parts)


def _stored_select() -> str:
    """The stored fields as Parquet keeps them: JSON values as text (read back as JSON)."""
    return (
        ", ".join(
            f"CAST({name} AS VARCHAR) AS {name}" if kind == "JSON" else name
            for name, kind in STORED_FIELDS.items()
        )
        + f", {ORIGIN}"
    )


def _write(
    root: Path,
    segments: list[Path],
    merge: list[Manifest],
    row_group_rows: int,
    step: Step,
    result: CompactResult,
) -> Manifest:
    folder = root / COMPACT_DIR
    name = f"{time.time_ns()}-{os.getpid()}"
    tmp = folder / f"{name}{PARQUET_SUFFIX}.tmp"
    final = folder / f"{name}{PARQUET_SUFFIX}"
    result.bytes_before = sum(_size(p) + sum(_size(s) for s in side_files(root, p.name)) for p in segments)
    result.bytes_before += sum(_size(m.parquet) for m in merge)
    step("copy")
    try:
        with duckdb.connect(":memory:") as con:
            sql = (
                f"COPY (SELECT {_stored_select()} FROM ({_source(con, segments, merge)}) AS segments "
                f"WHERE coalesce({VALID_ROW_SQL}, false) ORDER BY trace_id, start_ns, span_id) "
                f"TO '{_quoted(tmp)}' "
                f"(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {int(row_group_rows)})"
            )
            row = con.execute(sql).fetchone()
    except duckdb.Error as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise StoreError(f"cannot compact the local store at {root}: {exc}") from exc
    result.spans = int(row[0]) if row else 0
    step("written")
    _fsync(tmp)
    os.replace(tmp, final)
    sync_folder(folder)
    step("renamed")
    newest = max([_mtime(p) for p in segments] + [m.newest_mtime for m in merge] + [0.0])
    manifest = Manifest(
        name=name,
        parquet=final,
        replaces=tuple(sorted({p.name for p in segments} | {n for m in merge for n in m.replaces})),
        merges=tuple(m.name for m in merge),
        spans=result.spans,
        newest_mtime=newest,
    )
    write_manifest(folder, manifest)
    result.compacted = list(segments)
    result.merged = len(merge)
    result.written = final
    result.bytes_after = _size(final)
    return manifest


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


class PeriodicCompaction:
    """Compact a store every `every` seconds on a daemon thread of its own (`mastrace serve`): off
    the intake path, never waiting on a compaction or prune running elsewhere; failures are warned
    about once.
    """

    def __init__(self, store: Path, every: float, *, min_age: float = ACTIVE_SECONDS) -> None:
        self.store = store
        self.every = every
        self.min_age = min_age
        self.runs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="mastrace-compact", daemon=True)

    def start(self) -> PeriodicCompaction:
        """Start the thread (the first compaction runs after `every` seconds)."""
        self._thread.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Ask the thread to stop and wait for a compaction in progress to finish."""
        self._stop.set()
        self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                compact(self.store, min_age=self.min_age, wait=False)
            except Exception as exc:
                warn_once(
                    "store.compact", f"mastrace: could not compact the local store at {self.store}: {exc}"
                )
            self.runs += 1


AUTO_COMPACT_SEGMENTS: Final = 64
"""A read command compacts a store first when it holds at least this many closed segments."""
AUTO_COMPACT_ENV: Final = "MASTRACE_AUTO_COMPACT"


def compact_if_many(store: Path, threshold: int = AUTO_COMPACT_SEGMENTS) -> CompactResult | None:
    """Compact `store` when it holds `threshold` segments or more (what a read command does first,
    since DuckDB pays for every file it opens); None when it did not try. Never raises, never waits
    for a compaction or prune running elsewhere; `MASTRACE_AUTO_COMPACT=0` turns it off."""
    if os.environ.get(AUTO_COMPACT_ENV, "1").strip() in {"0", "false", "no", "off"}:
        return None
    if len(list_store(store).segments) < threshold:
        return None
    try:
        result = compact(store, wait=False)
    except Exception:  # a read-only store, a full disk: the command reads the segments as they are
        return None
    return result if result.written is not None else None
