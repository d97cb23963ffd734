"""`LocalStoreExporter`: append finished spans to the local store.

Every process writes its own segment files, so any number of processes can write to one store at
once without a lock between them:

    <store>/segments/<hostname>-<pid>-<unix_ns>-<seq>.ndjson

Each `export()` call encodes its whole batch first and hands it to the kernel in a single
`os.write` on a file opened with `O_APPEND`. Nothing is buffered in the process, so a writer that
is killed loses only the spans it had not yet been given; at worst the last line of its segment is
torn, and readers skip that line. A segment is closed and a new one started once it passes
`max_segment_bytes`, or after a failed write (so that nothing is ever appended after a torn line).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .._errors import warn_once
from ..exceptions import StoreError
from ._rows import RowEncoder
from ._schema import SEGMENT_SUFFIX, SEGMENTS_DIR

__all__ = ["DEFAULT_SEGMENT_BYTES", "LocalStoreExporter"]

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)


def _safe_hostname() -> str:
    name = socket.gethostname() or "host"
    return "".join(c if c.isalnum() or c in "._" else "_" for c in name)


class LocalStoreExporter(SpanExporter):
    """Writes spans to a local store folder that DuckDB reads as the `records` table.

    Args:
        path: The store folder (created if missing). Segments go in its `segments/` subfolder.
        max_segment_bytes: Size after which the current segment is closed and a new one started.

    Attributes:
        exported_spans: Spans written so far.
        failed_spans: Spans that could not be encoded or written (each failure cause is logged once).

    Raises:
        StoreError: The store folder cannot be created or written.

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
        self, path: str | os.PathLike[str], *, max_segment_bytes: int = DEFAULT_SEGMENT_BYTES
    ) -> None:
        self.path = Path(path)
        self.segments_dir = self.path / SEGMENTS_DIR
        self.max_segment_bytes = max_segment_bytes
        self.exported_spans = 0
        self.failed_spans = 0
        self._encoder = RowEncoder()
        self._lock = threading.Lock()
        self._host = _safe_hostname()
        self._fd: int | None = None
        self._fd_pid = 0
        self._segment: Path | None = None
        self._size = 0
        self._seq = 0
        self._closed = False
        # Opening now means a reader sees this writer's (empty) segment before the first span, and
        # an unusable path fails here rather than on the export thread.
        try:
            with self._lock:
                self._open_segment()
        except OSError as exc:
            raise StoreError(f"cannot write the local store at {self.path}: {exc}") from exc

    @property
    def segment(self) -> Path | None:
        """The segment file currently appended to."""
        return self._segment

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Append `spans` to the current segment; never raises."""
        if self._closed:
            return SpanExportResult.FAILURE
        try:
            data, unencodable = self._encoder.encode(spans, time.time_ns())
        except Exception as exc:
            return self._fail(len(spans), "encode", exc)
        if unencodable:
            self._fail(unencodable, "encode", ValueError(f"{unencodable} malformed span(s)"))
        if data:
            try:
                with self._lock:
                    self._append(data)
                    self.exported_spans += len(spans) - unencodable
            except Exception as exc:
                return self._fail(len(spans) - unencodable, "write", exc)
        return SpanExportResult.FAILURE if unencodable else SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered in the process: every exported span is already in the kernel's hands."""
        return not self._closed

    def shutdown(self) -> None:
        """Close the current segment; later exports fail."""
        with self._lock:
            self._closed = True
            self._close_segment()

    def _fail(self, count: int, stage: str, exc: BaseException) -> SpanExportResult:
        with self._lock:
            self.failed_spans += count
        warn_once(
            f"store.{stage}",
            f"mastrace: could not {stage} spans for the local store at {self.path}: {exc!r} "
            "(further failures are counted, not logged)",
        )
        return SpanExportResult.FAILURE

    def _append(self, data: bytes) -> None:
        if self._fd is None or self._fd_pid != os.getpid() or self._size >= self.max_segment_bytes:
            # A forked child must not share its parent's segment: it gets one of its own.
            self._close_segment()
            self._open_segment()
        assert self._fd is not None
        view = memoryview(data)
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
                self._size += written
        except OSError:
            # Part of a line may be on disk: start a fresh segment so that it stays the last line.
            self._close_segment()
            raise

    def _open_segment(self) -> None:
        self.segments_dir.mkdir(parents=True, exist_ok=True)
        pid = os.getpid()
        self._seq += 1
        name = f"{self._host}-{pid}-{time.time_ns()}-{self._seq}{SEGMENT_SUFFIX}"
        segment = self.segments_dir / name
        self._fd = os.open(segment, _OPEN_FLAGS, 0o644)
        self._fd_pid = pid
        self._segment = segment
        self._size = 0

    def _close_segment(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
