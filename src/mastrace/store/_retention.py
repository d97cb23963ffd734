"""Retention: remove a store's oldest segments, by age or to keep the store under a size.

A span takes about 1 KB in the store, so a service tracing 200 spans a second writes ~15 GiB a day.
`prune()` removes whole segments (with their roots and skeleton files), oldest first: those last
written more than `older_than` ago, then, while the store is over `max_bytes`, the oldest of the
rest. A segment written in the last minute is never removed (a writer may still be appending to
it), nor one a running writer holds open however long it has been idle (a worker waiting on a model):
writers take a shared `flock` on their segment, and a segment is removed only when an exclusive one
can be had. `mastrace prune` runs it by hand; the writer runs it whenever it starts a new segment when
`configure(retention=...)` asks for it.

A compacted file (see `_compact`) is removed whole, as old as the newest segment it replaced; prune
and compaction take the same lock, one at a time (a writer's own retention does not wait for it).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from ._manifest import (
    MANIFEST_SUFFIX,
    Manifest,
    _names,
    clear_leftovers,
    list_store,
    side_files,
    store_lock,
)
from ._schema import PENDING_DIR, ROOTS_DIR, SEGMENT_SUFFIX, SEGMENTS_DIR, SKELETON_DIR

__all__ = [
    "ACTIVE_SECONDS",
    "PruneResult",
    "Retention",
    "held",
    "parse_duration",
    "parse_retention",
    "parse_size",
    "prune",
]

ACTIVE_SECONDS: Final = 60.0
"""A segment written this recently is never removed: a writer may still be appending to it."""
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_PUSHED_DIR = "pushed"


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Bytes in `text` such as `512MB`, `2GB`, `1.5GiB` or `1000000`; ValueError otherwise."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"not a size: {text!r} (e.g. 512MB, 2GB, 1.5GiB)")
    number, unit = float(match.group(1)), match.group(2).lower()
    base = 1024 if "i" in unit else 1000
    power = {"": 0, "b": 0, "k": 1, "m": 2, "g": 3, "t": 4}[unit[:1] if unit[:1] in "kmgt" else ""]
    return int(number * base**power)


def parse_duration(text: str) -> float:
    """Seconds in `90s`, `15m`, `2h`, `7d` or `2w`; ValueError otherwise."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"not a duration: {text!r} (e.g. 90s, 15m, 2h, 7d, 2w)")
    return float(match.group(1)) * _UNITS[match.group(2).lower()]


@dataclass(frozen=True)
class Retention:
    """What a store keeps: segments younger than `older_than` seconds, at most `max_bytes` in all."""

    older_than: float | None = None
    max_bytes: int | None = None

    def __str__(self) -> str:
        parts = []
        if self.older_than is not None:
            parts.append(f"{self.older_than:g}s")
        if self.max_bytes is not None:
            parts.append(f"{self.max_bytes}B")
        return ",".join(parts) or "off"


def parse_retention(text: str) -> Retention:
    """A `Retention` from `7d`, `5GB` or both (`7d,5GB`); ValueError otherwise."""
    older_than: float | None = None
    max_bytes: int | None = None
    for part in filter(None, re.split(r"[,\s]+", text.strip())):
        try:
            older_than = parse_duration(part)
            continue
        except ValueError:
            pass
        try:
            max_bytes = parse_size(part)
        except ValueError:
            raise ValueError(f"not an age or a size: {part!r} (e.g. 7d, 5GB or 7d,5GB)") from None
    if older_than is None and max_bytes is None:
        raise ValueError("give an age (7d), a size (5GB) or both (7d,5GB)")
    return Retention(older_than, max_bytes)


@dataclass
class PruneResult:
    """What `prune()` did: the segments removed, the bytes freed, and what the store holds now."""

    removed: list[Path] = field(default_factory=list)
    freed: int = 0
    kept: int = 0
    kept_bytes: int = 0
    active: int = 0  # segments too recent to remove
    links: int = 0  # symbolic links in the store, skipped: never deleted through, never followed
    pending_removed: int = 0  # start records of writers gone (their spans never ended) let go by age


@dataclass
class _Segment:
    path: Path
    side_files: list[Path]
    size: int
    mtime: float
    compacted: Manifest | None = None  # a compacted file: removed with its manifest, never held


def hold(fd: int) -> None:
    """Mark the segment open on `fd` as in use by a running writer (released when the writer closes
    it or exits); where locks are not supported, the last-minute rule alone protects it."""
    if sys.platform != "win32":
        import fcntl

        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)


