"""Trace the `openai` SDK's chat completions with one call: `instrument_openai()`.

Every `client.chat.completions.create(...)` (sync and async, streamed or not) becomes a span:

- `llm.<provider>.stream` for a streamed call, the name MassGen's backends use, from the request
  until the stream is exhausted, closed or abandoned; it records the time to the first chunk;
- `llm.<provider>.chat` for a call that is not streamed;

with the OpenTelemetry GenAI attributes (`gen_ai.operation.name = chat`, `gen_ai.provider.name`,
`gen_ai.request.*`, `gen_ai.response.model`, `gen_ai.response.finish_reasons`,
`gen_ai.usage.*`). The provider is `openai`, or `openrouter` for an OpenRouter base URL. The
call's usage is credited once to the enclosing agent round, coordination session and registry
scope; a cost the provider reports (OpenRouter's `usage.cost`) is used as it is, else a
`cost_calculator` given here prices it. Prompt and completion text are recorded only with
`capture_content=True`, and like every attribute they are scrubbed before they leave.

Built on `wrapt` rather than `opentelemetry-instrumentation-openai-v2`: the span must carry
MassGen's name and credit usage to mastrace's rounds, and a wrapper of our own adds one span and
nothing else to the call (see `benchmarks/bench_openai.py` for the measured overhead).

Example:
    >>> from mastrace.integrations.openai import instrument_openai
    >>> instrument_openai()  # doctest: +SKIP
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from .._errors import warn_once
from ..usage import CostCalculator
from ._llm_calls import Call, Options, Patches, Reader, version_known

__all__ = ["instrument_openai", "uninstrument_openai"]

_LOCK = threading.Lock()
_patches = Patches()
_SUPPORTED_MAJOR = (1, 2, 3)


def _provider(instance: Any) -> str:
    client = getattr(instance, "_client", None)
    base = str(getattr(client, "base_url", "") or "")
    return "openrouter" if "openrouter" in base else "openai"


def _read_common(call: Call, part: Any) -> None:
    model = getattr(part, "model", None)
    if isinstance(model, str):
        call.response_model = model
    usage = getattr(part, "usage", None)
    if usage is not None:
        call.add_usage(usage)


def _response(call: Call, response: Any) -> None:
    _read_common(call, response)
    for choice in getattr(response, "choices", None) or ():
        reason = getattr(choice, "finish_reason", None)
        if reason:
            call.finish_reasons.append(str(reason))
        content = getattr(getattr(choice, "message", None), "content", None)
        if isinstance(content, str):
            call.text.append(content)


def _chunk(call: Call, chunk: Any) -> None:
    # Runs once per chunk: plain attribute reads (see benchmarks/bench_openai.py).
    if call.chunks == 1 or getattr(chunk, "usage", None) is not None or isinstance(chunk, Mapping):
        _read_common(call, chunk)
    for choice in getattr(chunk, "choices", None) or ():
        reason = getattr(choice, "finish_reason", None)
        if reason:
            call.finish_reasons.append(str(reason))
        if call.options.capture_content:
            delta = getattr(getattr(choice, "delta", None), "content", None)
            if isinstance(delta, str):
                call.text.append(delta)
    if call.finish_reasons and call.usage is not None:  # usage comes last, after the finish
        call.last_chunk = True


_READER = Reader(
    provider=_provider,
    skipped_request=frozenset(
        {"messages", "model", "stream", "tools", "functions", "extra_headers", "extra_body", "extra_query"}
    ),
    response=_response,
    chunk=_chunk,
)


def instrument_openai(
    *, capture_content: bool = False, cost_calculator: CostCalculator | None = None
) -> bool:
    """Trace `openai` chat completions. Safe to call more than once; returns whether it is on.

    Args:
        capture_content: Record the prompt (`gen_ai.prompt`) and the completion
            (`gen_ai.completion`). Off by default: they may hold personal data.
        cost_calculator: Prices calls whose usage reports no cost (e.g. `mastrace.StaticPricing`).

    A version of `openai` this module does not know gives one warning and no tracing, never an error.
    """
    with _LOCK:
        _READER.options = Options(capture_content, cost_calculator)
        if _patches:
            return True
        try:
            import openai
            from openai.resources.chat import completions
        except ImportError:
            warn_once(
                "openai.missing", "mastrace: instrument_openai() needs the openai package; nothing traced"
            )
            return False
        if not version_known(openai, _SUPPORTED_MAJOR, "openai") or not hasattr(
            completions, "AsyncCompletions"
        ):
            return False
        _patches.apply(_READER, completions.Completions, completions.AsyncCompletions)
        return True


def uninstrument_openai() -> None:
    """Undo `instrument_openai()`."""
    with _LOCK:
        _patches.undo()
