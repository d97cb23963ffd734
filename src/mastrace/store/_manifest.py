"""What a store holds, compacted files included: the listing every reader and `prune` starts from.

Compaction (`_compact`) rewrites closed NDJSON segments into one Parquet file under `compact/`:

    <store>/compact/<id>.parquet       the spans of the segments it replaces, sorted by trace
    <store>/compact/<id>.json          its manifest: which segments (and older compacted files) it replaces

The manifest is the commit point. It is written (to a temporary name, then renamed) only after its
Parquet file is in place, and the replaced segments are deleted only after it is, so that:

- a compacted file without a manifest (a compaction killed before its commit) is invisible and
  later removed;
- a segment named by a manifest is invisible to readers whether or not it was deleted yet;
- a reader lists the segments *before* the manifests (`list_store`): when it sees a segment that a
  compaction replaced, it sees that compaction's manifest too, and when the segment was already
  gone, the manifest was already there. It sees the old files or the new, never both, never neither.

This module imports nothing but the standard library: the writer's retention uses it too.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ._schema import ROOTS_DIR, SEGMENT_SUFFIX, SEGMENTS_DIR, SKELETON_DIR, SKELETON_SUFFIX

__all__ = [
    "COMPACT_DIR",
    "LOCK_NAME",
    "MANIFEST_SUFFIX",
    "PARQUET_SUFFIX",
    "Listing",
    "Manifest",
    "clear_leftovers",
    "compact_generation",
    "delete_replaced",
    "list_store",
    "read_manifest",
    "side_files",
    "store_lock",
    "write_manifest",
]

COMPACT_DIR: Final = "compact"
PARQUET_SUFFIX: Final = ".parquet"
MANIFEST_SUFFIX: Final = ".json"
LOCK_NAME: Final = ".lock"
_TMP: Final = ".tmp"
_ATTEMPTS: Final = 8

Step = Callable[[str], None]


def _noop(_: str) -> None:
    return None


@dataclass(frozen=True)
class Manifest:
    """One committed compacted file and what it replaces."""

    name: str  # the file stem: `<name>.parquet` and `<name>.json` in `compact/`
    parquet: Path
    replaces: tuple[str, ...]  # segment file names
    merges: tuple[str, ...] = ()  # names of older compacted files it holds the spans of
    spans: int = 0
    newest_mtime: float = 0.0  # the latest write time of what it replaces (retention counts ages by it)

    def to_json(self) -> dict[str, Any]:
        """The manifest file's content."""
        return {
            "format": 1,
            "replaces": list(self.replaces),
            "merges": list(self.merges),
            "spans": self.spans,
            "newest_mtime": self.newest_mtime,
        }


@dataclass
class Listing:
    """A store's readable files at one moment: live segments and compacted files."""

    segments: list[Path] = field(default_factory=list)  # NDJSON segments no manifest replaces
    manifests: list[Manifest] = field(default_factory=list)  # live compacted files (none merged away)
    replaced: set[str] = field(default_factory=set)  # segment names some manifest replaces
    stale: list[Path] = field(default_factory=list)  # replaced segments still on disk

    @property
    def parquet(self) -> list[Path]:
        """The live compacted files."""
        return [m.parquet for m in self.manifests]


def read_manifest(path: Path) -> Manifest:
    """The manifest at `path`. Raises OSError (e.g. gone) or ValueError (not a manifest)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("replaces"), list):
        raise ValueError(f"not a compaction manifest: {path}")
    name = path.name[: -len(MANIFEST_SUFFIX)]
    return Manifest(
        name=name,
        parquet=path.with_name(name + PARQUET_SUFFIX),
        replaces=tuple(str(n) for n in data["replaces"]),
        merges=tuple(str(n) for n in data.get("merges") or ()),
        spans=int(data.get("spans") or 0),
        newest_mtime=float(data.get("newest_mtime") or 0.0),
    )


def write_manifest(folder: Path, manifest: Manifest) -> Path:
    """Write `manifest` durably and atomically (temporary file, fsync, rename, fsync the folder)."""
    path = folder / (manifest.name + MANIFEST_SUFFIX)
    tmp = folder / (manifest.name + MANIFEST_SUFFIX + _TMP)
    data = json.dumps(manifest.to_json()).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    sync_folder(folder)
    return path


def sync_folder(folder: Path) -> None:
    """Make the renames in `folder` durable (a no-op where folders cannot be opened)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _names(folder: Path, suffix: str) -> list[str]:
    """The files of `folder` ending in `suffix`; none through a symbolic link, neither the folder's nor
    a file's: a store never reads, compacts or removes another folder's files through a link."""
    try:
        if folder.is_symlink():
            return []
        return sorted(n for n in os.listdir(folder) if n.endswith(suffix) and not (folder / n).is_symlink())
    except OSError:
        return []


