"""Two seams of the `anthropic` SDK: its own call span, and `messages.stream()`.

The SDK traces each API call itself: a CLIENT span `anthropic.messages.create` with GenAI
attributes and token usage. Beside mastrace's call span that would be a second span, with the
same tokens, for one call (and a second root trace when nothing encloses the call). While a
mastrace call span is current, the SDK's tracer is handed that span instead (`lend_call_span`):
what the SDK records (`http.*`, `url.*`, `anthropic.request.id`, its GenAI attributes) lands on
mastrace's span, the trace context the SDK sends with the request is that span's, and the SDK's
`end()` is left to mastrace, which ends the span when the response or the stream is done.

`messages.stream()` returns a manager that sends the request when it is entered; the request is
wrapped so that the call is traced from there until the stream is read, closed or dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.util.types import Attributes, AttributeValue

from ..tracing._errors import handle_internal_errors, warn_once
from ._llm_calls import Reader, current_call, start_call
from ._llm_streams import AsyncStream, SyncStream

__all__ = ["lend_call_span", "stream_wrapper"]


class _LentSpan(trace.Span):
    """mastrace's call span as the SDK sees it: annotations pass through, ending does not."""

    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def end(self, end_time: int | None = None) -> None:
        return None  # mastrace ends the span when the response or stream is done

    def get_span_context(self) -> trace.SpanContext:
        return self._span.get_span_context()

    # What the SDK records after mastrace ended the span (its stream observer runs after the last
    # event was handed out) is dropped: mastrace's values are the final ones.
    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        if self._span.is_recording():
            self._span.set_attributes(attributes)

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        if self._span.is_recording():
            self._span.set_attribute(key, value)

    def add_event(self, name: str, attributes: Attributes = None, timestamp: int | None = None) -> None:
        self._span.add_event(name, attributes, timestamp)

    def add_link(self, context: trace.SpanContext, attributes: Attributes = None) -> None:
        self._span.add_link(context, attributes)

    def update_name(self, name: str) -> None:
        return None  # the span keeps MassGen's name

    def is_recording(self) -> bool:
        return self._span.is_recording()

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        # An OK status would be final and hide an error found later (a stream cut short).
        code = status.status_code if isinstance(status, Status) else status
        if code is StatusCode.ERROR and self._span.is_recording():
            self._span.set_status(status, description)

    def record_exception(
        self,
        exception: BaseException,
        attributes: Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        return None  # mastrace records the exception the call raises


class _LendingTracer(trace.Tracer):
    """A tracer whose every span is the call span it was given."""

    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def start_span(
        self,
        name: str,
        context: Any = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> trace.Span:
        lent = _LentSpan(self._span)
        if attributes:
            lent.set_attributes(attributes)
        return lent

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - unused by the SDK
        return trace.use_span(self.start_span(*args, **kwargs), end_on_exit=False)


def lend_call_span(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A `wrapt` wrapper of the SDK's `start_api_call_span(tracer, base_url, options, ...)`."""
    call = current_call.get()
    ours = call.otel_span if call is not None else None
    if ours is None or trace.get_current_span() is not ours or not args:
        return wrapped(*args, **kwargs)
    return wrapped(_LendingTracer(ours), *args[1:], **kwargs)


_MANAGER_REQUEST = ("_MessageStreamManager__api_request", "_AsyncMessageStreamManager__api_request")


def stream_wrapper(reader: Reader, *, is_async: bool) -> Callable[..., Any]:
    """A `wrapt` wrapper of `Messages.stream` / `AsyncMessages.stream`."""
    attribute = _MANAGER_REQUEST[is_async]

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        manager = wrapped(*args, **kwargs)
        with handle_internal_errors("anthropic messages.stream"):
            request = getattr(manager, attribute, None)
            if request is None:
                warn_once("anthropic.stream", "mastrace: this anthropic's messages.stream() is not traced")
                return manager
            params = {**kwargs, "stream": True}
            traced = _async_request if is_async else _sync_request
            setattr(manager, attribute, traced(reader, instance, params, request))
        return manager

    return wrapper


def _sync_request(
    reader: Reader, instance: Any, kwargs: Mapping[str, Any], request: Callable[[], Any]
) -> Callable[[], Any]:
    def traced() -> Any:
        call = start_call(reader, instance, kwargs)
        if call is None:
            return request()
        with call.running():
            raw = request()
        return SyncStream(raw, call)

    return traced


def _async_request(reader: Reader, instance: Any, kwargs: Mapping[str, Any], request: Any) -> Any:
    async def traced() -> Any:
        call = start_call(reader, instance, kwargs)
        if call is None:
            return await request
        with call.running():
            raw = await request
        return AsyncStream(raw, call)

    return traced()
