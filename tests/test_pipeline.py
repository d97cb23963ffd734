"""The export pipeline: bounded per-destination queues, truthful counts, isolation and bounded shutdown."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from mastrace.pipeline._pipeline import Destination, DestinationStats, FlushResult, Pipeline, SwitchProcessor

WAIT = 30.0  # generous upper bound for things that should happen at once; never a speed requirement


class BlockingExporter(SpanExporter):
    """Blocks inside `export()` until released; counts what it was given."""

    def __init__(self, *, release_on_shutdown: bool = True) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.received = 0
        self._release_on_shutdown = release_on_shutdown

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        self.release.wait()
        self.received += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        if self._release_on_shutdown:
            self.release.set()


class FailingExporter(SpanExporter):
    """Fails every batch, either by result or by raising."""

    def __init__(self, *, raise_error: bool = False) -> None:
        self.raise_error = raise_error

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.raise_error:
            raise ConnectionError("collector unreachable")
        return SpanExportResult.FAILURE


def make_spans(n: int, name: str = "s") -> list[ReadableSpan]:
    tracer = TracerProvider().get_tracer("test")
    spans = []
    for i in range(n):
        span = tracer.start_span(f"{name}-{i}")
        span.end()
        spans.append(span)
    return spans  # type: ignore[return-value]


def accounted(dest: Destination) -> int:
    s = dest.stats()
    return s.exported + s.dropped + s.failed + s.pending


@pytest.fixture
def blocked() -> Iterator[BlockingExporter]:
    exporter = BlockingExporter()
    yield exporter
    exporter.release.set()


def test_blocked_exporter_never_blocks_the_caller(blocked: BlockingExporter) -> None:
    """Offering spans to a destination whose exporter is stuck returns at once for every span."""
    dest = Destination("slow", blocked, max_queue=10, batch_size=4, interval=0.01)
    dest.offer(make_spans(1)[0])
    assert blocked.entered.wait(WAIT)
    spans = make_spans(500)
    caller = threading.Thread(target=lambda: [dest.offer(s) for s in spans])
    caller.start()
    caller.join(WAIT)
    assert not caller.is_alive()
    assert not blocked.release.is_set()


def test_full_queue_drops_and_counts_every_span(blocked: BlockingExporter) -> None:
    """Beyond `max_queue` spans are dropped and counted; the counts account for every span offered."""
    dest = Destination("slow", blocked, max_queue=10, batch_size=4, interval=0.01)
    dest.offer(make_spans(1)[0])
    assert blocked.entered.wait(WAIT)
    for span in make_spans(100):
        dest.offer(span)
    stats = dest.stats()
    assert (stats.exported, stats.dropped, stats.failed, stats.pending) == (0, 90, 0, 11)
    blocked.release.set()
    assert dest.flush(time.monotonic() + WAIT)
    stats = dest.stats()
    assert (stats.exported, stats.dropped, stats.pending) == (11, 90, 0)
    assert blocked.received == 11


def test_counts_add_up_with_many_caller_threads(blocked: BlockingExporter) -> None:
    """With several threads offering at once, exported + dropped + failed + pending is every span."""
    dest = Destination("slow", blocked, max_queue=50, batch_size=8, interval=0.01)
    batches = [make_spans(200) for _ in range(4)]
    threads = [threading.Thread(target=lambda b=b: [dest.offer(s) for s in b]) for b in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert accounted(dest) == 800
    blocked.release.set()
    assert dest.flush(time.monotonic() + WAIT)
    stats = dest.stats()
    assert stats.pending == 0 and stats.exported + stats.dropped == 800 and stats.dropped > 0


def test_failed_exports_are_counted() -> None:
    """A FAILURE result counts every span of the batch as failed."""
    dest = Destination("bad", FailingExporter(), interval=0.01)
    for span in make_spans(7):
        dest.offer(span)
    assert dest.flush(time.monotonic() + WAIT)
    assert (dest.stats().failed, dest.stats().exported) == (7, 0)


def test_exporter_exception_is_counted_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    """An exporter that raises never escapes; its spans count as failed and one warning is logged."""
    dest = Destination("raising", FailingExporter(raise_error=True), batch_size=2, synchronous=True)
    with caplog.at_level(logging.WARNING, logger="mastrace"):
        for span in make_spans(5):
            dest.offer(span)
    assert dest.stats().failed == 5
    messages = [r.getMessage() for r in caplog.records if "raising" in r.getMessage()]
    assert len(messages) == 1 and "ConnectionError" in messages[0]


def test_transform_runs_before_export() -> None:
    """The destination's transform sees each span and the exporter receives its result."""
    memory = InMemorySpanExporter()
    seen: list[str] = []

    def transform(span: ReadableSpan) -> ReadableSpan:
        seen.append(span.name)
        return span

    dest = Destination("memory", memory, transform, interval=0.01)
    for span in make_spans(3):
        dest.offer(span)
    assert dest.flush(time.monotonic() + WAIT)
    assert seen == ["s-0", "s-1", "s-2"] == [s.name for s in memory.get_finished_spans()]