def compact_generation(store: Path) -> tuple[str, ...]:
    """The names of the store's manifests: changes whenever a compaction commits or a compacted
    file is removed (a reader holding views over older files then lists the store again)."""
    return tuple(_names(store / COMPACT_DIR, MANIFEST_SUFFIX))


def list_store(store: Path) -> Listing:
    """The store's readable files now: segments listed first, then the manifests (see the module)."""
    for _ in range(_ATTEMPTS):
        segments = [store / SEGMENTS_DIR / n for n in _names(store / SEGMENTS_DIR, SEGMENT_SUFFIX)]
        manifests: list[Manifest] = []
        vanished = False
        for name in _names(store / COMPACT_DIR, MANIFEST_SUFFIX):
            try:
                manifests.append(read_manifest(store / COMPACT_DIR / name))
            except FileNotFoundError:
                vanished = True  # merged or pruned since the listing: list again
                break
            except (OSError, ValueError):
                continue  # unreadable: as if absent (its segments, if any are left, stay visible)
        if not vanished:
            break
    merged = {name for m in manifests for name in m.merges}
    replaced = {name for m in manifests for name in m.replaces}
    live = [m for m in manifests if m.name not in merged]
    kept = [p for p in segments if p.name not in replaced]
    stale = [p for p in segments if p.name in replaced]
    return Listing(kept, live, replaced, stale)


def side_files(store: Path, segment_name: str) -> list[Path]:
    """A segment's roots and skeleton files."""
    stem = segment_name[: -len(SEGMENT_SUFFIX)]
    return [store / ROOTS_DIR / segment_name, store / SKELETON_DIR / f"{stem}{SKELETON_SUFFIX}"]


@contextlib.contextmanager
def store_lock(store: Path, *, wait: bool = True) -> Iterator[bool]:
    """Hold the store's compaction lock (an exclusive `flock` on `compact/.lock`): one compaction or
    prune at a time. Yields False when `wait` is False and someone else holds it. A process killed
    while holding it releases it with its descriptors."""
    if sys.platform == "win32":  # pragma: no cover - no flock: one compaction at a time is on the user
        yield True
        return
    import fcntl

    folder = store / COMPACT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def delete_replaced(root: Path, manifest: Manifest, merge: list[Manifest], step: Step) -> None:
    """Delete what `manifest` replaced: segments first (each before its side files), then the merged
    files, each manifest before its Parquet file (readers stop listing a file before it goes)."""
    for index, name in enumerate(manifest.replaces):
        segment = root / SEGMENTS_DIR / name
        if segment.exists():
            _unlink(segment)
            for side in side_files(root, name):
                _unlink(side)
            step(f"deleted:{index}")
    for index, old in enumerate(merge):
        _unlink(old.parquet.with_name(old.name + MANIFEST_SUFFIX))
        _unlink(old.parquet)
        step(f"merged:{index}")


def clear_leftovers(root: Path, step: Step = _noop) -> int:
    """Remove what a killed compaction left (call with the store lock held): replaced segments still
    on disk, files merged into a newer one, and files never committed. Returns how many were removed."""
    folder = root / COMPACT_DIR
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    cleared = 0
    manifests: dict[str, Manifest] = {}
    for name in names:
        if name.endswith(MANIFEST_SUFFIX):
            with contextlib.suppress(OSError, ValueError):
                manifest = read_manifest(folder / name)
                manifests[manifest.name] = manifest
    merged = {n for m in manifests.values() for n in m.merges}
    for manifest in manifests.values():
        if manifest.name in merged:
            continue
        for index, segment in enumerate(manifest.replaces):
            path = root / SEGMENTS_DIR / segment
            if path.exists():
                delete_replaced(root, Manifest(manifest.name, manifest.parquet, (segment,)), [], step)
                cleared += 1
                step(f"cleared:{index}")
    for name in merged & set(manifests):
        old = manifests[name]
        delete_replaced(root, Manifest("", Path(), ()), [old], step)
        cleared += 1
    committed = {m.name for m in manifests.values() if m.name not in merged}
    for name in names:
        stem = name.split(".", 1)[0]
        orphan = name.endswith(".tmp") or (name.endswith(PARQUET_SUFFIX) and stem not in committed)
        if orphan and (folder / name).is_file():
            _unlink(folder / name)
            cleared += 1
    return cleared
