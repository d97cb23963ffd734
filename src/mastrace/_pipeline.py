"""The export pipeline: one span processor that hands finished spans to per-destination workers.

Each destination (local store, OTLP, console, a custom exporter) has its own bounded queue and its
own thread, so a slow or dead one never slows the others or the caller. The caller's cost of
ending a span is one append per destination; scrubbing, capping and serialising run in the
destination's thread. Every span is counted exactly once as exported, dropped (queue full) or
failed (the exporter said so or raised), and `force_flush()` reports those counts truthfully.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ._errors import log_internal_error, warn_once

Transform = Callable[[ReadableSpan], ReadableSpan]

_MAX_TRACKED_OPEN = 100_000


@dataclass(frozen=True)
class DestinationStats:
    """Delivery counts of one destination since `configure()`."""

    name: str
    exported: int
    dropped: int
    failed: int
    pending: int


@dataclass(frozen=True)
class FlushResult:
    """What `mastrace.force_flush()` found: counts since `configure()`, summed over destinations.

    `complete` is False when the timeout passed before every destination had handled the spans
    queued before the call. The result is truthy only when it is complete and nothing was ever
    dropped or failed.
    """

    exported: int = 0
    dropped: int = 0
    failed: int = 0
    pending: int = 0
    complete: bool = True
    destinations: dict[str, DestinationStats] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when complete and no span was dropped or failed."""
        return self.complete and self.dropped == 0 and self.failed == 0

    def __bool__(self) -> bool:
        return self.ok


class _Marker:
    """Placed in a queue by a flush; the worker sets it once everything before it is handled."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


class Destination:
    """A bounded queue and a worker thread in front of one `SpanExporter`."""

    def __init__(self, name: str, exporter: SpanExporter, transform: Transform | None = None, *,
                 max_queue: int = 200_000, batch_size: int = 512, interval: float = 0.5,
                 synchronous: bool = False) -> None:
        self.name = name
        self.exporter = exporter
        self._transform = transform
        self._max_queue = max_queue
        self._batch_size = batch_size
        self._interval = interval
        self._queue: deque[ReadableSpan | _Marker] = deque()
        self._wake = threading.Event()
        self._stopping = False
        self._lock = threading.Lock()
        self.exported = 0
        self.dropped = 0
        self.failed = 0
        self.synchronous = synchronous
        self._thread: threading.Thread | None = None
        if not synchronous:
            self._thread = threading.Thread(target=self._run, name=f"mastrace-export-{name}", daemon=True)
            self._thread.start()

    # -- caller side (hot path) -------------------------------------------------------------------
    def offer(self, span: ReadableSpan) -> None:
        if self.synchronous:
            self._export([span])
            return
        queue = self._queue
        n = len(queue)
        if n >= self._max_queue or self._stopping:
            self.dropped += 1
            return
        queue.append(span)
        if n + 1 == self._batch_size:
            self._wake.set()

    # -- worker side ------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            self._wake.wait(self._interval)
            self._wake.clear()
            self._drain()
            if self._stopping and not self._queue:
                return

    def _drain(self) -> None:
        queue = self._queue
        batch: list[ReadableSpan] = []
        while queue:
            item = queue.popleft()
            if isinstance(item, _Marker):
                if batch:
                    self._export(batch)
                    batch = []
                item.done.set()
                continue
            batch.append(item)
            if len(batch) >= self._batch_size:
                self._export(batch)
                batch = []
        if batch:
            self._export(batch)

    def _export(self, batch: list[ReadableSpan]) -> None:
        try:
            spans = [self._transform(s) for s in batch] if self._transform else batch
            result = self.exporter.export(spans)
        except Exception as exc:  # an exporter must not raise; count it and carry on
            self._failed(len(batch), exc)
            return
        if result is SpanExportResult.SUCCESS:
            self.exported += len(batch)
        else:
            self._failed(len(batch), None)

    def _failed(self, n: int, exc: Exception | None) -> None:
        self.failed += n
        detail = f": {type(exc).__name__}: {exc}" if exc else ""
        warn_once(f"export-failed-{self.name}",
                  f"mastrace: exporting spans to {self.name} failed{detail}; further failures are counted "
                  "and reported by force_flush(), not logged")

    # -- control ----------------------------------------------------------------------------------
    def flush(self, deadline: float) -> bool:
        """Wait until every span queued before this call is handled; False on timeout."""
        if self.synchronous or self._thread is None or not self._thread.is_alive():
            if not self.synchronous:
                self._drain()
            return True
        marker = _Marker()
        self._queue.append(marker)
        self._wake.set()
        return marker.done.wait(max(0.0, deadline - time.monotonic()))

    def pending(self) -> int:
        return sum(1 for item in list(self._queue) if not isinstance(item, _Marker))

    def stats(self) -> DestinationStats:
        return DestinationStats(self.name, self.exported, self.dropped, self.failed, self.pending())

    def shutdown(self, deadline: float) -> bool:
        """Flush, stop the worker and shut the exporter down, all before `deadline`."""
        done = self.flush(deadline)
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
            done = done and not self._thread.is_alive()
        if not done:
            # Abandon what is left: a dead destination must not hold up the process.
            left = self.pending()
            self._queue.clear()
            self.dropped += left
            return False
        closer = threading.Thread(target=self._close_exporter, daemon=True)
        closer.start()
        closer.join(max(0.0, deadline - time.monotonic()))
        return not closer.is_alive()

    def _close_exporter(self) -> None:
        try:
            self.exporter.shutdown()
        except Exception as exc:
            log_internal_error(f"shutdown of {self.name}", exc)


class Pipeline(SpanProcessor):
    """Fans finished spans out to destinations and remembers which spans are still open."""

    def __init__(self, destinations: Sequence[Destination]) -> None:
        self.destinations = tuple(destinations)
        self._open: dict[int, Span] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        open_spans = self._open
        if len(open_spans) < _MAX_TRACKED_OPEN:
            open_spans[id(span)] = span

    def on_end(self, span: ReadableSpan) -> None:
        self._open.pop(id(span), None)
        if not span.context.trace_flags.sampled:
            return
        for destination in self.destinations:
            destination.offer(span)

    def open_spans(self) -> list[Span]:
        """Spans started but not yet ended."""
        return list(self._open.values())

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.flush(timeout_millis / 1000).complete

    def flush(self, timeout: float) -> FlushResult:
        deadline = time.monotonic() + timeout
        complete = all([d.flush(deadline) for d in self.destinations])
        return self.result(complete)

    def result(self, complete: bool = True) -> FlushResult:
        stats = {d.name: d.stats() for d in self.destinations}
        return FlushResult(
            exported=sum(s.exported for s in stats.values()),
            dropped=sum(s.dropped for s in stats.values()),
            failed=sum(s.failed for s in stats.values()),
            pending=sum(s.pending for s in stats.values()),
            complete=complete,
            destinations=stats,
        )

    def shutdown(self, timeout: float = 5.0) -> FlushResult:  # type: ignore[override]
        deadline = time.monotonic() + timeout
        complete = all([d.shutdown(deadline) for d in self.destinations])
        return self.result(complete)


class SwitchProcessor(SpanProcessor):
    """Registered once on a TracerProvider; forwards to whichever pipeline is configured now."""

    def __init__(self) -> None:
        self.pipeline: Pipeline | None = None

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pipeline = self.pipeline
        if pipeline is not None:
            pipeline.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        pipeline = self.pipeline
        if pipeline is not None:
            pipeline.on_end(span)

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        pipeline = self.pipeline
        return pipeline.force_flush(timeout_millis) if pipeline is not None else True
