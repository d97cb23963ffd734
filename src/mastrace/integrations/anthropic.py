"""Trace the `anthropic` SDK's messages with one call: `instrument_anthropic()`.

Every `client.messages.create(...)` (sync and async, streamed or not) and every
`client.messages.stream(...)` (sync and async, read as events, as `text_stream` or through
`get_final_message()`) becomes an `llm.anthropic.stream` or `llm.anthropic.chat` span of kind
CLIENT, with the same GenAI attributes, time to first chunk, usage crediting and opt-in content
capture as `mastrace.integrations.openai` (see there); `system` becomes
`gen_ai.system_instructions`. Anthropic reports usage in parts (input tokens in `message_start`,
output tokens in `message_delta`); they are merged, and cache reads and writes are counted as
input, as the conventions ask.

The SDK's own call span (`anthropic.messages.create`) is not a second span: while the call runs
it is mastrace's span, which receives what the SDK records about the HTTP exchange (see
`_anthropic_sdk`), so one call is one span whose tokens are counted once.

Example:
    >>> from mastrace.integrations.anthropic import instrument_anthropic
    >>> instrument_anthropic()  # doctest: +SKIP
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from ..tracing._errors import warn_once
from ..tracing._messages import anthropic_request
from ..usage import CostCalculator
from ._anthropic_sdk import lend_call_span, stream_wrapper
from ._llm_calls import Call, Options, Patches, Reader, version_known

__all__ = ["instrument_anthropic", "uninstrument_anthropic"]

_LOCK = threading.Lock()
_patches = Patches()
_SUPPORTED_MAJOR = (0, 1, 2)


def _response(call: Call, message: Any) -> None:
    _message_start(call, message)
    reason = getattr(message, "stop_reason", None)
    out = call.output.choice(0)
    if reason:
        call.finish_reasons.append(str(reason))
        out.finish = str(reason)
    capture = call.capture
    for index, block in enumerate(getattr(message, "content", None) or ()):
        kind = getattr(block, "type", None)
        if kind == "tool_use":
            found = out.call(index, getattr(block, "id", None), getattr(block, "name", None))
            if capture:
                found.arguments = _plain(getattr(block, "input", None))
        elif capture and kind == "text":
            out.add_text(str(getattr(block, "text", "")))
        elif capture and kind == "thinking":
            out.add_text(str(getattr(block, "thinking", "")), "reasoning")


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump() if callable(dump) else value


def _message_start(call: Call, message: Any) -> None:
    model = getattr(message, "model", None)
    if isinstance(model, str):
        call.response_model = model
    message_id = getattr(message, "id", None)
    if isinstance(message_id, str):
        call.response_id = message_id
    usage = getattr(message, "usage", None)
    if usage is not None:
        call.add_usage(usage)


def _chunk(call: Call, event: Any) -> None:
    kind = getattr(event, "type", None)
    if kind == "content_block_delta":
        if call.capture:
            _delta(call, getattr(event, "index", 0), getattr(event, "delta", None))
    elif kind == "content_block_start":
        _block_start(call, getattr(event, "index", 0), getattr(event, "content_block", None))
    elif kind == "message_start":
        _message_start(call, getattr(event, "message", None))
    elif kind == "message_delta":
        usage = getattr(event, "usage", None)
        if usage is not None:
            call.add_usage(usage)
        reason = getattr(getattr(event, "delta", None), "stop_reason", None)
        if reason:
            call.finish_reasons.append(str(reason))
            call.output.choice(0).finish = str(reason)
    elif kind == "message_stop":
        call.last_chunk = True


def _block_start(call: Call, index: int, block: Any) -> None:
    kind = getattr(block, "type", None)
    if kind == "tool_use":  # ids and names are recorded with capture off too
        found = call.output.choice(0).call(index, getattr(block, "id", None), getattr(block, "name", None))
        given = getattr(block, "input", None) if call.capture else None
        if given:  # input sent whole at the start (no fragments follow), as the SDK reads it too
            found.arguments = _plain(given)
    elif call.capture and kind == "text" and getattr(block, "text", None):
        call.output.choice(0).add_text(str(block.text))


def _delta(call: Call, index: int, delta: Any) -> None:
    kind = getattr(delta, "type", None)
    out = call.output.choice(0)
    if kind == "text_delta":
        out.add_text(str(getattr(delta, "text", "")))
    elif kind == "input_json_delta":
        found = out.calls.get(index)
        fragment = getattr(delta, "partial_json", None)
        if found is not None and isinstance(fragment, str):
            found.fragments.append(fragment)
    elif kind == "thinking_delta":
        out.add_text(str(getattr(delta, "thinking", "")), "reasoning")


def _base_url(instance: Any, kwargs: Mapping[str, Any]) -> Any:
    return getattr(getattr(instance, "_client", None), "base_url", None)


_READER = Reader(
    provider=lambda instance, kwargs, server: "anthropic",
    server=_base_url,
    content=anthropic_request,
    skipped_request=frozenset(
        {
            "messages",
            "model",
            "stream",
            "tools",
            "system",
            "extra_headers",
            "extra_body",
            "extra_query",
            "timeout",
        }
    ),
    response=_response,
    chunk=_chunk,
)


def instrument_anthropic(
    *, capture_content: bool | None = None, cost_calculator: CostCalculator | None = None
) -> bool:
    """Trace `anthropic` messages. Safe to call more than once; returns whether it is on.

    Args:
        capture_content: Record the messages, system instructions and tool definitions (see
            `instrument_openai`). None (the default) follows `mastrace.configure(capture_content=...)`.
        cost_calculator: Prices calls (Anthropic reports no cost), e.g. `mastrace.StaticPricing`.

    A version of `anthropic` this module does not know gives one warning and no tracing.
    """
    with _LOCK:
        _READER.options = Options(capture_content, cost_calculator)
        if _patches:
            return True
        try:
            import anthropic
            from anthropic.resources import messages
        except ImportError:
            warn_once("anthropic.missing", "mastrace: instrument_anthropic() needs the anthropic package")
            return False
        if not version_known(anthropic, _SUPPORTED_MAJOR, "anthropic") or not hasattr(
            messages, "AsyncMessages"
        ):
            return False
        _patches.apply(_READER, messages.Messages, messages.AsyncMessages)
        if hasattr(messages.Messages, "stream") and hasattr(messages.AsyncMessages, "stream"):
            _patches.wrap_with(messages.Messages, "stream", stream_wrapper(_READER, is_async=False))
            _patches.wrap_with(messages.AsyncMessages, "stream", stream_wrapper(_READER, is_async=True))
        _lend_sdk_span()
        return True


def _lend_sdk_span() -> None:
    """Hand mastrace's call span to the SDK's own tracing (anthropic versions that have it)."""
    try:
        from anthropic import _base_client
    except ImportError:  # pragma: no cover - every supported version has it
        return
    if callable(getattr(_base_client, "start_api_call_span", None)):
        _patches.wrap_with(_base_client, "start_api_call_span", lend_call_span)


def uninstrument_anthropic() -> None:
    """Undo `instrument_anthropic()`."""
    with _LOCK:
        _patches.undo()
