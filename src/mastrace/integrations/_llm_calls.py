"""What the LLM SDK integrations share: one span per call, streams seen chunk by chunk.

An SDK module (`openai`, `anthropic`) gives a `Reader`, which knows its SDK's response and chunk
shapes, and wraps its `create` methods with `sync_wrapper` / `async_wrapper`. A call becomes an
`llm.<provider>.stream` span (streamed) or `llm.<provider>.chat` span with the GenAI attributes;
its usage is credited once to the rounds, sessions and registry scopes around the call.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import wrapt

from .. import pricing, semconv
from .._errors import handle_internal_errors, log_internal_error, warn_once
from .._tracer import NOOP_SPAN, NoOpSpan, Span, get_tracer
from ..usage import CostCalculator, TokenUsage, credit_usage, current_sinks, field_of, usage_attributes
from . import _http_retries

__all__ = [
    "Options",
    "Patches",
    "PendingLLMSpan",
    "Reader",
    "async_wrapper",
    "pending_llm_span",
    "sync_wrapper",
]

_PRIMITIVE = (str, int, float, bool)


@dataclass
class PendingLLMSpan:
    """A framework's own LLM span, held back so that the SDK call inside it takes its place.

    A framework that opens `llm.<provider>.stream` around `create()` only (MassGen does) would
    end its span before the stream is read; the call span covers the whole stream instead, under
    the framework's name and with its attributes.
    """

    name: str
    attributes: dict[str, Any]
    claimed: int = 0
    spans: list[Any] = field(default_factory=list)  # the call spans that took it over
    cost_calculator: CostCalculator | None = None  # the framework's own prices for these calls


pending_llm_span: contextvars.ContextVar[PendingLLMSpan | None] = contextvars.ContextVar(
    "mastrace_pending_llm_span", default=None
)
# The instrumented call being made (None outside one): a library that calls another instrumented SDK
# underneath (LiteLLM calls `openai`) gives one span and one usage credit, not two; the SDK's HTTP
# retries are noted on this call (see `_http_retries`).
_inside_call: contextvars.ContextVar[Call | None] = contextvars.ContextVar(
    "mastrace_inside_llm_call", default=None
)


def current_call() -> Call | None:
    """The instrumented LLM call being made in this context, if any."""
    return _inside_call.get()


@dataclass
class Options:
    """What `instrument_<sdk>()` was asked for."""

    capture_content: bool = False
    cost_calculator: CostCalculator | None = None


@dataclass
class Reader:
    """How one SDK's calls look.

    Attributes:
        provider: The provider for a client (`openai`, `openrouter`, `anthropic`).
        skipped_request: Request arguments that are not `gen_ai.request.*` attributes.
        response: Reads a whole response into a `Call` (model, usage, finish reasons, text).
        chunk: Reads one streamed chunk into a `Call`; runs per chunk, so it must be cheap.
    """

    provider: Callable[[Any], str]
    skipped_request: frozenset[str]
    response: Callable[[Call, Any], None]
    chunk: Callable[[Call, Any], None]
    options: Options = field(default_factory=Options)


class Call:
    """One call: its span, and what the response (or stream) said."""

    def __init__(self, reader: Reader, instance: Any, kwargs: Mapping[str, Any]) -> None:
        self.reader = reader
        self.options = reader.options
        self.provider = reader.provider(instance)
        self.model = str(kwargs.get("model") or "")
        self.stream = bool(kwargs.get("stream"))
        self.usage: TokenUsage | None = None
        self.cost: float | None = None
        self.response_model: str | None = None
        self.finish_reasons: list[str] = []
        self.text: list[str] = []
        self.chunks = 0
        self.last_chunk = False  # set by a reader on the chunk after which nothing counts
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
            if key not in reader.skipped_request and isinstance(value, _PRIMITIVE):
                attrs[semconv.GEN_AI_REQUEST_PREFIX + key] = value
        if self.options.capture_content:
            attrs[semconv.GEN_AI_PROMPT] = {
                "messages": kwargs.get("messages"),
                "system": kwargs.get("system"),
            }
        pending = pending_llm_span.get()
        self.framework_pricing = pending.cost_calculator if pending is not None else None
        pricing.prepare()  # the default price table loads while the call runs
        _http_retries.install(current_call)
        if pending is not None:
            pending.claimed += 1
            name = pending.name
            attrs = {**pending.attributes, **attrs}
        else:
            name = (semconv.SPAN_LLM_STREAM if self.stream else semconv.SPAN_LLM_CHAT).format(
                provider=self.provider
            )
        self.span: Span | NoOpSpan = get_tracer("mastrace.llm").start_span(name, attrs)
        if pending is not None:
            pending.spans.append(self.span)

    def add_usage(self, usage: Any) -> None:
        """Take a usage object or dict from the response; counts reported in parts are merged."""
        found = TokenUsage.from_provider(usage, provider=self.provider)
        if found is not None:
            self.usage = found if self.usage is None else self.usage.merge_max(found)
        cost = field_of(usage, "cost")
        if isinstance(cost, (int, float)) and not isinstance(cost, bool):
            self.cost = float(cost)

    def on_response(self, response: Any) -> None:
        with handle_internal_errors("llm response"):
            self.reader.response(self, response)

    def on_chunk(self, chunk: Any) -> None:
        if self.done:
            return
        self.chunks += 1
        try:
            if self.chunks == 1:
                self.span.set_attribute(
                    semconv.MASTRACE_TIME_TO_FIRST_CHUNK, time.perf_counter() - self.started
                )
            self.reader.chunk(self, chunk)
        except Exception as exc:
            log_internal_error("llm chunk", exc)

    def end(self, error: BaseException | None = None) -> None:
        if self.done:
            return
        self.done = True
        span = self.span
        with handle_internal_errors("llm end"):
            if self.stream:
                span.set_attribute(semconv.MASTRACE_STREAM_CHUNKS, self.chunks)
                span.set_attribute(
                    semconv.MASTRACE_STREAM_COMPLETED, error is None and bool(self.finish_reasons)
                )
            if self.response_model:
                span.set_attribute(semconv.GEN_AI_RESPONSE_MODEL, self.response_model)
            if self.finish_reasons:
                span.set_attribute(semconv.GEN_AI_RESPONSE_FINISH_REASONS, tuple(self.finish_reasons))
            if self.options.capture_content and self.text:
                span.set_attribute(semconv.GEN_AI_COMPLETION, "".join(self.text))
            usage = self.usage
            if usage is not None:
                usage = self._priced(usage)
                span.set_attributes(usage_attributes(usage, massgen=False))
                span.set_attribute(semconv.MASTRACE_USAGE, usage.to_dict())
                credit_usage(usage, None, chain=self.sinks)
        span.end(error)

    def _priced(self, usage: TokenUsage) -> TokenUsage:
        model = self.response_model or self.model
        priced = pricing.price_call(
            usage,
            model,
            provider=self.provider,
            reported=self.cost,
            calculator=self.options.cost_calculator,
            framework=self.framework_pricing,
        )
        self.span.set_attributes(priced.attributes(model))
        return priced.usage


def _start(reader: Reader, instance: Any, kwargs: Mapping[str, Any]) -> Call | None:
    with handle_internal_errors("llm start"):
        return Call(reader, instance, kwargs)
    return None


def sync_wrapper(reader: Reader) -> Callable[..., Any]:
    """A `wrapt` wrapper for an SDK's synchronous `create`."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if _inside_call.get():
            return wrapped(*args, **kwargs)
        call = _start(reader, instance, kwargs)
        if call is None or call.span is NOOP_SPAN:
            return wrapped(*args, **kwargs)
        token = _inside_call.set(call)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            call.end(exc)
            raise
        finally:
            _inside_call.reset(token)
        if call.stream:
            return SyncStream(result, call)
        call.on_response(result)
        call.end()
        return result

    return wrapper