def test_slow_destination_never_slows_another(blocked: BlockingExporter) -> None:
    """While one destination is stuck, another exports everything it was given."""
    memory = InMemorySpanExporter()
    slow = Destination("slow", blocked, interval=0.01)
    fast = Destination("fast", memory, interval=0.01)
    pipeline = Pipeline([slow, fast])
    for span in make_spans(50):
        pipeline.on_end(span)
    assert fast.flush(time.monotonic() + WAIT)
    assert len(memory.get_finished_spans()) == 50
    assert not blocked.release.is_set()
    assert slow.stats().pending == 50


def test_flush_reports_incomplete_when_a_destination_is_stuck(blocked: BlockingExporter) -> None:
    """A flush that times out on a stuck destination is incomplete and still reports the other's counts."""
    memory = InMemorySpanExporter()
    pipeline = Pipeline(
        [Destination("slow", blocked, interval=0.01), Destination("fast", memory, interval=0.01)]
    )
    for span in make_spans(20):
        pipeline.on_end(span)
    assert blocked.entered.wait(WAIT)
    pipeline.destinations[1].flush(time.monotonic() + WAIT)
    result = pipeline.flush(timeout=0.2)
    assert not result.complete and not result
    assert result.destinations["fast"].exported == 20
    assert result.destinations["slow"].pending == 20


def test_shutdown_returns_within_its_bound_when_an_exporter_hangs() -> None:
    """Shutdown gives up on an exporter that never returns, within the timeout, and counts the rest."""
    stuck = BlockingExporter(release_on_shutdown=False)
    memory = InMemorySpanExporter()
    pipeline = Pipeline(
        [
            Destination("stuck", stuck, batch_size=4, interval=0.01),
            Destination("memory", memory, interval=0.01),
        ]
    )
    pipeline.on_end(make_spans(1)[0])
    assert stuck.entered.wait(WAIT)
    for span in make_spans(30):
        pipeline.on_end(span)
    bound = 1.0
    started = time.monotonic()
    result = pipeline.shutdown(timeout=bound)
    elapsed = time.monotonic() - started
    stuck.release.set()
    assert elapsed < bound + 2.0
    assert not result.complete
    assert result.destinations["memory"].exported == 31
    s = result.destinations["stuck"]
    assert (s.exported, s.dropped, s.pending) == (0, 30, 1)


def test_shutdown_exports_everything_queued() -> None:
    """A clean shutdown exports every queued span and shuts the exporter down."""
    memory = InMemorySpanExporter()
    pipeline = Pipeline([Destination("memory", memory, interval=60)])
    for span in make_spans(10):
        pipeline.on_end(span)
    result = pipeline.shutdown(timeout=WAIT)
    assert result.ok and result.exported == 10
    assert memory.export(make_spans(1)) is SpanExportResult.FAILURE  # shut down


def test_spans_offered_after_shutdown_count_as_dropped() -> None:
    """A span that ends after its destination stopped is dropped and counted, not lost silently."""
    dest = Destination("memory", InMemorySpanExporter(), interval=0.01)
    dest.stop()
    dest.offer(make_spans(1)[0])
    assert dest.stats().dropped == 1


def test_pipeline_tracks_open_spans() -> None:
    """Spans are listed as open from start to end."""
    provider = TracerProvider()
    pipeline = Pipeline([])
    provider.add_span_processor(pipeline)
    span = provider.get_tracer("t").start_span("open")
    assert pipeline.open_spans() == [span]
    span.end()
    assert pipeline.open_spans() == []


