"""Traced generators (`tracing/_streams.py`): each way a stream ends ends its spans once, rightly.

Each stream comes in two flavours: decorated with `@mastrace.instrument` and wrapped with
`mastrace.traced_stream(..., name=...)`. Both give a `stream.round` span around the whole stream
and a `stream.body` span the body opens itself.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

import mastrace
from mastrace import semconv
from mastrace.testing import CapturedSpans, capture_spans
from mastrace.tracing._streams import TracedAsyncGenerator, TracedGenerator

tracer = mastrace.get_tracer()
ROUND, BODY, CONSUMER = "stream.round", "stream.body", "consumer"


async def async_numbers(
    n: int, fail_at: int | None = None, block_at: int | None = None
) -> AsyncGenerator[int, None]:
    """Yield 0..n-1 inside a body span; raise at `fail_at`; wait forever at `block_at`."""
    with tracer.span(BODY):
        for i in range(n):
            if i == fail_at:
                raise ValueError("boom")
            if i == block_at:
                await asyncio.Event().wait()
            await asyncio.sleep(0)
            yield i


def sync_numbers(n: int, fail_at: int | None = None) -> Generator[int, None, None]:
    """Yield 0..n-1 inside a body span; raise at `fail_at`."""
    with tracer.span(BODY):
        for i in range(n):
            if i == fail_at:
                raise ValueError("boom")
            yield i


instrumented_async = mastrace.instrument(ROUND)(async_numbers)
instrumented_sync = mastrace.instrument(ROUND)(sync_numbers)


def streamed_async(*args: Any, **kwargs: Any) -> AsyncIterator[int]:
    return mastrace.traced_stream(async_numbers(*args, **kwargs), name=ROUND)


def streamed_sync(*args: Any, **kwargs: Any) -> Iterator[int]:
    return mastrace.traced_stream(sync_numbers(*args, **kwargs), name=ROUND)


ASYNC_MAKERS = pytest.mark.parametrize(
    "make", [instrumented_async, streamed_async], ids=["instrument", "traced_stream"]
)
SYNC_MAKERS = pytest.mark.parametrize(
    "make", [instrumented_sync, streamed_sync], ids=["instrument", "traced_stream"]
)


@pytest.fixture
def spans(caplog: pytest.LogCaptureFixture) -> Iterator[CapturedSpans]:
    """Captured spans; the test fails if the SDK complains about a span ended twice."""
    caplog.set_level(logging.DEBUG)
    with capture_spans() as captured:
        yield captured
    assert not [r for r in caplog.records if "ended span" in r.getMessage() or "detach" in r.getMessage()]


def _ended_once(spans: CapturedSpans) -> dict[str, ReadableSpan]:
    """Assert every captured span id appears once; return the round and body spans by name."""
    counts = Counter(s.context.span_id for s in spans.spans if s.context is not None)
    assert set(counts.values()) == {1}
    assert sorted(spans.names()) == sorted([BODY, CONSUMER, ROUND])
    return {ROUND: spans.one(ROUND), BODY: spans.one(BODY)}


def _assert_ended(spans: CapturedSpans, *, error: bool, completed: bool) -> None:
    found = _ended_once(spans)
    round_span, body = found[ROUND], found[BODY]
    expected = StatusCode.ERROR if error else StatusCode.UNSET
    assert (round_span.status.status_code, body.status.status_code) == (expected, expected)
    assert round_span.attributes[semconv.MASTRACE_STREAM_COMPLETED] is completed  # type: ignore[index]
    assert spans.parent_of(body) is round_span
    assert spans.parent_of(round_span) is spans.one(CONSUMER)


async def _settle() -> None:
    """Let the event loop run the async-generator finalizers it scheduled."""
    for _ in range(5):
        await asyncio.sleep(0)


def _run_as_consumer(body: Callable[[], Any]) -> None:
    """Run `body` (a coroutine function) under a consumer span and check it is still current afterwards."""

    async def main() -> None:
        with tracer.span(CONSUMER) as consumer:
            await body()
            await _settle()
            assert trace.get_current_span() is consumer.otel_span

    asyncio.run(main())


# --- async generators ------------------------------------------------------------------------------
@ASYNC_MAKERS
def test_async_stream_consumed_to_the_end(
    make: Callable[..., AsyncIterator[int]], spans: CapturedSpans
) -> None:
    """A fully consumed async stream ends once, not as an error, completed with its chunk count."""

    async def consume() -> None:
        assert [x async for x in make(3)] == [0, 1, 2]

    _run_as_consumer(consume)
    _assert_ended(spans, error=False, completed=True)
    assert spans.one(ROUND).attributes[semconv.MASTRACE_STREAM_CHUNKS] == 3  # type: ignore[index]


@ASYNC_MAKERS
def test_async_stream_early_break(make: Callable[..., AsyncIterator[int]], spans: CapturedSpans) -> None:
    """Breaking out of `async for` and dropping the stream ends it once, not as an error, not completed."""

    async def consume() -> None:
        async for x in make(5):
            if x == 1:
                break

    _run_as_consumer(consume)
    _assert_ended(spans, error=False, completed=False)


@ASYNC_MAKERS
def test_async_stream_aclose(make: Callable[..., AsyncGenerator[int, None]], spans: CapturedSpans) -> None:
    """`aclose()` mid-stream ends it once, not as an error, not completed."""

    async def consume() -> None:
        stream = make(5)
        assert await anext(stream) == 0
        await stream.aclose()
        await stream.aclose()  # a second close is harmless

    _run_as_consumer(consume)
    _assert_ended(spans, error=False, completed=False)


@ASYNC_MAKERS
def test_async_stream_cancelled_mid_stream(
    make: Callable[..., AsyncIterator[int]], spans: CapturedSpans
) -> None:
    """Cancelling the task pulling a chunk ends the stream once as an error."""

    async def consume() -> None:
        stream = make(5, block_at=1)
        assert await asyncio.create_task(anext(stream)) == 0
        task = asyncio.create_task(anext(stream))
        await _settle()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    _run_as_consumer(consume)
    _assert_ended(spans, error=True, completed=False)


@ASYNC_MAKERS
def test_async_stream_exception_in_body(
    make: Callable[..., AsyncIterator[int]], spans: CapturedSpans
) -> None:
    """An exception in the body reaches the consumer unchanged and ends the stream once as an error."""

    async def consume() -> None:
        with pytest.raises(ValueError, match="boom"):
            async for _ in make(5, fail_at=2):
                pass

    _run_as_consumer(consume)
    _assert_ended(spans, error=True, completed=False)
    events = spans.one(ROUND).events
    assert [e.attributes["exception.type"] for e in events] == ["ValueError"]  # type: ignore[index]


@ASYNC_MAKERS
def test_async_stream_garbage_collected(
    make: Callable[..., AsyncIterator[int]], spans: CapturedSpans
) -> None:
    """A stream dropped unfinished ends once at garbage collection, not as an error, not completed."""

    async def consume() -> None:
        stream = make(5)
        assert await anext(stream) == 0
        del stream
        gc.collect()

    _run_as_consumer(consume)
    _assert_ended(spans, error=False, completed=False)


@ASYNC_MAKERS
def test_async_stream_body_span_never_current_for_consumer(
    make: Callable[..., AsyncIterator[int]], spans: CapturedSpans
) -> None:
    """Between chunks the consumer's current span is its own, not the body's."""

    async def consume() -> None:
        outer = trace.get_current_span()
        async for _ in make(3):
            assert trace.get_current_span() is outer

    _run_as_consumer(consume)
    _ended_once(spans)


def test_async_stream_athrow_reaches_the_body(spans: CapturedSpans) -> None:
    """`athrow()` raises inside the body, which may handle it and keep yielding."""

    async def resilient() -> AsyncGenerator[str, None]:
        with tracer.span(BODY):
            try:
                yield "first"
            except KeyError:
                yield "recovered"

    async def consume() -> None:
        stream = mastrace.traced_stream(resilient(), name=ROUND)
        assert await anext(stream) == "first"
        assert await stream.athrow(KeyError) == "recovered"
        with pytest.raises(StopAsyncIteration):
            await anext(stream)

    _run_as_consumer(consume)
    _assert_ended(spans, error=False, completed=True)


def test_async_stream_asend_passes_values(spans: CapturedSpans) -> None:
    """`asend()` delivers values to the body through the traced proxy."""

    async def echo() -> AsyncGenerator[str, str]:
        with tracer.span(BODY):
            received = yield "ready"
            yield f"got {received}"

    async def consume() -> None:
        stream = mastrace.traced_stream(echo(), name=ROUND)
        assert await anext(stream) == "ready"
        assert await stream.asend("ping") == "got ping"
        await stream.aclose()

    _run_as_consumer(consume)
    _ended_once(spans)


# --- sync generators -------------------------------------------------------------------------------
def _consume_sync(body: Callable[[], None]) -> None:
    with tracer.span(CONSUMER) as consumer:
        body()
        assert trace.get_current_span() is consumer.otel_span


@SYNC_MAKERS
def test_sync_stream_consumed_to_the_end(make: Callable[..., Iterator[int]], spans: CapturedSpans) -> None:
    """A fully consumed generator ends once, not as an error, completed with its chunk count."""
    _consume_sync(lambda: list(make(3)))
    _assert_ended(spans, error=False, completed=True)
    assert spans.one(ROUND).attributes[semconv.MASTRACE_STREAM_CHUNKS] == 3  # type: ignore[index]


@SYNC_MAKERS
def test_sync_stream_early_break(make: Callable[..., Iterator[int]], spans: CapturedSpans) -> None:
    """Breaking out of `for` and dropping the generator ends it once, not as an error, not completed."""

    def consume() -> None:
        for x in make(5):
            if x == 1:
                break

    _consume_sync(consume)
    _assert_ended(spans, error=False, completed=False)


@SYNC_MAKERS
def test_sync_stream_close(make: Callable[..., Generator[int, None, None]], spans: CapturedSpans) -> None:
    """`close()` mid-stream ends it once, not as an error, not completed."""

    def consume() -> None:
        stream = make(5)
        assert next(stream) == 0
        stream.close()
        stream.close()

    _consume_sync(consume)
    _assert_ended(spans, error=False, completed=False)


@SYNC_MAKERS
def test_sync_stream_exception_in_body(make: Callable[..., Iterator[int]], spans: CapturedSpans) -> None:
    """An exception in the body reaches the consumer unchanged and ends the generator once as an error."""

    def consume() -> None:
        with pytest.raises(ValueError, match="boom"):
            list(make(5, fail_at=2))

    _consume_sync(consume)
    _assert_ended(spans, error=True, completed=False)


@SYNC_MAKERS
def test_sync_stream_garbage_collected(make: Callable[..., Iterator[int]], spans: CapturedSpans) -> None:
    """A generator dropped unfinished ends once at garbage collection, not as an error, not completed."""

    def consume() -> None:
        stream = make(5)
        assert next(stream) == 0
        del stream
        gc.collect()

    _consume_sync(consume)
    _assert_ended(spans, error=False, completed=False)


@SYNC_MAKERS
def test_sync_stream_body_span_never_current_for_consumer(
    make: Callable[..., Iterator[int]], spans: CapturedSpans
) -> None:
    """Between items the consumer's current span is its own, not the body's."""

    def consume() -> None:
        outer = trace.get_current_span()
        for _ in make(3):
            assert trace.get_current_span() is outer

    _consume_sync(consume)
    _ended_once(spans)


def test_sync_stream_throw_builds_the_exception_from_its_class(spans: CapturedSpans) -> None:
    """`throw(ExcClass)` raises an instance with no arguments inside the body, as a plain generator does."""
    caught: list[BaseException] = []

    def catcher() -> Generator[str, None, None]:
        with tracer.span(BODY):
            try:
                yield "first"
            except KeyError as exc:
                caught.append(exc)
                yield "recovered"

    def consume() -> None:
        stream = mastrace.traced_stream(catcher(), name=ROUND)
        assert next(stream) == "first"
        assert stream.throw(KeyError) == "recovered"
        assert list(stream) == []

    _consume_sync(consume)
    assert len(caught) == 1 and caught[0].args == ()
    _assert_ended(spans, error=False, completed=True)


# --- traced_stream itself --------------------------------------------------------------------------
def test_traced_stream_without_name_adds_no_span(spans: CapturedSpans) -> None:
    """`traced_stream(gen)` with no name pins the body's context but records no span of its own."""

    def consume() -> None:
        assert list(mastrace.traced_stream(sync_numbers(2))) == [0, 1]

    _consume_sync(consume)
    assert sorted(spans.names()) == sorted([BODY, CONSUMER])
    assert spans.parent_of(spans.one(BODY)) is spans.one(CONSUMER)


def test_traced_stream_returns_the_matching_proxy() -> None:
    """An async generator gets a `TracedAsyncGenerator`, a sync one a `TracedGenerator`."""
    agen, gen = async_numbers(1), sync_numbers(1)
    assert isinstance(mastrace.traced_stream(agen), TracedAsyncGenerator)
    assert isinstance(mastrace.traced_stream(gen), TracedGenerator)


@pytest.mark.parametrize("value", [[1, 2], "text", 42])
def test_traced_stream_rejects_non_generators(value: object) -> None:
    """Anything but a generator or async generator raises TypeError."""
    with pytest.raises(TypeError, match="generator"):
        mastrace.traced_stream(value)
