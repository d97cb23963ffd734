"""Trace the `openai` SDK's chat completions with one call: `instrument_openai()`.

Every `client.chat.completions.create(...)` (sync and async, streamed or not) and every
`client.chat.completions.parse(...)` (structured output, which the SDK sends without `create`)
becomes a span of kind CLIENT, current while the SDK sends the request:

- `llm.<provider>.stream` for a streamed call, the name MassGen's backends use, from the request
  until the stream is exhausted, closed or abandoned;
- `llm.<provider>.chat` for a call that is not streamed;

with the OpenTelemetry GenAI attributes (see `mastrace.semconv.SEMCONV_VERSION`):
`gen_ai.operation.name = chat`, `gen_ai.provider.name` (`openai`; `azure.ai.openai` or
`openrouter` by base URL), `server.address` / `server.port`, the request parameters the
conventions name (`gen_ai.request.*`, `gen_ai.request.stream`), `gen_ai.response.id`,
`gen_ai.response.model`, `gen_ai.response.finish_reasons`, `gen_ai.response.time_to_first_chunk`,
`gen_ai.usage.*` and `error.type`. Other primitive parameters (`user`, ...) go under
`mastrace.request.*`. The ids and names of the tool calls a response asks for
(`mastrace.response.tool_calls`) and of the tool results a request sends back
(`mastrace.request.tool_call_ids`) are recorded too. With content capture on, the messages, tool
calls with their arguments, tool results and tool definitions are recorded in the conventions'
JSON structure, scrubbed like every attribute.

The call's usage is credited once to the enclosing agent round, coordination session and registry
scope; a cost the provider reports (OpenRouter's `usage.cost`) is used as it is, else a
`cost_calculator` given here prices it.

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

from .. import semconv
from ..tracing._errors import warn_once
from ..tracing._genai import LastSeen
from ..tracing._messages import openai_request
from ..usage import CostCalculator
from ._llm_calls import Call, Options, Patches, Reader, version_known

__all__ = ["instrument_openai", "uninstrument_openai"]

_LOCK = threading.Lock()
_patches = Patches()
_SUPPORTED_MAJOR = (1, 2, 3)


def _provider(instance: Any, kwargs: Mapping[str, Any], base_url: Any) -> str:
    return _provider_of(base_url)  # type: ignore[no-any-return]


@LastSeen
def _provider_of(base_url: Any) -> str:
    base = str(base_url or "")
    if "openrouter" in base:
        return "openrouter"
    return "azure.ai.openai" if ".openai.azure.com" in base else "openai"


def _base_url(instance: Any, kwargs: Mapping[str, Any]) -> Any:
    return getattr(getattr(instance, "_client", None), "base_url", None)


def _read_common(call: Call, part: Any) -> None:
    model = getattr(part, "model", None)
    if isinstance(model, str):
        call.response_model = model
    response_id = getattr(part, "id", None)
    if isinstance(response_id, str):
        call.response_id = response_id
    usage = getattr(part, "usage", None)
    if usage is not None:
        call.add_usage(usage)
    for key, attribute in _RESPONSE_EXTRAS:
        value = getattr(part, key, None)
        if isinstance(value, str):
            call.extra[attribute] = value


_RESPONSE_EXTRAS = (
    ("service_tier", semconv.OPENAI_RESPONSE_SERVICE_TIER),
    ("system_fingerprint", semconv.OPENAI_RESPONSE_SYSTEM_FINGERPRINT),
)


def _response(call: Call, response: Any) -> None:
    _read_common(call, response)
    capture = call.capture
    for position, choice in enumerate(getattr(response, "choices", None) or ()):
        index = getattr(choice, "index", None)
        out = call.output.choice(index if isinstance(index, int) else position) if capture else None
        reason = getattr(choice, "finish_reason", None)
        if reason:
            call.finish_reasons.append(str(reason))
            if out is not None:
                out.finish = str(reason)
        message = getattr(choice, "message", None)
        content = getattr(message, "content", None)
        if out is not None and isinstance(content, str):
            out.add_text(content)
        for number, tool_call in enumerate(getattr(message, "tool_calls", None) or ()):
            function = getattr(tool_call, "function", None)
            found = call.output.choice(position).call(
                number, getattr(tool_call, "id", None), getattr(function, "name", None)
            )
            arguments = getattr(function, "arguments", None)
            if capture and isinstance(arguments, str):
                found.fragments.append(arguments)


def _chunk(call: Call, chunk: Any) -> None:
    # Runs once per chunk: plain attribute reads (see benchmarks/bench_openai.py). A
    # `ChatCompletionChunk` has every field; `getattr(..., None)` is for chunks of other shapes.
    try:
        choices, usage = chunk.choices, chunk.usage
    except AttributeError:
        choices, usage = getattr(chunk, "choices", None), getattr(chunk, "usage", None)
    if usage is not None or call.chunks == 1 or type(chunk) is dict:
        _read_common(call, chunk)
    capture = call.capture
    for choice in choices or ():
        try:
            delta, reason = choice.delta, choice.finish_reason
            tool_calls = delta.tool_calls
        except AttributeError:
            delta, reason = getattr(choice, "delta", None), getattr(choice, "finish_reason", None)
            tool_calls = getattr(delta, "tool_calls", None)
        if reason or tool_calls or capture:
            _choice_delta(call, choice, delta, reason, tool_calls)
    if call.finish_reasons and call.usage is not None:  # usage comes last, after the finish
        call.last_chunk = True


def _choice_delta(call: Call, choice: Any, delta: Any, reason: Any, tool_calls: Any) -> None:
    index = getattr(choice, "index", 0)
    out = call.output.choice(index if isinstance(index, int) else 0)
    if reason:
        call.finish_reasons.append(str(reason))
        out.finish = str(reason)
    for tool_call in tool_calls or ():
        function = getattr(tool_call, "function", None)
        number = getattr(tool_call, "index", None)
        found = out.call(
            number if isinstance(number, int) else len(out.calls),
            getattr(tool_call, "id", None),
            getattr(function, "name", None),
        )
        fragment = getattr(function, "arguments", None)
        if call.capture and isinstance(fragment, str):
            found.fragments.append(fragment)
    if call.capture:
        content = getattr(delta, "content", None)
        if isinstance(content, str) and content:
            out.add_text(content)


SKIPPED_REQUEST = frozenset(
    {
        "messages",
        "model",
        "stream",
        "stream_options",
        "tools",
        "functions",
        "extra_headers",
        "extra_body",
        "extra_query",
        "timeout",
    }
)

_READER = Reader(
    provider=_provider,
    server=_base_url,
    content=openai_request,
    skipped_request=SKIPPED_REQUEST,
    response=_response,
    chunk=_chunk,
)


def instrument_openai(
    *, capture_content: bool | None = None, cost_calculator: CostCalculator | None = None
) -> bool:
    """Trace `openai` chat completions. Safe to call more than once; returns whether it is on.

    Args:
        capture_content: Record the messages (`gen_ai.input.messages`, `gen_ai.output.messages`)
            and tool definitions (`gen_ai.tool.definitions`), scrubbed. None (the default) follows
            `mastrace.configure(capture_content=...)` and its environment variables; off unless
            asked for: they may hold personal data. Tool call ids and names are recorded either way.
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
        if hasattr(completions.Completions, "parse") and hasattr(completions.AsyncCompletions, "parse"):
            _patches.wrap(_READER, completions.Completions, "parse", completions.AsyncCompletions, "parse")
        return True


def uninstrument_openai() -> None:
    """Undo `instrument_openai()`."""
    with _LOCK:
        _patches.undo()
