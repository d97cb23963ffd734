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
import time
from collections.abc import Mapping
from typing import Any

import wrapt

from .. import semconv
from .._errors import handle_internal_errors, log_internal_error, warn_once
from .._tracer import NOOP_SPAN, NoOpSpan, Span, get_tracer
from ..usage import CostCalculator, TokenUsage, credit_usage, current_sinks, field_of, usage_attributes

__all__ = ["instrument_openai", "uninstrument_openai"]

_LOCK = threading.Lock()
_originals: dict[str, Any] = {}
_options: dict[str, Any] = {"capture_content": False, "cost_calculator": None}
_PRIMITIVE = (str, int, float, bool)
_SKIPPED_REQUEST = frozenset(
    {"messages", "model", "stream", "tools", "functions", "extra_headers", "extra_body"}
)
_SUPPORTED_MAJOR = (1, 2, 3)


def instrument_openai(
    *, capture_content: bool = False, cost_calculator: CostCalculator | None = None
) -> bool:
    """Trace `openai` chat completions. Safe to call more than once; returns whether it is on.

    Args:
        capture_content: Record the prompt (`gen_ai.prompt`) and the completion
            (`gen_ai.completion`) as JSON. Off by default: they may hold personal data.
        cost_calculator: Prices calls whose usage reports no cost (e.g. `mastrace.StaticPricing`).

    A version of `openai` this module does not know gives one warning and no tracing, never an error.
    """
    with _LOCK:
        _options.update(capture_content=capture_content, cost_calculator=cost_calculator)
        if _originals:
            return True
        try:
            import openai
            from openai.resources.chat import completions
        except ImportError:
            warn_once(
                "openai.missing", "mastrace: instrument_openai() needs the openai package; nothing traced"
            )
            return False
        major = int(str(getattr(openai, "__version__", "0")).split(".")[0] or 0)
        if major not in _SUPPORTED_MAJOR or not hasattr(completions, "AsyncCompletions"):
            warn_once(
                "openai.version",
                f"mastrace: openai {getattr(openai, '__version__', '?')} is not a version that "
                "instrument_openai() knows; its calls are not traced",
            )
            return False
        for cls, wrapper in (
            (completions.Completions, _sync_create),
            (completions.AsyncCompletions, _async_create),
        ):
            original = cls.__dict__["create"]
            _originals[cls.__qualname__] = (cls, original)
            cls.create = wrapt.FunctionWrapper(original, wrapper)  # type: ignore[method-assign]
        return True


def uninstrument_openai() -> None:
    """Undo `instrument_openai()`."""
    with _LOCK:
        for cls, original in _originals.values():
            cls.create = original
        _originals.clear()


# -- the span ----------------------------------------------------------------------------------------
def _provider(instance: Any) -> str:
    client = getattr(instance, "_client", None)
    base = str(getattr(client, "base_url", "") or "")
    return "openrouter" if "openrouter" in base else "openai"


