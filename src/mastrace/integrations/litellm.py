"""Trace LiteLLM's `completion()` and `acompletion()` with one call: `instrument_litellm()`.

Every call, streamed or not, becomes an `llm.litellm.stream` / `llm.litellm.chat` span with the
same GenAI attributes, time to first chunk, tool calls, opt-in content and usage crediting as
`instrument_openai()` (LiteLLM's requests, responses and chunks have OpenAI's shape).
`gen_ai.provider.name` is the provider LiteLLM routes the model to (`openai` for `gpt-4o` or
`openai/...`), or `litellm` when LiteLLM does not know it; `massgen.backend` stays `litellm`.
The cost is LiteLLM's own when it has one (`usage.cost` from the provider, or LiteLLM's
`response_cost` from its price table), else the `cost_calculator` given here. The SDK LiteLLM
calls underneath (`openai`, when `instrument_openai()` is on too) is not traced a second time:
one call, one span, one usage credit.

Code that did `from litellm import completion` before `instrument_litellm()` keeps the function
it imported, untraced: call it after instrumenting, or use `litellm.completion(...)`.

Example:
    >>> from mastrace.integrations.litellm import instrument_litellm
    >>> instrument_litellm()  # doctest: +SKIP
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from ..tracing._errors import warn_once
from ..tracing._messages import openai_request
from ..usage import CostCalculator
from ._llm_calls import Call, Options, Patches, Reader
from .openai import SKIPPED_REQUEST
from .openai import _chunk as _openai_chunk
from .openai import _response as _openai_response

__all__ = ["instrument_litellm", "uninstrument_litellm"]

_LOCK = threading.Lock()
_patches = Patches()


def _hidden_cost(call: Call, part: Any) -> None:
    hidden = getattr(part, "_hidden_params", None)
    cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
    if call.cost is None and isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost > 0:
        call.cost = float(cost)


def _response(call: Call, response: Any) -> None:
    _openai_response(call, response)
    _hidden_cost(call, response)


def _chunk(call: Call, chunk: Any) -> None:
    _openai_chunk(call, chunk)
    if call.last_chunk:
        _hidden_cost(call, chunk)


def _provider(instance: Any, kwargs: Mapping[str, Any], base_url: Any) -> str:
    """The provider LiteLLM routes the model to (`openai`, `anthropic`, ...), else `litellm`."""
    explicit = kwargs.get("custom_llm_provider")
    if isinstance(explicit, str) and explicit:
        return explicit
    model = kwargs.get("model")
    if isinstance(model, str) and "/" in model:
        return model.split("/", 1)[0]
    try:
        import litellm

        found = litellm.get_llm_provider(model=str(model), api_base=kwargs.get("api_base"))[1]  # type: ignore[attr-defined]
    except Exception:  # LiteLLM does not know the model: say so rather than guess
        return "litellm"
    return str(found) if found else "litellm"


def _base_url(instance: Any, kwargs: Mapping[str, Any]) -> Any:
    return kwargs.get("api_base") or kwargs.get("base_url")


_READER = Reader(
    provider=_provider,
    server=_base_url,
    content=openai_request,
    skipped_request=SKIPPED_REQUEST
    | {"api_key", "api_base", "base_url", "metadata", "custom_llm_provider", "mock_response"},
    response=_response,
    chunk=_chunk,
    span_provider="litellm",
    positional=(
        "model",
        "messages",
    ),  # completion(model, messages, ...) and acompletion(model, messages, ...)
)


def instrument_litellm(
    *, capture_content: bool | None = None, cost_calculator: CostCalculator | None = None
) -> bool:
    """Trace `litellm.completion` and `litellm.acompletion`. Safe to call more than once.

    Args:
        capture_content: Record the messages and tool definitions (see `instrument_openai`). None
            (the default) follows `mastrace.configure(capture_content=...)`.
        cost_calculator: Prices calls for which LiteLLM reports no cost.

    Returns:
        Whether tracing is on (False, with one warning, when `litellm` is not installed).
    """
    with _LOCK:
        _READER.options = Options(capture_content, cost_calculator)
        if _patches:
            return True
        try:
            import litellm
        except ImportError:
            warn_once(
                "litellm-missing", "mastrace: instrument_litellm() needs the litellm package; nothing traced"
            )
            return False
        if not callable(getattr(litellm, "completion", None)) or not callable(
            getattr(litellm, "acompletion", None)
        ):
            warn_once(
                "litellm-seam", "mastrace: this litellm has no completion()/acompletion(); nothing traced"
            )
            return False
        _patches.wrap(_READER, litellm, "completion", litellm, "acompletion")
        return True


def uninstrument_litellm() -> None:
    """Undo `instrument_litellm()`."""
    with _LOCK:
        _patches.undo()
