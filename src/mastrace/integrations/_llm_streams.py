"""An SDK's stream seen chunk by chunk: the call's span ends when the stream is exhausted, closed
or dropped, whoever reads it, in whichever task or thread."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import wrapt


class Call(Protocol):
    """What a stream needs of its LLM call (`_llm_calls.Call`): read a chunk, end once."""

    done: bool

    def take(self, chunk: Any) -> Any: ...

    def end(self, error: BaseException | None = None) -> None: ...


if TYPE_CHECKING:
    _Proxy = wrapt.ObjectProxy[Any]
else:  # wrapt 1.x (`wrapt>=1.16` is supported) has no generic ObjectProxy
    _Proxy = wrapt.ObjectProxy

__all__ = ["AsyncStream", "SyncStream"]


def _error_of(exc: tuple[Any, ...]) -> BaseException | None:
    return exc[1] if len(exc) > 1 and isinstance(exc[1], BaseException) else None


def _next_of(stream: Any) -> Any:
    """What gives the stream's next chunk: `iter(stream).__next__`, which for the SDKs' streams
    resumes their own generator (as a `for` loop over the stream does) rather than calling their
    `__next__` method per chunk; `next(stream)` for an object `iter()` refuses."""
    try:
        return iter(stream).__next__
    except Exception:  # not iterable (a raw response): it fails when iterated, as it would unwrapped
        return lambda: next(stream)


def _anext_of(stream: Any) -> Any:
    """`_next_of` for an async stream: `aiter(stream).__anext__`, else `stream.__anext__()`."""
    try:
        return aiter(stream).__anext__
    except Exception:
        return lambda: stream.__anext__()


class SyncStream(_Proxy):
    """The SDK's stream, seen chunk by chunk; the span ends when it is exhausted, closed or dropped."""

    def __init__(self, stream: Any, call: Call) -> None:
        super().__init__(stream)
        self._self_call = call
        # What `__next__` needs, in one attribute: reading one of a proxy's own attributes costs
        # several times a plain object's, and this runs for every chunk.
        self._self_step = (_next_of(stream), call.take, call.end)

    def __iter__(self) -> SyncStream:
        return self

    def __next__(self) -> Any:
        step, take, end = self._self_step
        try:
            chunk = step()
        except StopIteration:
            end()
            raise
        except BaseException as exc:
            end(exc)
            raise
        return take(chunk)

    def close(self) -> None:
        try:
            self.__wrapped__.close()
        finally:
            self._self_call.end()

    def __enter__(self) -> SyncStream:
        self.__wrapped__.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        try:
            return self.__wrapped__.__exit__(*exc)
        finally:
            self._self_call.end(_error_of(exc))

    def __del__(self) -> None:  # a stream dropped half way still ends its span
        call = getattr(self, "_self_call", None)
        if call is not None and not call.done:
            call.end()


class AsyncStream(_Proxy):
    """The SDK's async stream, seen chunk by chunk; the span ends when it is exhausted, closed or dropped."""

    def __init__(self, stream: Any, call: Call) -> None:
        super().__init__(stream)
        self._self_call = call
        self._self_step = (_anext_of(stream), call.take, call.end)  # as `SyncStream`'s

    def __aiter__(self) -> AsyncStream:
        return self

    async def __anext__(self) -> Any:
        step, take, end = self._self_step
        try:
            chunk = await step()
        except StopAsyncIteration:
            end()
            raise
        except BaseException as exc:
            end(exc)
            raise
        return take(chunk)

    async def close(self) -> None:
        try:
            await self.__wrapped__.close()
        finally:
            self._self_call.end()

    async def aclose(self) -> None:
        await self.close()

    async def __aenter__(self) -> AsyncStream:
        await self.__wrapped__.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self.__wrapped__.__aexit__(*exc)
        finally:
            self._self_call.end(_error_of(exc))

    def __del__(self) -> None:
        call = getattr(self, "_self_call", None)
        if call is not None and not call.done:
            call.end()