def test_unsampled_spans_are_not_exported() -> None:
    """A span the sampler dropped never reaches a destination."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(Pipeline([Destination("m", memory, synchronous=True)]))
    provider.get_tracer("t").start_span("dropped").end()
    assert memory.get_finished_spans() == ()


def test_switch_processor_forwards_to_the_current_pipeline() -> None:
    """The switch feeds whichever pipeline is set, and nothing when none is."""
    memory = InMemorySpanExporter()
    switch = SwitchProcessor()
    provider = TracerProvider()
    provider.add_span_processor(switch)
    tracer = provider.get_tracer("t")
    tracer.start_span("before").end()
    switch.pipeline = Pipeline([Destination("m", memory, synchronous=True)])
    tracer.start_span("during").end()
    assert [s.name for s in memory.get_finished_spans()] == ["during"]
    assert switch.force_flush()


def test_flush_result_is_truthy_only_when_complete_and_lossless() -> None:
    """FlushResult is truthy when complete with nothing dropped or failed."""
    assert FlushResult(exported=3)
    assert not FlushResult(exported=3, failed=1)
    assert not FlushResult(exported=3, dropped=1)
    assert not FlushResult(exported=3, complete=False)


def test_the_warm_up_runs_on_the_worker_once_prepared_and_exports_nothing() -> None:
    """`warm_up` runs on the export thread after `prepare`, before `warmed` is set; it reaches neither the
    exporter nor any count, and the spans that follow are exported exactly once."""
    memory = InMemorySpanExporter()
    order: list[tuple[str, str]] = []

    def prepare() -> None:
        order.append(("prepare", threading.current_thread().name))

    def warm_up(busy: Callable[[], bool]) -> None:
        order.append(("warm_up", threading.current_thread().name))
        assert not busy()

    dest = Destination("memory", memory, prepare=prepare, warm_up=warm_up, interval=0.01)
    assert dest.warmed.wait(WAIT)
    assert order == [("prepare", "mastrace-export-memory"), ("warm_up", "mastrace-export-memory")]
    assert memory.get_finished_spans() == ()
    assert accounted(dest) == 0
    for span in make_spans(2):
        dest.offer(span)
    assert dest.flush(time.monotonic() + WAIT)
    assert [s.name for s in memory.get_finished_spans()] == ["s-0", "s-1"]
    assert dest.stats() == DestinationStats("memory", 2, 0, 0, 0)


def test_a_fork_waits_for_the_warm_up_to_end() -> None:
    """`before_fork` waits for a warm-up under way (it may hold a cache's lock, which a forked child
    would keep held forever), and returns once it ended."""
    release, started = threading.Event(), threading.Event()

    def warm_up(busy: Callable[[], bool]) -> None:
        started.set()
        release.wait(WAIT)

    dest = Destination("memory", InMemorySpanExporter(), prepare=lambda: None, warm_up=warm_up, interval=0.01)
    pipeline = Pipeline([dest])
    assert started.wait(WAIT)
    returned = threading.Event()
    waiter = threading.Thread(target=lambda: (pipeline.before_fork(WAIT), returned.set()))
    waiter.start()
    assert not returned.wait(0.2)  # still warming up: the fork waits
    release.set()
    waiter.join(WAIT)
    assert returned.is_set() and dest.warmed.is_set()
    pipeline.shutdown(timeout=WAIT)


def test_spans_that_ended_while_preparing_are_exported_and_the_warm_up_skipped() -> None:
    """A flush that came while the export thread was preparing waits for that only: the spans are exported at
    once (doing the first-use work), and no warm-up runs after them to hold up the next flush."""
    memory = InMemorySpanExporter()
    release = threading.Event()
    warmed_up: list[str] = []
    dest = Destination(
        "memory",
        memory,
        prepare=lambda: release.wait(WAIT),
        warm_up=lambda busy: warmed_up.append("warm"),
        interval=60,
    )
    for span in make_spans(3):
        dest.offer(span)
    marker = dest.request_flush()
    release.set()
    assert dest.wait(marker, time.monotonic() + WAIT)
    assert dest.warmed.wait(WAIT)
    assert warmed_up == []
    assert dest.stats().exported == 3


def test_the_warm_up_gives_way_to_waiting_spans() -> None:
    """The warm-up is told when a span (or a flush) waits, so it can stop early; the span is then exported."""
    memory = InMemorySpanExporter()
    entered, offered = threading.Event(), threading.Event()
    seen: list[bool] = []

    def warm_up(busy: Callable[[], bool]) -> None:
        seen.append(busy())
        entered.set()
        offered.wait(WAIT)
        seen.append(busy())

    dest = Destination("memory", memory, prepare=lambda: None, warm_up=warm_up, interval=60)
    assert entered.wait(WAIT)
    dest.offer(make_spans(1)[0])
    offered.set()
    assert dest.flush(time.monotonic() + WAIT)
    assert seen == [False, True]
    assert dest.stats() == DestinationStats("memory", 1, 0, 0, 0)


def test_a_failing_warm_up_costs_nothing_but_itself() -> None:
    """A warm-up that raises leaves `warmed` set and the destination exporting every span (the error is
    logged, never raised into the worker, even when internal errors are re-raised)."""
    memory = InMemorySpanExporter()

    def warm_up(busy: Callable[[], bool]) -> None:
        raise RuntimeError("warm-up broke")

    dest = Destination("memory", memory, prepare=lambda: None, warm_up=warm_up, interval=0.01)
    assert dest.warmed.wait(WAIT)
    for span in make_spans(2):
        dest.offer(span)
    assert dest.flush(time.monotonic() + WAIT)
    assert dest.stats() == DestinationStats("memory", 2, 0, 0, 0)


def test_a_synchronous_destination_never_warms_up_on_the_caller_thread() -> None:
    calls: list[str] = []
    dest = Destination(
        "m", InMemorySpanExporter(), warm_up=lambda busy: calls.append("warm"), synchronous=True
    )
    assert dest.warmed.is_set()
    dest.offer(make_spans(1)[0])
    assert calls == []