class _Call:
    """One chat completion call: its span, and what the response (or stream) said."""

    def __init__(self, instance: Any, kwargs: Mapping[str, Any]) -> None:
        self.provider = _provider(instance)
        self.model = str(kwargs.get("model") or "")
        self.stream = bool(kwargs.get("stream"))
        self.usage: TokenUsage | None = None
        self.cost: float | None = None
        self.response_model: str | None = None
        self.finish_reasons: list[str] = []
        self.text: list[str] = []
        self.chunks = 0
        self.started = time.perf_counter()
        self.done = False
        # Usage goes to the rounds and sessions around the call, wherever the stream is read.
        self.sinks = current_sinks()
        attrs: dict[str, Any] = {
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OP_CHAT,
            semconv.GEN_AI_PROVIDER_NAME: self.provider,
            semconv.GEN_AI_REQUEST_MODEL: self.model,
            semconv.MASSGEN_BACKEND: self.provider,
        }
        for key, value in kwargs.items():
            if key not in _SKIPPED_REQUEST and isinstance(value, _PRIMITIVE):
                attrs[semconv.GEN_AI_REQUEST_PREFIX + key] = value
        if _options["capture_content"]:
            attrs[semconv.GEN_AI_PROMPT] = kwargs.get("messages")
        name = semconv.SPAN_LLM_STREAM if self.stream else semconv.SPAN_LLM_CHAT
        self.span: Span | NoOpSpan = get_tracer("mastrace.openai").start_span(
            name.format(provider=self.provider), attrs
        )

    def on_response(self, response: Any) -> None:
        with handle_internal_errors("openai response"):
            self._read(response)
            for choice in field_of(response, "choices") or ():
                reason = field_of(choice, "finish_reason")
                if reason:
                    self.finish_reasons.append(str(reason))
                content = field_of(field_of(choice, "message"), "content")
                if isinstance(content, str):
                    self.text.append(content)

    def on_chunk(self, chunk: Any) -> None:
        # Runs once per chunk: plain attribute reads and a bare try, no helpers (see bench_openai).
        self.chunks += 1
        try:
            if self.chunks == 1:
                self.span.set_attribute(
                    semconv.MASTRACE_TIME_TO_FIRST_CHUNK, time.perf_counter() - self.started
                )
                self._read(chunk)
            elif getattr(chunk, "usage", None) is not None or isinstance(chunk, Mapping):
                self._read(chunk)
            for choice in getattr(chunk, "choices", None) or ():
                reason = getattr(choice, "finish_reason", None)
                if reason:
                    self.finish_reasons.append(str(reason))
                if _options["capture_content"]:
                    delta = getattr(getattr(choice, "delta", None), "content", None)
                    if isinstance(delta, str):
                        self.text.append(delta)
        except Exception as exc:
            log_internal_error("openai chunk", exc)

    def _read(self, part: Any) -> None:
        model = field_of(part, "model")
        if isinstance(model, str):
            self.response_model = model
        usage = field_of(part, "usage")
        if usage is not None:
            found = TokenUsage.from_provider(usage, provider=self.provider)
            if found is not None:
                self.usage = found
            cost = field_of(usage, "cost")
            if isinstance(cost, (int, float)) and not isinstance(cost, bool):
                self.cost = float(cost)

    def end(self, error: BaseException | None = None) -> None:
        if self.done:
            return
        self.done = True
        span = self.span
        with handle_internal_errors("openai end"):
            if self.stream:
                span.set_attribute(semconv.MASTRACE_STREAM_CHUNKS, self.chunks)
                span.set_attribute(
                    semconv.MASTRACE_STREAM_COMPLETED, error is None and bool(self.finish_reasons)
                )
            if self.response_model:
                span.set_attribute(semconv.GEN_AI_RESPONSE_MODEL, self.response_model)
            if self.finish_reasons:
                span.set_attribute(semconv.GEN_AI_RESPONSE_FINISH_REASONS, tuple(self.finish_reasons))
            if _options["capture_content"] and self.text:
                span.set_attribute(semconv.GEN_AI_COMPLETION, "".join(self.text))
            usage = self.usage
            if usage is not None:
                usage = self._priced(usage)
                span.set_attributes(usage_attributes(usage, massgen=False))
                span.set_attribute(semconv.MASTRACE_USAGE, usage.to_dict())
                credit_usage(usage, None, chain=self.sinks)
        span.end(error)

    def _priced(self, usage: TokenUsage) -> TokenUsage:
        if self.cost is not None:
            return usage.with_cost(self.cost)
        calculator = _options["cost_calculator"]
        if calculator is None or usage.cost:
            return usage
        cost = calculator.calculate_cost(usage, self.response_model or self.model)
        return usage if cost is None else usage.with_cost(cost)


def _start(instance: Any, kwargs: Mapping[str, Any]) -> _Call | None:
    with handle_internal_errors("openai start"):
        return _Call(instance, kwargs)
    return None


# -- wrappers --------------------------------------------------------------------------------------
def _sync_create(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    call = _start(instance, kwargs)
    if call is None or call.span is NOOP_SPAN:
        return wrapped(*args, **kwargs)
    try:
        result = wrapped(*args, **kwargs)
    except BaseException as exc:
        call.end(exc)
        raise
    if call.stream:
        return _SyncStream(result, call)
    call.on_response(result)
    call.end()
    return result


async def _async_create(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    call = _start(instance, kwargs)
    if call is None or call.span is NOOP_SPAN:
        return await wrapped(*args, **kwargs)
    try:
        result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        call.end(exc)
        raise
    if call.stream:
        return _AsyncStream(result, call)
    call.on_response(result)
    call.end()
    return result


class _SyncStream(wrapt.ObjectProxy[Any]):
    """The SDK's `Stream`, seen chunk by chunk; the span ends when it is exhausted or closed."""

    def __init__(self, stream: Any, call: _Call) -> None:
        super().__init__(stream)
        self._self_call = call

    def __iter__(self) -> _SyncStream:
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
        self._self_call.on_chunk(chunk)
        return chunk

    def close(self) -> None:
        try:
            self.__wrapped__.close()
        finally:
            self._self_call.end()

    def __enter__(self) -> _SyncStream:
        self.__wrapped__.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        try:
            return self.__wrapped__.__exit__(*exc)
        finally:
            self._self_call.end(exc[1] if exc and isinstance(exc[1], BaseException) else None)

    def __del__(self) -> None:  # a stream dropped half way still ends its span
        call = getattr(self, "_self_call", None)
        if call is not None and not call.done:
            call.end()


class _AsyncStream(wrapt.ObjectProxy[Any]):
    """The SDK's `AsyncStream`, seen chunk by chunk; the span ends when it is exhausted or closed."""

    def __init__(self, stream: Any, call: _Call) -> None:
        super().__init__(stream)
        self._self_call = call

    def __aiter__(self) -> _AsyncStream:
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
        self._self_call.on_chunk(chunk)
        return chunk

    async def close(self) -> None:
        try:
            await self.__wrapped__.close()
        finally:
            self._self_call.end()

    async def aclose(self) -> None:
        await self.close()

    async def __aenter__(self) -> _AsyncStream:
        await self.__wrapped__.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self.__wrapped__.__aexit__(*exc)
        finally:
            self._self_call.end(exc[1] if exc and isinstance(exc[1], BaseException) else None)

    def __del__(self) -> None:
        call = getattr(self, "_self_call", None)
        if call is not None and not call.done:
            call.end()
