"""Generators whose body keeps its own context across yields, whichever task pulls the items.

A span opened in the body before the first `yield` stays current for the body on every resume,
and the consumer never sees it as its own current span. Closing early (`break`, `close()`,
`aclose()`), cancellation, exceptions and garbage collection end the optional stream span once,
with the matching status.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Mapping
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from .. import semconv
from ._context import ContextAwaitable
from ._errors import handle_internal_errors, log_internal_error
from ._tracer import NOOP_SPAN, NoOpSpan, Span, ValidAttributes

Y = TypeVar("Y")
S = TypeVar("S")

SpanFactory = Callable[[], "Span | NoOpSpan"]
FinishHook = Callable[[], "Mapping[str, Any] | None"]
"""Run once as a stream ends, before its span does; may return attributes for the span."""


def _exception(typ: Any, val: Any, tb: Any) -> BaseException:
    """The exception that `throw(typ, val, tb)` raises, built the way generators build it."""
    if isinstance(typ, BaseException):
        exc = typ
    elif isinstance(val, BaseException):
        exc = val
    else:
        exc = typ() if val is None else typ(*val) if isinstance(val, tuple) else typ(val)
    return exc.with_traceback(tb) if tb is not None else exc


class _StreamSpan:
    """The optional span around a whole stream, started lazily on the first item.

    `on_finish` runs once, before the span ends, and may return attributes for it: they reach the
    span with the stream's own and its end, in one call into the SDK.
    """

    __slots__ = ("_chunks", "_ctx", "_factory", "_on_finish", "_span", "done")

    def __init__(
        self,
        ctx: contextvars.Context,
        factory: SpanFactory | None,
        on_finish: FinishHook | None = None,
    ) -> None:
        self._ctx = ctx
        self._factory = factory
        self._on_finish = on_finish
        self._span: Span | NoOpSpan = NOOP_SPAN
        self._chunks = 0
        self.done = False

    def start(self) -> None:
        if self._factory is not None:
            factory, self._factory = self._factory, None
            # try/except rather than `handle_internal_errors`: a generator context manager costs
            # more than the rest of this, on every stream.
            try:
                self._span = self._ctx.run(_start, factory)
            except Exception as exc:
                log_internal_error("stream span start", exc)

    def item(self) -> None:
        self._chunks += 1

    def finish(self, exc: BaseException | None, completed: bool) -> None:
        if self.done:
            return
        self.done = True
        attrs = self._run_finish_hook()
        span = self._span
        if span is NOOP_SPAN:
            return
        try:
            ends = {
                semconv.MASTRACE_STREAM_COMPLETED: completed,
                semconv.MASTRACE_STREAM_CHUNKS: self._chunks,
            }
            if attrs:
                if type(attrs) is ValidAttributes:  # mastrace's own, handed over: completed in place
                    attrs.update(ends)
                else:
                    attrs = {**attrs, **ends}
                self._end(span._end_with, attrs, exc)
            else:
                span._set_valid_attributes(ends)
                self._end(span._end_with, _NOTHING, exc)
        except Exception as error:
            log_internal_error("stream span end", error)

    def _run_finish_hook(self) -> Mapping[str, Any] | None:
        # Runs before the span ends, in the body's context: a consumer that stops early (break,
        # garbage collection) would otherwise leave the body's own clean-up to the event loop's
        # finalizer, after the span has ended.
        hook = self._on_finish
        if hook is None:
            return None
        try:
            try:
                return self._ctx.run(hook)
            except RuntimeError:  # the context is entered elsewhere
                return hook()
        except Exception as exc:
            log_internal_error("stream finish hook", exc)
            return None

    def _end(
        self, end_with: Callable[..., None], attrs: Mapping[str, Any], exc: BaseException | None
    ) -> None:
        try:
            self._ctx.run(end_with, attrs, exc)
        except RuntimeError:  # the context is entered elsewhere (finalizer): end without detaching
            end_with(attrs, exc)


def _start(factory: SpanFactory) -> Span | NoOpSpan:
    return factory().start()


_NOTHING: Mapping[str, Any] = MappingProxyType({})


class TracedGenerator(Generator[Y, S, Any], Generic[Y, S]):
    """A generator proxy that runs every step of `gen` inside one fixed context."""

    def __init__(
        self,
        gen: Generator[Y, S, Any],
        ctx: contextvars.Context | None = None,
        span: SpanFactory | None = None,
        on_finish: FinishHook | None = None,
    ) -> None:
        self._gen = gen
        self._send = gen.send  # bound once: every item goes through it
        self._ctx = ctx if ctx is not None else contextvars.copy_context()
        self._stream = _StreamSpan(self._ctx, span, on_finish)

    def __iter__(self) -> TracedGenerator[Y, S]:
        return self

    def __next__(self) -> Y:
        return self._step(self._send, None)

    def send(self, value: S) -> Y:
        return self._step(self._send, value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Y:
        return self._step(self._gen.throw, _exception(typ, val, tb))

    def _step(self, fn: Callable[[Any], Y], arg: Any) -> Y:
        stream = self._stream
        if stream._factory is not None:  # the first step starts the span (the test saves a call per item)
            stream.start()
        try:
            item = self._ctx.run(fn, arg)
        except StopIteration:
            stream.finish(None, completed=True)
            raise
        except BaseException as exc:
            stream.finish(exc, completed=False)
            raise
        stream._chunks += 1
        return item

    def close(self) -> None:
        if self._stream.done:
            return
        try:
            self._ctx.run(self._gen.close)
        except BaseException as exc:
            self._stream.finish(exc, completed=False)
            raise
        self._stream.finish(None, completed=False)

    def __del__(self) -> None:
        if not self._stream.done:
            with handle_internal_errors("generator finalizer"):
                try:
                    self.close()
                except RuntimeError:  # context entered elsewhere
                    self._stream.finish(None, completed=False)


class TracedAsyncGenerator(AsyncGenerator[Y, S], Generic[Y, S]):
    """An async generator proxy that runs every step of `agen` inside one fixed context."""

    def __init__(
        self,
        agen: AsyncGenerator[Y, S],
        ctx: contextvars.Context | None = None,
        span: SpanFactory | None = None,
        on_finish: FinishHook | None = None,
    ) -> None:
        self._agen = agen
        self._ctx = ctx if ctx is not None else contextvars.copy_context()
        self._stream = _StreamSpan(self._ctx, span, on_finish)

    def __aiter__(self) -> AsyncIterator[Y]:
        return self

    def __anext__(self) -> Any:
        return self.asend(None)  # type: ignore[arg-type]

    async def asend(self, value: S) -> Y:
        return await self._step(self._agen.asend(value))

    async def athrow(self, typ: Any, val: Any = None, tb: Any = None) -> Y:
        return await self._step(self._agen.athrow(_exception(typ, val, tb)))

    async def _step(self, awaitable: Any) -> Y:
        stream = self._stream
        stream.start()
        try:
            item: Y = await ContextAwaitable(self._ctx, awaitable)
        except StopAsyncIteration:
            stream.finish(None, completed=True)
            raise
        except BaseException as exc:
            stream.finish(exc, completed=False)
            raise
        stream.item()
        return item

    async def aclose(self) -> None:
        if self._stream.done:
            return
        try:
            await ContextAwaitable(self._ctx, self._agen.aclose())
        except BaseException as exc:
            self._stream.finish(exc, completed=False)
            raise
        self._stream.finish(None, completed=False)

    def __del__(self) -> None:
        # The wrapped generator is finalized by the event loop's async-generator hooks; here we
        # only make sure the stream span ends (once) if the consumer dropped us unfinished.
        if not self._stream.done:
            with handle_internal_errors("async generator finalizer"):
                self._stream.finish(None, completed=False)


def traced_stream(
    stream: Any, name: str | None = None, attributes: dict[str, Any] | None = None, *, tracer: Any = None
) -> Any:
    """Pin a generator's body to its own context; optionally wrap the whole stream in a span.

    Use it for a generator you did not decorate with `@mastrace.instrument`, when its items are
    pulled from different tasks (for example a new `asyncio.create_task(anext(stream))` per chunk):
    spans the body opens keep nesting under the body's own spans, not the consumer's.

    Args:
        stream: A sync or async generator (not yet started, or started inside this context).
        name: If given, a span with this name covers the stream from first item to end.
        attributes: Attributes for that span.
        tracer: The `mastrace.Tracer` to use for the span (default `mastrace.get_tracer()`).

    Example:
        >>> async def chunks():
        ...     yield "a"
        >>> stream = mastrace.traced_stream(chunks())  # doctest: +SKIP
    """
    factory: SpanFactory | None = None
    if name is not None:
        from ._tracer import get_tracer

        t = tracer or get_tracer()
        factory = lambda: t.span(name, attributes)  # noqa: E731
    ctx = contextvars.copy_context()
    if hasattr(stream, "__anext__") and hasattr(stream, "asend"):
        return TracedAsyncGenerator(stream, ctx, factory)
    if hasattr(stream, "__next__") and hasattr(stream, "send"):
        return TracedGenerator(stream, ctx, factory)
    raise TypeError(f"traced_stream() takes a generator or async generator, not {type(stream).__name__}")
