"""The export pipeline: one span processor that hands finished spans to per-destination workers.

Each destination (local store, OTLP, console, a custom exporter) has its own bounded queue and its
own thread, so a slow or dead one never slows the others or the caller. The caller's cost of
ending a span is one append per destination; scrubbing, capping and serialising run in the
destination's thread. Every span is counted exactly once as exported, dropped (queue full or
abandoned at shutdown) or failed (the exporter said so or raised); until then it is pending.
`force_flush()` reports those counts truthfully.

A destination whose exporter also takes the spans still open (`export_pending`, the local store)
is handed them on its own thread after each drain, once each: the caller's cost of starting a span
stays one dict insert (`Pipeline.on_start`). Those start records are not counted: a span counts once,
when it ends.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ..semconv import MASTRACE_EXPERIMENT_NAME as _EXPERIMENT_NAME
from ..semconv import MASTRACE_EXPERIMENT_REPETITION as _EXPERIMENT_REPETITION
from ..tracing._errors import log_internal_error, warn_once

Transform = Callable[[ReadableSpan], ReadableSpan]

_MAX_TRACKED_OPEN = 100_000


@dataclass(frozen=True)
class DestinationStats:
    """Delivery counts of one destination since `configure()`.

    `pending` counts spans queued or being exported right now; once a destination is idle,
    `exported + dropped + failed` is every span it was given.
    """

    name: str
    exported: int
    dropped: int
    failed: int
    pending: int


@dataclass(frozen=True)
class FlushResult:
    """What `mastrace.force_flush()` found: counts since `configure()`, summed over destinations.

    `complete` is False when the timeout passed before every destination had handled the spans
    queued before the call, or when spans have no destination at all (nothing records them). The
    result is truthy only when it is complete and nothing was ever dropped or failed.
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
    """A bounded queue and a worker thread in front of one `SpanExporter`.

    Args:
        name: The key of this destination in `FlushResult.destinations`.
        exporter: Receives batches on the worker thread.
        transform: Applied to each span on the worker thread before export (scrub, cap).
        max_queue: Spans queued before new ones are dropped and counted.
        batch_size: Largest batch handed to the exporter.
        interval: Seconds between exports. The worker also wakes early once a quarter of the
            queue is used, so a burst of spans is exported after it rather than competing with it
            for the interpreter, and the queue keeps room to spare.
        synchronous: Export on the caller's thread instead (tests and short scripts).
        prepare: Run first on the worker thread, before it waits for spans: whatever the first
            batch needs (the transform's imports, the scrubber's compiled rule table) is built
            while the application runs, not when the first span is exported. `ready` is set once
            it returned (or raised: the transform then builds on first use, as without it).
        warm_up: Run on the worker thread once it is prepared, with a function that says whether
            spans or a flush are waiting: the first-use work of the transform and the exporter
            (caches, a thread's scratch space), done on sample spans that reach no exporter and no
            count, so the first real export costs what a later one does. It gives way (returns
            early) as soon as real work waits, and is skipped when spans that ended during the
            preparation were exported first (that export did the first-use work). `warmed` is set
            once it returned, was skipped, or raised (a failed warm-up costs nothing but its log line).
    """

    def __init__(
        self,
        name: str,
        exporter: SpanExporter,
        transform: Transform | None = None,
        *,
        max_queue: int = 200_000,
        batch_size: int = 512,
        interval: float = 0.5,
        synchronous: bool = False,
        prepare: Callable[[], object] | None = None,
        warm_up: Callable[[Callable[[], bool]], object] | None = None,
    ) -> None:
        self.name = name
        self.exporter = exporter
        self.synchronous = synchronous
        # False for a side destination (GenAI metrics) that is not a place spans are delivered to:
        # left out of the counts, and of whether spans reach anywhere.
        self.counted = True
        self._transform = transform
        self._max_queue = max_queue
        self._batch_size = batch_size
        self._wake_at = min(max_queue, max(batch_size, max_queue // 4))
        self._interval = interval
        self._queue: deque[ReadableSpan | _Marker] = deque()
        self._wake = threading.Event()
        self._stopping = False
        # Counts change on the worker thread (exported, failed, in flight) and on callers' threads
        # (dropped, synchronous exports); the lock keeps every span counted exactly once.
        self._lock = threading.Lock()
        self._in_flight = 0
        self.exported = 0
        self.dropped = 0
        self.failed = 0
        self._thread: threading.Thread | None = None
        # Seconds of a shutdown this destination may take (None: all of it). A remote collector
        # that is down must not hold the process: what it did not take is counted, not waited for.
        self.exit_budget: float | None = None
        self._closer: threading.Thread | None = None
        self._prepare = prepare
        self.ready = threading.Event()
        if synchronous or prepare is None:
            self.ready.set()  # a synchronous destination prepares on first use, on the caller's thread
        self._warm_up = warm_up
        self.warmed = threading.Event()
        if synchronous or warm_up is None:
            self.warmed.set()  # nothing is warmed on the caller's thread
        # Set by `Pipeline` when the exporter takes open spans: the spans started and not yet ended.
        self.open_spans: Callable[[], list[Span]] | None = None
        self._shown: set[int] = set()  # open spans already handed to `export_pending`
        self._start_worker()

    def _start_worker(self) -> None:
        if not self.synchronous:
            self._thread = threading.Thread(
                target=self._run, name=f"mastrace-export-{self.name}", daemon=True
            )
            self._thread.start()

    def after_fork(self) -> None:
        """In a forked child: fresh locks, an empty queue (the parent exports its own spans), a new worker."""
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._queue = deque()
        self._stopping = False
        self._in_flight = 0
        self.exported = self.dropped = self.failed = 0
        self._shown = set()
        prepared = self.ready.is_set()  # what the parent built before the fork, the child has too
        self.ready = threading.Event()
        if prepared or self.synchronous or self._prepare is None:
            self.ready.set()
        # The caches the parent warmed are the child's too, but not its worker's scratch space.
        self.warmed = threading.Event()
        if self.synchronous or self._warm_up is None:
            self.warmed.set()
        self._start_worker()

    # -- caller side (hot path) -------------------------------------------------------------------
    def offer(self, span: ReadableSpan) -> None:
        """Queue a finished span; never blocks. A full queue drops the span and counts it."""
        if self.synchronous:
            self._export([span])
            return
        queue = self._queue
        n = len(queue)
        if n >= self._max_queue or self._stopping:
            with self._lock:
                self.dropped += 1
            return
        queue.append(span)
        if n + 1 >= self._wake_at and not self._wake.is_set():
            self._wake.set()

    def count_dropped(self, n: int) -> None:
        """Count `n` spans this destination will never get as dropped."""
        with self._lock:
            self.dropped += n

    # -- worker side ------------------------------------------------------------------------------
    def _run(self) -> None:
        # Waking twice per interval keeps every span's wait in the queue under one interval, even
        # when an export takes a while: what a SIGKILL can lose is what ended in the last interval.
        pause = self._interval / 2
        if not self.ready.is_set():
            self._run_prepare()
            handled = self.exported + self.failed
            self._drain()  # at once: spans that ended meanwhile wait no longer
            if self.exported + self.failed != handled:
                self.warmed.set()  # that export did the first-use work: the next one is not kept waiting
        if not self.warmed.is_set():
            self._run_warm_up()
        while True:
            self._wake.wait(pause)
            self._wake.clear()
            self._drain()
            if self.open_spans is not None:
                self._export_open()
            if self._stopping and not self._queue:
                return

    def _export_open(self) -> None:
        """Hand the exporter the spans open now that it has not had yet (their start records)."""
        try:
            source = self.open_spans
            export = getattr(self.exporter, "export_pending", None)
            if source is None or export is None:
                return
            shown, kept, fresh = self._shown, set(), []
            for span in source():
                ctx = span.get_span_context()
                span_id = ctx.span_id
                if span_id in shown or not ctx.trace_flags.sampled:
                    kept.add(span_id)
                elif span.end_time is None and (snapshot := _snapshot(span)) is not None:
                    fresh.append(snapshot)
                    kept.add(span_id)
            self._shown = kept  # what ended is forgotten: the set stays as small as what is open
            if fresh:
                export([self._transform(s) for s in fresh] if self._transform else fresh)
        except Exception as exc:  # start records are a courtesy: never let them stop the export
            log_internal_error(f"exporting open spans to {self.name}", exc)

    def _run_prepare(self) -> None:
        try:
            if self._prepare is not None:
                self._prepare()
        except Exception as exc:
            log_internal_error(f"preparing the export to {self.name}", exc)
        finally:
            self.ready.set()

    def _run_warm_up(self) -> None:
        try:
            if self._warm_up is not None:
                queue = self._queue
                self._warm_up(lambda: bool(queue))  # spans or a flush marker waiting: give way
        except Exception as exc:
            # Re-raised in mastrace's own tests (`MASTRACE_RAISE_INTERNAL`): the worker must export still.
            with contextlib.suppress(Exception):
                log_internal_error(f"warming up the export to {self.name}", exc)
        finally:
            self.warmed.set()

    def _drain(self) -> None:
        queue = self._queue
        while True:
            # Take up to a batch at a time and count it in flight with one lock, not one per span.
            n = min(len(queue), self._batch_size)
            if n == 0:
                return
            with self._lock:
                self._in_flight += n
            batch: list[ReadableSpan] = []
            for taken in range(n):
                try:
                    item = queue.popleft()
                except IndexError:  # `abandon()` emptied the queue meanwhile and counted the rest
                    with self._lock:
                        self._in_flight -= n - taken
                    break
                if type(item) is _Marker:
                    with self._lock:
                        self._in_flight -= 1
                    if batch:
                        self._export(batch)
                        batch = []
                    item.done.set()
                    continue
                batch.append(item)  # type: ignore[arg-type]
            if batch:
                self._export(batch)

    def _export(self, batch: list[ReadableSpan]) -> None:
        error: Exception | None = None
        n = len(batch)
        done = 0
        try:
            spans = [self._transform(s) for s in batch] if self._transform else batch
            counted = getattr(self.exporter, "export_counted", None)
            if counted is not None:  # an exporter that can say how many of the batch it kept
                done = min(n, max(0, int(counted(spans))))
            elif self.exporter.export(spans) is SpanExportResult.SUCCESS:
                done = n
        except Exception as exc:  # an exporter must not raise; count it and carry on
            error = exc
        ok = done == n
        with self._lock:
            if not self.synchronous:
                self._in_flight -= n
            self.exported += done
            self.failed += n - done
        if not ok:
            detail = f": {type(error).__name__}: {error}" if error else ""
            warn_once(
                f"export-failed-{self.name}",
                f"mastrace: exporting spans to {self.name} failed{detail}; further failures are "
                "counted and reported by force_flush(), not logged",
            )

    # -- control ----------------------------------------------------------------------------------
    def request_flush(self) -> _Marker | None:
        """Ask the worker to export everything queued so far; wait on the result with `wait()`."""
        if self.synchronous:
            return None
        if self._thread is None or not self._thread.is_alive():
            self._drain()
            return None
        if self.unprepared_and_idle():
            return None  # nothing to export: no need to wait for the preparation
        marker = _Marker()
        self._queue.append(marker)
        self._wake.set()
        return marker

    def unprepared_and_idle(self) -> bool:
        """Still preparing, with no span waiting: a process that made no span does not wait for it."""
        return not self.ready.is_set() and self.pending() == 0

    @staticmethod
    def wait(marker: _Marker | None, deadline: float) -> bool:
        """Wait for a flush requested with `request_flush()`; False when `deadline` passed first."""
        return marker is None or marker.done.wait(max(0.0, deadline - time.monotonic()))

    def flush(self, deadline: float) -> bool:
        """Wait until every span queued before this call is handled; False on timeout."""
        return self.wait(self.request_flush(), deadline)

    def stop(self) -> None:
        """Refuse new spans (they count as dropped) and let the worker exit once the queue is empty."""
        self._stopping = True
        self._wake.set()

    def join(self, deadline: float) -> bool:
        """Wait for the worker to exit; False when `deadline` passed first."""
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
            return not self._thread.is_alive()
        return True

    def abandon(self) -> None:
        """Count whatever is still queued as dropped: a dead destination must not hold up the process."""
        while True:
            try:
                item = self._queue.popleft()
            except IndexError:
                return
            if type(item) is _Marker:
                item.done.set()
            else:
                with self._lock:
                    self.dropped += 1

    def close_exporter(self) -> threading.Thread:
        """Shut the exporter down on a daemon thread (it may block); returns that thread. Once only."""
        if self._closer is not None:
            return self._closer
        closer = self._closer = threading.Thread(
            target=self._close_exporter, name=f"mastrace-close-{self.name}", daemon=True
        )
        closer.start()
        return closer

    def _close_exporter(self) -> None:
        try:
            self.exporter.shutdown()
        except Exception as exc:
            log_internal_error(f"shutdown of {self.name}", exc)

    def pending(self) -> int:
        """Spans queued or being exported right now."""
        queued = sum(1 for item in list(self._queue) if type(item) is not _Marker)
        return queued + self._in_flight

    def stats(self) -> DestinationStats:
        """The counts so far."""
        with self._lock:
            exported, dropped, failed = self.exported, self.dropped, self.failed
        return DestinationStats(self.name, exported, dropped, failed, self.pending())


def _snapshot(span: Span) -> ReadableSpan | None:
    """A copy of the open `span` as it is now, or None when its caller changed it meanwhile (the
    next flush tries again): the transform must not read values another thread is writing."""
    try:
        return ReadableSpan(
            name=span.name,
            context=span.context,
            parent=span.parent,
            resource=span.resource,
            attributes=dict(span.attributes or {}),
            events=tuple(span.events),
            links=tuple(span.links),
            kind=span.kind,
            status=span.status,
            start_time=span.start_time,
            end_time=None,
            instrumentation_scope=span.instrumentation_scope,
        )
    except RuntimeError:  # "changed size during iteration"
        return None


class Pipeline(SpanProcessor):
    """Fans finished spans out to destinations and remembers which spans are still open."""

    def __init__(self, destinations: Sequence[Destination], *, delivers: bool = True) -> None:
        self.destinations = tuple(destinations)
        # False when spans reach nowhere (no destination and no provider exporting them itself):
        # every result then says complete=False rather than pretending all was delivered.
        self.delivers = delivers
        self._open: dict[int, Span] = {}
        for destination in self.destinations:
            takes_open = getattr(destination.exporter, "export_pending", None) is not None
            if takes_open and not destination.synchronous:
                destination.open_spans = self.open_spans

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        open_spans = self._open
        if len(open_spans) < _MAX_TRACKED_OPEN:
            # Keyed by span id: the SDK hands on_end() a snapshot, not the object on_start() saw.
            open_spans[span.context.span_id] = span

    def on_end(self, span: ReadableSpan) -> None:
        ctx = span.context
        self._open.pop(ctx.span_id, None)
        if not ctx.trace_flags.sampled:
            return
        for destination in self.destinations:
            destination.offer(span)

    def note_lost(self, n: int = 1) -> None:
        """Count `n` spans that never reached this pipeline (lost inside mastrace) as dropped everywhere."""
        for destination in self.destinations:
            if destination.counted:
                destination.count_dropped(n)

    def open_spans(self) -> list[Span]:
        """Spans started but not yet ended."""
        return list(self._open.values())

    def adopt_open_spans(self, previous: Pipeline) -> None:
        """Track the spans `previous` saw start, so they end (and are exported) through this pipeline."""
        self._open.update(previous._open)

    def before_fork(self, timeout: float) -> None:
        """Let the export threads finish preparing and warming up (at most `timeout` seconds): a
        thread that is importing, compiling or filling a cache when the process forks would leave the
        child its locks, held forever (the child's export would wait on them to the end)."""
        deadline = time.monotonic() + timeout
        for destination in self.destinations:
            destination.ready.wait(max(0.0, deadline - time.monotonic()))
            destination.warmed.wait(max(0.0, deadline - time.monotonic()))

    def after_fork(self) -> None:
        """In a forked child: restart every destination's worker; spans open in the parent are not ours."""
        self._open = {}
        for destination in self.destinations:
            destination.after_fork()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.flush(timeout_millis / 1000).complete

    def flush(self, timeout: float) -> FlushResult:
        """Flush every destination at once, waiting at most `timeout` seconds in all."""
        return self.result(self._flush_all(time.monotonic() + timeout))

    def _flush_all(self, deadline: float) -> bool:
        # Ask every worker first, then wait: a dead destination must not eat the others' time.
        markers = [(d, d.request_flush()) for d in self.destinations]
        return all([d.wait(marker, deadline) for d, marker in markers])

    def result(self, complete: bool = True) -> FlushResult:
        """The counts so far, per destination and summed."""
        stats = {d.name: d.stats() for d in self.destinations if d.counted}
        return FlushResult(
            exported=sum(s.exported for s in stats.values()),
            dropped=sum(s.dropped for s in stats.values()),
            failed=sum(s.failed for s in stats.values()),
            pending=sum(s.pending for s in stats.values()),
            complete=complete and self.delivers,
            destinations=stats,
        )

    def shutdown(self, timeout: float = 5.0) -> FlushResult:  # type: ignore[override]
        """Flush, stop every worker and shut every exporter down, returning within `timeout` seconds.

        What a destination could not export in time is counted as dropped.
        """
        deadline = time.monotonic() + timeout
        markers = [(d, d.request_flush()) for d in self.destinations]
        # A remote destination's budget is the collector's time: it starts once the export thread is
        # prepared (scrubber built), so a slow start of this process never cuts a live collector off.
        for d, marker in markers:
            if d.exit_budget is not None and marker is not None:
                d.ready.wait(max(0.0, deadline - time.monotonic()))
        now = time.monotonic()
        budgeted = [
            (d, m, min(deadline, now + d.exit_budget)) for d, m in markers if d.exit_budget is not None
        ]
        complete = True
        for d, marker, own in budgeted:  # the remote ones first: each is cut short at its own budget
            if not d.wait(marker, own):
                complete = False
                d.stop()
                d.close_exporter()  # interrupts an exporter stuck retrying
        complete = all([d.wait(m, deadline) for d, m in markers if d.exit_budget is None]) and complete
        for d in self.destinations:
            d.stop()
        joined = [
            d.unprepared_and_idle()  # its worker ends once prepared; exit need not wait for that
            or d.join(deadline if d.exit_budget is None else min(deadline, now + d.exit_budget + 0.1))
            for d in self.destinations
        ]
        complete = all(joined) and complete
        for d in self.destinations:
            d.abandon()
        # Shutting an exporter down also interrupts one stuck retrying (the OTLP exporters).
        closers = [d.close_exporter() for d in self.destinations]
        for closer in closers:
            closer.join(max(0.0, deadline - time.monotonic()))
        complete = complete and not any(c.is_alive() for c in closers)
        return self.result(complete)


class SwitchProcessor(SpanProcessor):
    """Registered once on a TracerProvider; forwards to whichever pipeline is configured now."""

    def __init__(self) -> None:
        self.pipeline: Pipeline | None = None
        self.experiment: str | None = None  # `configure(experiment=...)`: put on every root span
        self.repetition: int | None = None  # `configure(repetition=...)`: likewise

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pipeline = self.pipeline
        if pipeline is not None:
            pipeline.on_start(span, parent_context)
        experiment, repetition = self.experiment, self.repetition
        if (experiment is not None or repetition is not None) and span.parent is None:
            attributes = span.attributes
            if experiment is not None and (attributes is None or _EXPERIMENT_NAME not in attributes):
                span.set_attribute(_EXPERIMENT_NAME, experiment)
            if repetition is not None and (attributes is None or _EXPERIMENT_REPETITION not in attributes):
                span.set_attribute(_EXPERIMENT_REPETITION, repetition)

    def on_end(self, span: ReadableSpan) -> None:
        pipeline = self.pipeline
        if pipeline is not None:
            pipeline.on_end(span)

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        pipeline = self.pipeline
        return pipeline.force_flush(timeout_millis) if pipeline is not None else True
