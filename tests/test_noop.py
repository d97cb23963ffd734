"""The no-op path: before `configure()`, after `shutdown()`, and with MASTRACE_DISABLED=1."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncGenerator, Generator, Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import mastrace
from mastrace.tracing._tracer import NOOP_SPAN

tracer = mastrace.get_tracer()


@mastrace.instrument("sync.{x}")
def double(x: int) -> int:
    return 2 * x


@mastrace.instrument("async.{x}", record_return=True)
async def triple(x: int) -> int:
    await asyncio.sleep(0)
    return 3 * x


@mastrace.instrument("gen.{n}")
def count(n: int) -> Generator[int, None, None]:
    yield from range(n)


@mastrace.instrument("agen.{n}")
async def acount(n: int) -> AsyncGenerator[int, None]:
    for i in range(n):
        yield i


async def _collect(agen: AsyncGenerator[int, None]) -> list[int]:
    return [x async for x in agen]


@pytest.fixture(params=["unconfigured", "disabled", "shut_down"])
def noop_exporter(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[InMemorySpanExporter]:
    """An exporter that would receive spans if mastrace were not a no-op in the given situation."""
    exporter = InMemorySpanExporter()
    if request.param == "disabled":
        monkeypatch.setenv("MASTRACE_DISABLED", "1")
        mastrace.configure(local=False, exporters=[exporter], synchronous=True)
    elif request.param == "shut_down":
        mastrace.configure(local=False, exporters=[InMemorySpanExporter()], synchronous=True)
        mastrace.shutdown()
    yield exporter
    assert exporter.get_finished_spans() == ()


def test_not_configured(noop_exporter: InMemorySpanExporter) -> None:
    """`is_configured()` is False on the no-op path."""
    assert not mastrace.is_configured()


def test_span_is_the_noop_singleton(noop_exporter: InMemorySpanExporter) -> None:
    """`tracer.span` returns the one NoOpSpan for every name, and it works as a context manager."""
    first, second = tracer.span("a", attributes={"k": 1}), mastrace.get_tracer("other").span("b")
    assert first is NOOP_SPAN and second is NOOP_SPAN
    assert isinstance(first, mastrace.NoOpSpan)
    with first as span:
        span.set_attribute("k", {"v"})
        span.set_attributes({"a": 1})
        span.add_event("e")
        span.record_exception(ValueError("x"))
        span.set_status("error", "d")
        assert (span.span_context, span.otel_span, span.is_recording(), span.name) == (None, None, False, "")
        assert trace.get_current_span() is trace.INVALID_SPAN


def test_async_with_noop_span(noop_exporter: InMemorySpanExporter) -> None:
    """The NoOpSpan works with `async with`."""

    async def main() -> str:
        async with tracer.span("a"):
            return "ran"

    assert asyncio.run(main()) == "ran"


def test_noop_span_lets_exceptions_through(noop_exporter: InMemorySpanExporter) -> None:
    """An exception inside a no-op span propagates unchanged."""
    with pytest.raises(KeyError), tracer.span("a"):
        raise KeyError("k")


def test_event_and_start_span_do_nothing(noop_exporter: InMemorySpanExporter) -> None:
    """`tracer.event` records nothing and `tracer.start_span` returns the NoOpSpan."""
    tracer.event("Coordination event: x", winner="a")
    assert tracer.start_span("s") is NOOP_SPAN


def test_instrumented_functions_still_return(noop_exporter: InMemorySpanExporter) -> None:
    """Instrumented sync and async functions return their results."""
    assert double(2) == 4
    assert asyncio.run(triple(2)) == 6


def test_instrumented_generators_still_yield(noop_exporter: InMemorySpanExporter) -> None:
    """Instrumented generators and async generators yield every item, as plain generators."""
    gen = count(3)
    assert inspect.isgenerator(gen)
    assert list(gen) == [0, 1, 2]
    agen = acount(3)
    assert inspect.isasyncgen(agen)
    assert asyncio.run(_collect(agen)) == [0, 1, 2]


def test_traced_stream_still_yields(noop_exporter: InMemorySpanExporter) -> None:
    """`traced_stream` with a span name still yields every item."""

    def plain() -> Generator[str, None, None]:
        yield "a"
        yield "b"

    assert list(mastrace.traced_stream(plain(), name="stream")) == ["a", "b"]


def test_context_helpers_still_work(noop_exporter: InMemorySpanExporter) -> None:
    """`wrap`, `create_task` and `inject_env` work without tracing."""

    async def main() -> int:
        return await mastrace.create_task(triple(1))

    assert mastrace.wrap(double)(5) == 10
    assert asyncio.run(main()) == 3
    assert "TRACEPARENT" not in mastrace.inject_env({})


def test_flush_and_shutdown_report_nothing(noop_exporter: InMemorySpanExporter) -> None:
    """`force_flush` and `shutdown` return an empty, successful result."""
    result = mastrace.force_flush(timeout=1)
    assert (result.exported, result.dropped, result.failed, result.ok) == (0, 0, 0, True)
    assert mastrace.shutdown().ok
