"""Trace the `anthropic` SDK's messages with one call: `instrument_anthropic()`.

Every `client.messages.create(...)` (sync and async, streamed or not) becomes an
`llm.anthropic.stream` or `llm.anthropic.chat` span, with the same GenAI attributes, time to first
event, usage crediting and opt-in content capture as `mastrace.integrations.openai` (see there).
Anthropic reports usage in parts (input tokens in `message_start`, output tokens in
`message_delta`); they are merged, and cache reads and writes are counted as input.

Example:
    >>> from mastrace.integrations.anthropic import instrument_anthropic
    >>> instrument_anthropic()  # doctest: +SKIP
"""

from __future__ import annotations

import threading
from typing import Any

from .._errors import warn_once
from ..usage import CostCalculator
from ._llm_calls import Call, Options, Patches, Reader, version_known

__all__ = ["instrument_anthropic", "uninstrument_anthropic"]

_LOCK = threading.Lock()
_patches = Patches()
_SUPPORTED_MAJOR = (0, 1, 2)


def _response(call: Call, response: Any) -> None:
    model = getattr(response, "model", None)
    if isinstance(model, str):
        call.response_model = model
    usage = getattr(response, "usage", None)
    if usage is not None:
        call.add_usage(usage)
    reason = getattr(response, "stop_reason", None)
    if reason:
        call.finish_reasons.append(str(reason))
    for block in getattr(response, "content", None) or ():
        text = getattr(block, "text", None)
        if isinstance(text, str):
            call.text.append(text)


def _chunk(call: Call, event: Any) -> None:
    kind = getattr(event, "type", None)
    if kind == "content_block_delta":
        if call.options.capture_content:
            text = getattr(getattr(event, "delta", None), "text", None)
            if isinstance(text, str):
                call.text.append(text)
    elif kind == "message_start":
        _response(call, getattr(event, "message", None))
    elif kind == "message_delta":
        usage = getattr(event, "usage", None)
        if usage is not None:
            call.add_usage(usage)
        reason = getattr(getattr(event, "delta", None), "stop_reason", None)
        if reason:
            call.finish_reasons.append(str(reason))
    elif kind == "message_stop":
        call.last_chunk = True


_READER = Reader(
    provider=lambda instance: "anthropic",
    skipped_request=frozenset(
        {"messages", "model", "stream", "tools", "system", "extra_headers", "extra_body"}
    ),
    response=_response,
    chunk=_chunk,
)


def instrument_anthropic(
    *, capture_content: bool = False, cost_calculator: CostCalculator | None = None
) -> bool:
    """Trace `anthropic` messages. Safe to call more than once; returns whether it is on.

    Args:
        capture_content: Record the prompt and the completion text. Off by default.
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
        return True


def uninstrument_anthropic() -> None:
    """Undo `instrument_anthropic()`."""
    with _LOCK:
        _patches.undo()
