"""`LocalStoreExporter`: append finished spans to the local store.

Every process writes its own segment files, so any number of processes can write to one store at
once without a lock between them:

    <store>/segments/<hostname>-<pid>-<unix_ns>-<seq>.ndjson
    <store>/roots/<the same name>            the lines of the segment's root spans only
    <store>/skeleton/<the same stem>.csv     a short line per span: where its line starts, its ids,
                                             times and error flag (see `_schema.SKELETON_FIELDS`)

Each `export()` call encodes its whole batch first and hands it to the kernel in a single
`os.write` on a file opened with `O_APPEND`. Nothing is buffered in the process, so a writer that
is killed loses only the spans it had not yet been given; at worst the last line of its segment is
torn, and readers skip that line. A segment is closed and a new one started once it passes
`max_segment_bytes`, or after a failed write (so that nothing is ever appended after a torn line).

Each batch's skeleton lines are appended to the skeleton file just before its lines go to the
segment, with their final offsets; readers keep only the skeleton lines whose span line has started
in the segment, so a writer killed between the two writes leaves nothing wrong behind. A skeleton
file that could not be written whole is deleted, and readers parse that segment's JSON instead.

Before each batch the writer checks that its segment is still the file of that name in the store:
when the store folder was deleted, pruned or replaced under it, it warns once and starts a new
segment there instead of writing into a file no reader can see.

The root spans of the batch then go to the segment's roots file the same way, so that readers
can find runs without scanning every span. The roots file is created before its segment, so a
reader never sees a segment without it; when a write fails the roots file is deleted, and readers
fall back to scanning the segments for as long as any segment has none. A writer killed between
the two writes leaves that batch's roots out of the roots file.

Pending spans: the export thread hands `export_pending()` the spans still open at a flush, once
each, and their start records (the same line, with `end_ns` equal to `start_ns`) go to

    <store>/pending/<hostname>-<pid>-<unix_ns>.ndjson       one file per writing process

which the writer holds locked while it runs, so that readers tell a running span (its writer holds
the file) from an unfinished one (its process ended first: killed, or exited without ending it).
The `records` view never reads that folder; readers merge its lines with the spans that ended. A
writer that shuts down with none of its pending spans still open deletes the file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ..exceptions import ConfigError, StoreError
from ..tracing._errors import warn_once
from ._bound import DEFAULT_MAX_ROW_BYTES, check_max_row_bytes
from ._retention import Retention, hold, prune
from ._rows import EncodedBatch, RowEncoder
from ._schema import (
    PENDING_DIR,
    ROOTS_DIR,
    SEGMENT_SUFFIX,
    SEGMENTS_DIR,
    SKELETON_BASE,
    SKELETON_DIR,
    SKELETON_SUFFIX,
)

__all__ = ["DEFAULT_SEGMENT_BYTES", "LocalStoreExporter"]

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
# O_NOFOLLOW: a file planted as a symbolic link in the store is never written through.
_OPEN_FLAGS = (
    os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
)


def _own_folder(folder: Path) -> None:
    """Create `folder` (a folder of the store) if missing; refuse one that is a symbolic link, which
    would make the writer write into another folder (another store, or anywhere)."""
    if folder.is_symlink():
        raise OSError(errno.ELOOP, f"{folder} is a symbolic link: the store is not written through it")
    folder.mkdir(parents=True, exist_ok=True)


def _safe_hostname() -> str:
    name = socket.gethostname() or "host"
    return "".join(c if c.isalnum() or c in "._" else "_" for c in name)


class LocalStoreExporter(SpanExporter):
    """Writes spans to a local store folder that DuckDB reads as the `records` table.

    Args:
        path: The store folder (created if missing). Segments go in its `segments/` subfolder and
            the root spans of each segment also in a file of the same name in `roots/`.
        max_segment_bytes: Size after which the current segment is closed and a new one started.
        max_row_bytes: The most bytes one span's line may take (default 1 MB, at most 8 MiB, half
            of what DuckDB's JSON reader accepts): the largest values of a longer line are cut,
            each with a visible truncation marker, and the span gets `mastrace.truncated = true`.
        retention: Each time a new segment is started, remove the oldest segments it lets go
            (see `mastrace prune`); None keeps everything.

    Attributes:
        exported_spans: Spans written so far.
        failed_spans: Spans that could not be encoded or written (each failure cause is logged once).
        truncated_spans: Spans whose line was over `max_row_bytes` and was shrunk to fit.

        strict: Raise `StoreError` when the folder cannot be written. With False, that is one
            warning (logger `mastrace`); every export then tries again, and the spans of a
            failed one count as failed.

    Raises:
        StoreError: The store folder cannot be created or written, and `strict` is True.

    Example:
        ```python
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from mastrace.store import LocalStoreExporter

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(LocalStoreExporter(".mastrace")))
        ```
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        max_row_bytes: int = DEFAULT_MAX_ROW_BYTES,
        retention: Retention | None = None,
        strict: bool = True,
    ) -> None:
        try:
            check_max_row_bytes(max_row_bytes)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"max_row_bytes={max_row_bytes!r}: {exc}") from None
        self.path = Path(path)
        self.segments_dir = self.path / SEGMENTS_DIR
        self.roots_dir = self.path / ROOTS_DIR
        self.skeleton_dir = self.path / SKELETON_DIR
        self.max_segment_bytes = max_segment_bytes
        self.retention = retention
        self.exported_spans = 0
        self.failed_spans = 0
        self.truncated_spans = 0
        self._encoder = RowEncoder(max_row_bytes)
        self._lock = threading.Lock()
        self._host = _safe_hostname()
        self._fd: int | None = None
        self._roots_fd: int | None = None
        self._skeleton_fd: int | None = None
        self._skeleton: Path | None = None
        self._fd_pid = 0
        self._identity = (0, 0)
        self._segment: Path | None = None
        self._roots: Path | None = None
        self._size = 0
        self._seq = 0
        self._closed = False
        self.pending_dir = self.path / PENDING_DIR
        self._pending_fd: int | None = None
        self._pending: Path | None = None
        self._pending_pid = 0
        self._open_ids: set[int] = set()  # span ids with a start record whose end is not written yet
        if hasattr(os, "register_at_fork"):
            # A forked child must not keep its parent's pending file held: once the parent dies, its
            # open spans read as unfinished, however long the child lives.
            forget = weakref.WeakMethod(self._forget_pending)
            os.register_at_fork(after_in_child=lambda: (method := forget()) is not None and method())
        # Opening now means a reader sees this writer's (empty) segment before the first span, and
        # an unusable path fails here rather than on the export thread.
        try:
            with self._lock:
                self._open_segment()
        except OSError as exc:
            if strict:
                raise StoreError(f"cannot write the local store at {self.path}: {exc}") from exc
            warn_once(
                "store.write",
                f"mastrace: cannot write the local store at {self.path}: {exc}; its spans are counted "
                "as failed (further failures are counted, not logged)",
            )

    @property
    def segment(self) -> Path | None:
        """The segment file currently appended to."""
        return self._segment

    @property
    def roots(self) -> Path | None:
        """The roots file of the current segment; None when it could not be written."""
        return self._roots

    @property
    def skeleton(self) -> Path | None:
        """The skeleton file of the current segment; None when it could not be written."""
        return self._skeleton

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Append `spans` to the current segment; never raises."""
        stored = self.export_counted(spans)
        return SpanExportResult.SUCCESS if stored == len(spans) else SpanExportResult.FAILURE

    def export_counted(self, spans: Sequence[ReadableSpan]) -> int:
        """Append `spans` to the current segment and return how many are in the store; never raises.

        When the disk fills up in the middle of a batch, the spans whose lines were written whole
        count as stored and the others as failed, so the counts match what the store holds.
        """
        if self._closed:
            return 0
        try:
            batch = self._encoder.encode_batch(spans, time.time_ns())
        except Exception as exc:
            self._fail(len(spans), "encode", exc)
            return 0
        if batch.failed:
            self._fail(batch.failed, "encode", ValueError(f"{batch.failed} malformed span(s)"))
        if not batch.data:
            return 0
        if self._open_ids:
            self._ended(spans)
        try:
            with self._lock:
                self._append(batch)
                self.exported_spans += batch.encoded
                self.truncated_spans += batch.truncated
            return batch.encoded
        except _PartialWrite as partial:
            with self._lock:
                self.exported_spans += partial.lines
            self._fail(batch.encoded - partial.lines, "write", partial.error)
            return partial.lines
        except Exception as exc:
            self._fail(batch.encoded, "write", exc)
            return 0

    def warm_up(self, spans: Sequence[ReadableSpan]) -> None:
        """Encode `spans` as `export()` would and throw the lines away: nothing is written or counted.

        The encoder caches what depends only on a span's resource and scope, and runs some paths
        (events, links, status messages) only for the spans that have them: calling this with spans
        like the first ones (the configuration's export thread does, before its first batch) makes
        the first export cost what a later one does. Never raises.
        """
        with contextlib.suppress(Exception):
            self._encoder.encode_batch(spans, time.time_ns())

    def export_pending(self, spans: Sequence[ReadableSpan]) -> int:
        """Append the start records of `spans`, still open, to this process's pending file; never
        raises. Returns how many were written (0 when the store cannot be written: nothing is counted,
        the span's end record is what counts)."""
        if self._closed or not spans:
            return 0
        try:
            data, failed = self._encoder.encode(spans, time.time_ns())
            if not data:
                return 0
            with self._lock:
                fd = self._pending_file()
                _write_all(fd, data)
                self._open_ids.update(span.context.span_id for span in spans if span.context is not None)
            return len(spans) - failed
        except Exception as exc:
            warn_once(
                "store.pending",
                f"mastrace: could not write the pending spans of the local store at {self.path}: {exc!r}; "
                "spans still show once they end",
            )
            return 0

    def _ended(self, spans: Sequence[ReadableSpan]) -> None:
        """Forget the pending spans among `spans`, which ended."""
        with self._lock:
            open_ids = self._open_ids
            for span in spans:
                ctx = span.context
                if ctx is not None:
                    open_ids.discard(ctx.span_id)

    def _pending_file(self) -> int:
        """The descriptor of this process's pending file, created (and held) on first use."""
        pid = os.getpid()
        if self._pending_fd is None or self._pending_pid != pid:
            # A forked child writes a file of its own; its parent's spans are not its own.
            self._open_ids = set()
            _own_folder(self.pending_dir)
            pending = self.pending_dir / f"{self._host}-{pid}-{time.time_ns()}{SEGMENT_SUFFIX}"
            self._pending_fd = os.open(pending, _OPEN_FLAGS, 0o644)
            hold(self._pending_fd)
            self._pending, self._pending_pid = pending, pid
        return self._pending_fd

    def _forget_pending(self) -> None:
        """In a forked child: close the parent's pending file (the child writes its own)."""
        fd, self._pending_fd, self._pending = self._pending_fd, None, None
        self._open_ids = set()
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _close_pending(self) -> None:
        """Close the pending file; delete it when none of its spans is still open."""
        fd, self._pending_fd = self._pending_fd, None
        if fd is None or self._pending_pid != os.getpid():
            return
        with contextlib.suppress(OSError):
            os.close(fd)
        if not self._open_ids and self._pending is not None:
            with contextlib.suppress(OSError):
                self._pending.unlink()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered in the process: every exported span is already in the kernel's hands."""
        return not self._closed

    def shutdown(self) -> None:
        """Close the current segment; later exports fail."""
        with self._lock:
            self._closed = True
            self._close_segment()
            self._close_pending()

    def _fail(self, count: int, stage: str, exc: BaseException) -> SpanExportResult:
        with self._lock:
            self.failed_spans += count
        warn_once(
            f"store.{stage}",
            f"mastrace: could not {stage} spans for the local store at {self.path}: {exc!r} "
            "(further failures are counted, not logged)",
        )
        return SpanExportResult.FAILURE

    def _append(self, batch: EncodedBatch) -> None:
        full = self._size >= self.max_segment_bytes
        if self._fd is None or self._fd_pid != os.getpid() or full or self._gone():
            # A forked child must not share its parent's segment: it gets one of its own.
            self._close_segment()
            self._open_segment()
            if full and self.retention is not None:
                self._apply_retention()
        assert self._fd is not None
        start_anew = False
        if batch.skeleton and self._skeleton_fd is not None:
            try:
                _write_all(self._skeleton_fd, batch.skeleton.replace(SKELETON_BASE, b"%d" % self._size))
            except OSError as exc:
                # Readers parse this segment's JSON instead; the next segment gets a new skeleton file.
                self._drop_skeleton()
                self._skeleton_failed(exc)
                start_anew = True
        try:
            self._size += _write_all(self._fd, batch.data)
        except _PartialWrite:
            # Part of a line may be on disk: start a fresh segment so that it stays the last line. Its
            # roots file may now miss a root span that did land, so readers must not rely on it. Its
            # skeleton stays right: readers drop the lines whose span line did not land.
            self._drop_roots()
            self._close_segment()
            raise
        if batch.roots and self._roots_fd is not None:
            try:
                _write_all(self._roots_fd, batch.roots)
            except OSError as exc:
                # The spans are stored; only the shortcut to their roots is lost for this segment.
                self._drop_roots()
                self._roots_failed(exc)
                start_anew = True
        if start_anew:
            self._close_segment()

    def _gone(self) -> bool:
        """Whether the current segment was removed or replaced (the store folder deleted, pruned or
        moved): appending to it would write into a file no reader sees. Warns once."""
        if self._fd is None or self._segment is None:
            return False
        try:
            on_disk = os.stat(self._segment)
        except OSError:
            pass
        else:
            if (on_disk.st_ino, on_disk.st_dev) == self._identity:
                return False
        warn_once(
            "store.gone",
            f"mastrace: the segment {self._segment.name} of the local store at {self.path} was removed or "
            "replaced (the folder deleted, pruned or moved); writing goes on in a new segment there",
        )
        return True

    def _apply_retention(self) -> None:
        """Remove the segments the retention setting lets go (on rotation); failures are warned once."""
        try:
            keep = frozenset({self._segment.name}) if self._segment is not None else frozenset()
            prune(self.path, self.retention, keep=keep, wait=False)  # type: ignore[arg-type]
        except Exception as exc:
            warn_once("store.retention", f"mastrace: could not apply retention to {self.path}: {exc!r}")

    def _open_segment(self) -> None:
        _own_folder(self.segments_dir)
        pid = os.getpid()
        self._seq += 1
        name = f"{self._host}-{pid}-{time.time_ns()}-{self._seq}{SEGMENT_SUFFIX}"
        # The roots file first: a reader that sees the segment also sees its roots file.
        self._open_roots(name)
        self._open_skeleton(name)
        segment = self.segments_dir / name
        try:
            self._fd = os.open(segment, _OPEN_FLAGS, 0o644)
        except OSError:
            self._drop_roots()
            self._drop_skeleton()
            raise
        hold(self._fd)  # `prune` (another process's retention, `mastrace prune`) leaves it alone
        self._fd_pid = pid
        self._segment = segment
        self._size = 0
        opened = os.fstat(self._fd)
        self._identity = (opened.st_ino, opened.st_dev)  # what `_gone` compares the file on disk with

    def _open_roots(self, name: str) -> None:
        roots = self.roots_dir / name
        try:
            self._roots_fd = _open_append(roots)
        except OSError as exc:
            # The segment is still written; without its roots file, readers scan it instead.
            self._roots_fd, self._roots = None, None
            self._roots_failed(exc)
        else:
            self._roots = roots

    def _open_skeleton(self, name: str) -> None:
        skeleton = self.skeleton_dir / (name[: -len(SEGMENT_SUFFIX)] + SKELETON_SUFFIX)
        try:
            self._skeleton_fd = _open_append(skeleton)
        except OSError as exc:
            # Without its skeleton file, readers parse the segment's JSON to draw a trace's tree.
            self._skeleton_fd, self._skeleton = None, None
            self._skeleton_failed(exc)
        else:
            self._skeleton = skeleton

    def _skeleton_failed(self, exc: OSError) -> None:
        self._side_file_failed("skeleton", exc, "`tree` and `view` parse them in full")

    def _roots_failed(self, exc: OSError) -> None:
        self._side_file_failed("roots", exc, "readers scan them all to find runs")

    def _side_file_failed(self, kind: str, exc: OSError, instead: str) -> None:
        """Warn once per kind that a file beside the segments could not be written."""
        warn_once(
            f"store.{kind}",
            f"mastrace: could not write a {kind} file of the local store at {self.path}: {exc!r}; "
            f"spans are still stored, and {instead}",
        )

    def _close_segment(self) -> None:
        fd, self._fd = self._fd, None
        roots_fd, self._roots_fd = self._roots_fd, None
        skeleton_fd, self._skeleton_fd = self._skeleton_fd, None
        for descriptor in (fd, roots_fd, skeleton_fd):
            if descriptor is not None:
                with contextlib.suppress(OSError):
                    os.close(descriptor)

    def _drop_roots(self) -> None:
        """Close and delete the current roots file: readers then scan its segment instead."""
        _discard(self._roots_fd, self._roots)
        self._roots_fd, self._roots = None, None

    def _drop_skeleton(self) -> None:
        """Close and delete the current skeleton file: readers then parse its segment instead."""
        _discard(self._skeleton_fd, self._skeleton)
        self._skeleton_fd, self._skeleton = None, None


def _open_append(path: Path) -> int:
    """A descriptor appending to the side file `path`, created (with its folder) if missing."""
    _own_folder(path.parent)
    return os.open(path, _OPEN_FLAGS, 0o644)


def _discard(fd: int | None, path: Path | None) -> None:
    """Close `fd` and delete `path`, each when there is one; errors are ignored."""
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink()


class _PartialWrite(OSError):
    """A write that failed after `lines` whole lines of its data were written."""

    def __init__(self, error: OSError, lines: int) -> None:
        super().__init__(error.errno, error.strerror)
        self.error = error
        self.lines = lines


def _write_all(fd: int, data: bytes) -> int:
    """Write all of `data` to `fd` (one `os.write` unless the kernel takes less); return its size.

    Raises:
        _PartialWrite: A write failed; it tells how many whole lines reached the file before.
    """
    view = memoryview(data)
    done = 0
    try:
        while view:
            written = os.write(fd, view)
            view = view[written:]
            done += written
    except OSError as exc:
        raise _PartialWrite(exc, data.count(b"\n", 0, done)) from exc
    return len(data)
