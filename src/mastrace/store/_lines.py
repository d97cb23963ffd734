"""Lines of the store that no reader could read: found without reading every byte, and left out.

DuckDB's JSON reader refuses an object over 16 MiB, and one such line fails the whole scan of the
files it is in, so that every query of the store fails. mastrace's writer never writes one (see
`_bound`), but a store may hold lines from anywhere: an older version, a hand-made file, a broken
disk. Before a file is handed to DuckDB, `long_lines()` finds its lines over `MAX_LINE_BYTES`;
`readable_file()` then gives DuckDB a copy of the file without them (in a temporary folder of this
process, removed at exit), and readers count them with the other malformed lines.

Finding them costs a small read per 8 MiB: a line longer than `MAX_LINE_BYTES` (twice that window)
covers a whole window, so a file whose every window holds a newline has none, and most
windows show one in their first few kilobytes. Files only grow, so what was checked is remembered
per file and only new bytes are checked again.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Final

__all__ = ["MAX_LINE_BYTES", "bounded_lines", "long_lines", "readable_copies_folder", "readable_file"]

MAX_LINE_BYTES: Final = 16 * 1024 * 1024
"""The longest line readers read (DuckDB's JSON reader refuses longer objects); longer ones are skipped."""
_PROBE: Final = 64 * 1024
_CHUNK: Final = 1024 * 1024


@dataclass
class _Checked:
    """What is known of one file: up to where it was checked, and the long lines found so far."""

    upto: int = 0
    ranges: list[tuple[int, int]] = field(default_factory=list)


_lock = threading.RLock()
_checked: dict[tuple[int, int, int], _Checked] = {}
_copies: dict[tuple[int, int], tuple[int, Path]] = {}
_folder: Path | None = None


def _find(fd: int, start: int, end: int, *, first: bool = True) -> int | None:
    """Where the first newline in `[start, end)` is (from its end, with `first` False); None if none."""
    if first:
        pos, step = start, _PROBE
        while pos < end:
            data = os.pread(fd, min(step, end - pos), pos)
            if not data:
                return None
            found = data.find(b"\n")
            if found >= 0:
                return pos + found
            pos += len(data)
            step = _CHUNK
        return None
    pos = end
    while pos > start:
        begin = max(start, pos - _CHUNK)
        data = os.pread(fd, pos - begin, begin)
        found = data.rfind(b"\n")
        if found >= 0:
            return begin + found
        pos = begin
    return None


def _scan(fd: int, start: int, size: int, state: _Checked, limit: int) -> None:
    """Check `[start, size)` of a file (from a window start), adding its lines over `limit` to `state`.

    A line over `limit` (twice the window) covers a whole window, which therefore holds no newline:
    only windows are looked at, most of them through their first few kilobytes.
    """
    window = limit // 2
    pos = start
    while pos + window <= size:
        if _find(fd, pos, pos + window) is not None:
            pos += window
            continue
        before = _find(fd, 0, pos, first=False)
        line_start = 0 if before is None else before + 1
        line_end = _find(fd, pos + window, size)
        if line_end is None:  # the last line, unfinished (being written, or torn): checked again next time
            state.upto = line_start
            if size - line_start > limit:
                state.ranges.append((line_start, size))
            return
        if line_end + 1 - line_start > limit:
            state.ranges.append((line_start, line_end + 1))
        pos = line_end + 1
    state.upto = pos


def long_lines(path: Path, *, limit: int = MAX_LINE_BYTES) -> list[tuple[int, int]]:
    """The byte ranges `[start, end)` of the lines of `path` longer than `limit` bytes.

    A last line without its newline counts once it is that long. An unreadable file has none (its
    readers report it themselves).
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return []
    try:
        stat = os.fstat(fd)
        if stat.st_size <= limit:
            return []
        key = (stat.st_dev, stat.st_ino, limit)
        with _lock:
            known = _checked.get(key)
        if known is None or known.upto > stat.st_size:
            known = _Checked()
        # A line that was still open (no newline yet) starts where the check resumes: it is checked again.
        state = _Checked(known.upto, [r for r in known.ranges if r[1] <= known.upto])
        _scan(fd, state.upto, stat.st_size, state, limit)
        with _lock:
            _checked[key] = _Checked(state.upto, [r for r in state.ranges if r[1] <= state.upto])
        return list(state.ranges)
    except OSError:
        return []
    finally:
        os.close(fd)


def readable_copies_folder() -> Path:
    """The folder of this process's readable copies (created on first use, removed at exit)."""
    global _folder
    with _lock:
        if _folder is None:
            _folder = Path(tempfile.mkdtemp(prefix="mastrace-readable-"))
            atexit.register(shutil.rmtree, _folder, True)
        return _folder


def readable_file(path: Path, ranges: list[tuple[int, int]]) -> Path:
    """A copy of `path` without the byte `ranges` (its long lines), for DuckDB to read instead.

    Copies live in a temporary folder of this process, removed at exit; the copy of a file is made
    again only when the file has grown.
    """
    stat = path.stat()
    key = (stat.st_dev, stat.st_ino)
    with _lock:
        cached = _copies.get(key)
        if cached is not None and cached[0] == stat.st_size and cached[1].exists():
            return cached[1]
    target = readable_copies_folder() / f"{stat.st_dev}-{stat.st_ino}-{stat.st_size}{path.suffix}"
    with open(path, "rb") as source, open(target, "wb") as out:
        position = 0
        for start, end in sorted(ranges):
            _copy_range(source, out, position, start)
            position = end
        _copy_range(source, out, position, stat.st_size)
    with _lock:
        old = _copies.get(key)
        _copies[key] = (stat.st_size, target)
    if old is not None and old[1] != target:
        with contextlib.suppress(OSError):
            old[1].unlink()
    return target


def _copy_range(source: BinaryIO, out: BinaryIO, start: int, end: int) -> None:
    source.seek(start)
    left = end - start
    while left > 0:
        data = source.read(min(_CHUNK, left))
        if not data:
            return
        out.write(data)
        left -= len(data)


def bounded_lines(file: BinaryIO, start: int = 0) -> Iterator[tuple[int, bytes | None]]:
    """The whole lines of `file` from byte `start`, each with the offset just past it.

    A line longer than `MAX_LINE_BYTES` comes as None, read in pieces and never held whole; a last
    line without its newline (still being written, or torn) is not given.
    """
    file.seek(start)
    offset = start
    while True:
        raw = file.readline(MAX_LINE_BYTES + 1)
        if raw.endswith(b"\n"):
            offset += len(raw)
            yield offset, raw
            continue
        if len(raw) <= MAX_LINE_BYTES:
            return  # the end of the file, or an incomplete last line
        skipped = len(raw)
        while not raw.endswith(b"\n"):
            raw = file.readline(_CHUNK)
            if not raw:
                return  # a long line still being written
            skipped += len(raw)
        offset += skipped
        yield offset, None