def held(path: Path) -> bool:
    """Whether a running writer holds the segment at `path` open (see `hold`)."""
    if sys.platform == "win32":
        return False
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def _segments(store: Path, result: PruneResult) -> list[_Segment]:
    """The store's live segments and compacted files, oldest first (a compacted file is as old as
    the newest segment it replaced); a symbolic link (a folder or a file) is counted in
    `result.links` and left out: another store's files are never removed through one."""
    out: list[_Segment] = []
    if (store / SEGMENTS_DIR).is_symlink():
        result.links += 1
        return out
    linked = {name: (store / name).is_symlink() for name in (ROOTS_DIR, SKELETON_DIR)}
    result.links += sum(linked.values())
    listing = list_store(store)
    for path in listing.segments:
        if path.is_symlink():
            result.links += 1
            continue
        side = [f for f in side_files(store, path.name) if not linked[f.parent.name] and not f.is_symlink()]
        try:
            stat = path.stat()
        except OSError:
            continue
        size = stat.st_size
        for file in side:
            with contextlib.suppress(OSError):
                size += file.stat().st_size
        out.append(_Segment(path, side, size, stat.st_mtime))
    for manifest in listing.manifests:
        try:
            size = manifest.parquet.stat().st_size
        except OSError:
            continue
        out.append(_Segment(manifest.parquet, [], size, manifest.newest_mtime, manifest))
    out.sort(key=lambda s: (s.mtime, s.path.name))
    return out


def prune(
    store: str | os.PathLike[str],
    retention: Retention,
    *,
    now: float | None = None,
    keep: frozenset[str] = frozenset(),
    dry_run: bool = False,
    wait: bool = True,
) -> PruneResult:
    """Remove the store's segments (and compacted files) that `retention` lets go, oldest first.

    Args:
        store: The store folder.
        retention: The age and the total size to keep.
        now: The time ages are counted from (default: now).
        keep: Names of segments never to remove (the caller's own current segment).
        dry_run: Say what would be removed, remove nothing.
        wait: Wait for a compaction running meanwhile; False removes nothing then.
    """
    root = Path(store)
    now = time.time() if now is None else now
    result = PruneResult()
    if dry_run:
        return _prune(root, retention, now, keep, dry_run, result)
    with store_lock(root, wait=wait) as locked:
        if locked:
            clear_leftovers(root)
            _prune(root, retention, now, keep, dry_run, result)
    return result


def _prune(
    root: Path, retention: Retention, now: float, keep: frozenset[str], dry_run: bool, result: PruneResult
) -> PruneResult:
    segments = _segments(root, result)
    total = sum(s.size for s in segments)
    replaced: set[str] = set()
    for segment in segments:
        active = segment.compacted is None and (
            segment.path.name in keep or now - segment.mtime < ACTIVE_SECONDS
        )
        too_old = retention.older_than is not None and now - segment.mtime > retention.older_than
        too_big = retention.max_bytes is not None and total > retention.max_bytes
        if not active and segment.compacted is None and (too_old or too_big) and held(segment.path):
            active = True
        if active:
            result.active += 1
        if active or not (too_old or too_big):
            result.kept += 1
            result.kept_bytes += segment.size
            continue
        if not dry_run and not _remove(segment):
            result.kept += 1
            result.kept_bytes += segment.size
            continue
        result.removed.append(segment.path)
        if segment.compacted is not None:
            replaced.update(segment.compacted.replaces)
        result.freed += segment.size
        total -= segment.size
    if result.removed and not dry_run:
        _forget_pushed(root, {p.name for p in result.removed} | replaced)
    _prune_pending(root, retention, now, dry_run, result)
    return result


def _prune_pending(root: Path, retention: Retention, now: float, dry_run: bool, result: PruneResult) -> None:
    """Remove the pending files (start records of spans still open, see `_writer`) of writers that are
    gone and that `retention.older_than` lets go: a run killed long ago does not stay "unfinished" once
    its spans are pruned. A running writer's file (held) is never removed; a link is not followed."""
    if retention.older_than is None:
        return
    folder = root / PENDING_DIR
    for name in _names(folder, SEGMENT_SUFFIX):
        path = folder / name
        try:
            age = now - path.stat().st_mtime
        except OSError:
            continue
        if age <= max(retention.older_than, ACTIVE_SECONDS) or held(path):
            continue
        if not dry_run:
            try:
                path.unlink()
            except OSError:
                continue
        result.pending_removed += 1


def _remove(segment: _Segment) -> bool:
    """Delete a segment, then its side files (a reader never sees side files without a segment
    that are not already stale); False when the segment itself could not be deleted. A compacted
    file goes with its manifest first: readers stop listing it before it is gone."""
    if segment.compacted is not None:
        try:
            segment.path.with_name(segment.compacted.name + MANIFEST_SUFFIX).unlink()
        except FileNotFoundError:
            pass
        except OSError:
            return False
    try:
        segment.path.unlink()
    except FileNotFoundError:
        pass
    except OSError:
        return False
    for file in segment.side_files:
        with contextlib.suppress(OSError):
            file.unlink()
    return True


def _forget_pushed(store: Path, names: set[str]) -> None:
    """Drop the removed segments from the records of what `mastrace push` sent (keyed by segment)."""
    folder = store / _PUSHED_DIR
    if folder.is_symlink() or not folder.is_dir():
        return
    for record in folder.glob("*.json"):
        try:
            data = json.loads(record.read_text())
            offsets = data.get("offsets") or {}
            if not isinstance(offsets, dict) or not names & set(offsets):
                continue
            data["offsets"] = {k: v for k, v in offsets.items() if k not in names}
            tmp = record.with_suffix(f".{os.getpid()}.prune.tmp")
            tmp.write_text(json.dumps(data, indent=1))
            os.replace(tmp, record)
        except (OSError, ValueError, AttributeError):
            continue
