"""An SDK's stream seen chunk by chunk: the call's span ends when the stream is exhausted, closed
or dropped, whoever reads it, in whichever task or thread."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import wrapt

if TYPE_CHECKING:
    from ._llm_calls import Call

    _Proxy = wrapt.ObjectProxy[Any]
else:  # wrapt 1.x (`wrapt>=1.16` is supported) has no generic ObjectProxy
    _Proxy = wrapt.ObjectProxy

__all__ = ["AsyncStream", "SyncStream"]


def _error_of(exc: tuple[Any, ...]) -> BaseException | None:
    return exc[1] if len(exc) > 1 and isinstance(exc[1], BaseException) else None


class SyncStream(_Proxy):
    """The SDK's stream, seen chunk by chunk; the span ends when it is exhausted, closed or dropped."""

    def __init__(self, stream: Any, call: Call) -> None:
        super().__init__(stream)
        self._self_call = call

    def __iter__(self) -> SyncStream:
        return self

    def __next__(self) -> Any:
        try:
            chunk = next(self.__wrapped__)
        except StopIteration:
            self._self_call.end()
            raise
        except BaseException as exc:
            self._self_call.end(exc)
            raise
        return self._self_call.take(chunk)

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

    def __aiter__(self) -> AsyncStream:
        return self

    async def __anext__(self) -> Any:
        try:
            chunk = await self.__wrapped__.__anext__()
        except StopAsyncIteration:
            self._self_call.end()
            raise
        except BaseException as exc:
            self._self_call.end(exc)
            raise
        return self._self_call.take(chunk)

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