def async_wrapper(reader: Reader) -> Callable[..., Any]:
    """A `wrapt` wrapper for an SDK's asynchronous `create`."""

    async def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if _inside_call.get():
            return await wrapped(*args, **kwargs)
        call = _start(reader, instance, kwargs)
        if call is None or call.span is NOOP_SPAN:
            return await wrapped(*args, **kwargs)
        token = _inside_call.set(call)
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            call.end(exc)
            raise
        finally:
            _inside_call.reset(token)
        if call.stream:
            return AsyncStream(result, call)
        call.on_response(result)
        call.end()
        return result

    return wrapper


class SyncStream(wrapt.ObjectProxy[Any]):
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
        call = self._self_call
        call.on_chunk(chunk)
        if call.last_chunk:
            # A consumer that stops at the last chunk with content (without reading the stream's
            # end marker) still gets a span that ends when the answer did.
            call.end()
        return chunk

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
            self._self_call.end(exc[1] if exc and isinstance(exc[1], BaseException) else None)

    def __del__(self) -> None:  # a stream dropped half way still ends its span
        call = getattr(self, "_self_call", None)
        if call is not None and not call.done:
            call.end()


class AsyncStream(wrapt.ObjectProxy[Any]):
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
        call = self._self_call
        call.on_chunk(chunk)
        if call.last_chunk:
            # A consumer that stops at the last chunk with content (without reading the stream's
            # end marker) still gets a span that ends when the answer did.
            call.end()
        return chunk

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
            self._self_call.end(exc[1] if exc and isinstance(exc[1], BaseException) else None)

    def __del__(self) -> None:
        call = getattr(self, "_self_call", None)
        if call is not None and not call.done:
            call.end()


class Patches:
    """The functions one SDK integration wrapped, so that they can be put back."""

    def __init__(self) -> None:
        self.originals: list[tuple[Any, str, Any]] = []

    def apply(self, reader: Reader, sync_cls: type, async_cls: type) -> None:
        """Wrap `sync_cls.create` and `async_cls.create` (the SDK's sync and async resources)."""
        self.wrap(reader, sync_cls, "create", async_cls, "create")

    def wrap(
        self, reader: Reader, sync_owner: Any, sync_name: str, async_owner: Any, async_name: str
    ) -> None:
        """Wrap a sync and an async entry point (methods of a class, or functions of a module)."""
        for owner, name, wrapper in (
            (sync_owner, sync_name, sync_wrapper(reader)),
            (async_owner, async_name, async_wrapper(reader)),
        ):
            original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
            self.originals.append((owner, name, original))
            setattr(owner, name, wrapt.FunctionWrapper(original, wrapper))

    def undo(self) -> None:
        for owner, name, original in reversed(self.originals):
            setattr(owner, name, original)
        self.originals.clear()

    def __bool__(self) -> bool:
        return bool(self.originals)


def version_known(module: Any, supported_majors: tuple[int, ...], name: str) -> bool:
    """Whether `module`'s major version is one the integration was written for (else one warning)."""
    version = str(getattr(module, "__version__", "0"))
    try:
        major = int(version.split(".")[0])
    except ValueError:
        major = -1
    if major in supported_majors:
        return True
    warn_once(
        f"{name}.version",
        f"mastrace: {name} {version} is not a version that instrument_{name}() knows; "
        "its calls are not traced",
    )
    return False
