"""What the LLM SDK integrations share: one span per call, streams seen chunk by chunk.

An SDK module (`openai`, `anthropic`, `litellm`) gives a `Reader`, which knows its SDK's request,
response and chunk shapes, and wraps its entry points with `sync_wrapper` / `async_wrapper`. A call
becomes an `llm.<provider>.stream` span (streamed) or an `llm.<provider>.chat` span, of kind CLIENT,
with the GenAI semantic conventions' attributes (see `semconv.SEMCONV_VERSION`). The span is the
current span while the SDK call runs, so spans the SDK or an HTTP instrumentation start inside it
nest under it. Its usage is credited once to the rounds, sessions and registry scopes around it.
"""

from __future__ import annotations

import contextvars
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import wrapt
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from .. import pricing, semconv
from ..tracing._errors import handle_internal_errors, log_internal_error, warn_once
from ..tracing._genai import LastSeen, capture_enabled, current_conversation_id, request_attributes, server_of
from ..tracing._messages import Output, tool_result_ids
from ..tracing._tracer import NOOP_SPAN, NoOpSpan, Span, attach_span, get_tracer
from ..usage import (
    UNCOUNTED_CALLS,
    CostCalculator,
    TokenUsage,
    credit_usage,
    current_sinks,
    field_of,
    usage_attributes,
)
from . import _http_retries
from ._llm_streams import AsyncStream, SyncStream

__all__ = [
    "Call",
    "Options",
    "Patches",
    "PendingLLMSpan",
    "Reader",
    "async_wrapper",
    "current_call",
    "cut_off_calls",
    "pending_llm_span",
    "sync_wrapper",
]

TRACER_NAME = "mastrace.llm"
_server_of = LastSeen(server_of)  # a client's base URL: the same object call after call


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
# The instrumented call being made: a library that calls another instrumented SDK underneath
# (LiteLLM calls `openai`) gives one span and one usage credit, not two; an SDK that starts a span
# of its own for the call (anthropic) hands it over to this one.
current_call: contextvars.ContextVar[Call | None] = contextvars.ContextVar("mastrace_llm_call", default=None)


@dataclass
class Options:
    """What `instrument_<sdk>()` was asked for (`capture_content=None`: follow `configure()`)."""

    capture_content: bool | None = None
    cost_calculator: CostCalculator | None = None


@dataclass
class Reader:
    """How one SDK's calls look.

    Attributes:
        provider: The provider (`gen_ai.provider.name`) of a client or call, given what `server`
            found too.
        server: The base URL a client or call talks to (for `server.address` / `server.port`).
        content: The request's content attributes (`input`, `system`, `tools`) in the conventions'
            structure (`_messages.openai_request` / `anthropic_request`).
        skipped_request: Request arguments that are content or SDK plumbing, never attributes.
        response: Reads a whole response into a `Call` (id, model, usage, finish reasons, output).
        chunk: Reads one streamed chunk into a `Call`; runs per chunk, so it must be cheap.
        span_provider: The `<provider>` of span names and `massgen.backend`, when it differs.
        positional: The names of the parameters an entry point takes positionally too, in order
            (`litellm.completion(model, messages, ...)`), so that they are read like keywords.
    """

    provider: Callable[[Any, Mapping[str, Any], Any], str]
    server: Callable[[Any, Mapping[str, Any]], Any]
    content: Callable[[Mapping[str, Any]], dict[str, Any]]
    skipped_request: frozenset[str]
    response: Callable[[Call, Any], None]
    chunk: Callable[[Call, Any], None]
    span_provider: str | None = None
    positional: tuple[str, ...] = ()
    options: Options = field(default_factory=Options)


class Call:
    """One call: its span, and what the response (or stream) said."""

    def __init__(self, reader: Reader, instance: Any, kwargs: Mapping[str, Any]) -> None:
        self.reader = reader
        self.read_chunk = reader.chunk
        self.options = reader.options
        self.capture = capture_enabled(self.options.capture_content)
        server = reader.server(instance, kwargs)  # read once: the SDK's property costs a call
        self.provider = reader.provider(instance, kwargs, server)
        self.model = str(kwargs.get("model") or "")
        self.stream = kwargs.get("stream") is True
        self.usage: TokenUsage | None = None
        self.cost: float | None = None
        self.response_id: str | None = None
        self.response_model: str | None = None
        self.finish_reasons: list[str] = []
        self.output = Output()
        self.extra: dict[str, Any] = {}  # provider-specific response attributes
        self.chunks = 0
        self.last_chunk = False  # set by a reader on the chunk after which nothing counts
        self.started = time.perf_counter()
        self.first_chunk: float | None = None  # when the first chunk came
        self.done = False
        self._entered: contextvars.Token[Call | None] | None = None  # while the SDK call runs
        self._attached: object = None
        # Usage goes to the rounds and sessions around the call, wherever the stream is read.
        self.sinks = current_sinks()
        name, attrs = self._start_attributes(kwargs, server)
        self.span: Span | NoOpSpan = get_tracer(TRACER_NAME).start_span(name, attrs, kind=SpanKind.CLIENT)
        pending = pending_llm_span.get()
        # A framework's own prices (MassGen's) rank after the provider's and the user's.
        self.framework_pricing = pending.cost_calculator if pending is not None else None
        pricing.prepare()  # the default price table loads while the call runs
        _http_retries.install(current_call.get)
        if pending is not None:  # the framework's handle annotates the span that took its place
            pending.spans.append(self.span)
        otel_span = self.span.otel_span
        self.otel_span: trace.Span | None = otel_span

    def _start_attributes(self, kwargs: Mapping[str, Any], server: Any) -> tuple[str, dict[str, Any]]:
        backend = self.reader.span_provider or self.provider
        attrs: dict[str, Any] = {
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OP_CHAT,
            semconv.GEN_AI_PROVIDER_NAME: self.provider,
            semconv.GEN_AI_REQUEST_MODEL: self.model,
            semconv.MASSGEN_BACKEND: backend,
        }
        address, port = _server_of(server)
        if address is not None:
            attrs[semconv.SERVER_ADDRESS] = address
            attrs[semconv.SERVER_PORT] = port
        if self.stream:
            attrs[semconv.GEN_AI_REQUEST_STREAM] = True
        conversation = current_conversation_id()
        if conversation is not None:
            attrs[semconv.GEN_AI_CONVERSATION_ID] = conversation
        attrs.update(request_attributes(kwargs, self.reader.skipped_request))
        result_ids = tool_result_ids(kwargs.get("messages"))
        if result_ids:
            attrs[semconv.MASTRACE_REQUEST_TOOL_CALL_IDS] = result_ids
        if self.capture:
            content = self.reader.content(kwargs)
            if content["input"]:  # none from messages given as an iterator: the SDK's to read
                attrs[semconv.GEN_AI_INPUT_MESSAGES] = content["input"]
            if "system" in content:
                attrs[semconv.GEN_AI_SYSTEM_INSTRUCTIONS] = content["system"]
            if "tools" in content:
                attrs[semconv.GEN_AI_TOOL_DEFINITIONS] = content["tools"]
        pending = pending_llm_span.get()
        if pending is None:
            template = semconv.SPAN_LLM_STREAM if self.stream else semconv.SPAN_LLM_CHAT
            return template.format(provider=backend), attrs
        pending.claimed += 1
        return pending.name, {**pending.attributes, **attrs}

    def running(self) -> Call:
        """While the SDK sends the request (`with call.running():`): the call is current (span and
        `current_call`); a failure ends it with the error."""
        return self

    def __enter__(self) -> Call:
        # A class rather than a generator-based context manager: this runs around every SDK call.
        self._entered = current_call.set(self)
        span = self.otel_span
        self._attached = attach_span(span) if span is not None else None
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        try:
            if exc is not None:
                self.end(exc)
        finally:
            if self._attached is not None:
                otel_context.detach(self._attached)  # type: ignore[arg-type]
            if self._entered is not None:
                current_call.reset(self._entered)

    def add_usage(self, usage: Any) -> None:
        """Take a usage object or dict from the response; counts reported in parts are merged."""
        fields = getattr(usage, "__dict__", None)
        if isinstance(fields, dict) and not isinstance(usage, Mapping):
            # A pydantic model as a dict: reading a field it lacks raises inside the model, slowly.
            usage = {**fields, **(getattr(usage, "__pydantic_extra__", None) or {})}
        found = TokenUsage.from_provider(usage, provider=self.provider)
        if found is not None:
            self.usage = found if self.usage is None else self.usage.merge_max(found)
        cost = field_of(usage, "cost")
        if isinstance(cost, (int, float)) and not isinstance(cost, bool):
            self.cost = float(cost)

    def on_response(self, response: Any) -> None:
        with handle_internal_errors("llm response"):
            self.reader.response(self, response)

    def take(self, chunk: Any) -> Any:
        """Read one chunk of the stream (runs per chunk: one frame, plain attribute reads). The span
        ends at the chunk after which nothing counts: a consumer that stops there, without reading
        the stream's end marker, still ends it."""
        if self.done:
            return chunk
        self.chunks += 1
        if self.first_chunk is None:  # set on the span with the rest when it ends: one SDK call
            self.first_chunk = time.perf_counter()
        try:
            self.read_chunk(self, chunk)
        except Exception as exc:
            log_internal_error("llm chunk", exc)
        if self.last_chunk:
            self.end()
        return chunk

    def cut_off(self, reason: str) -> None:
        """End the call now, from outside it: what it was part of ended while it ran (a round cut
        short by an interrupt or a timeout). Its stream is not read any further: error status with
        `reason`, and its usage unknown unless it came already."""
        if self.done:
            return
        try:
            self.span.set_status("error", f"cut off: {reason}")
        except Exception as exc:
            log_internal_error("llm cut off", exc)
        self.end()

    def end(self, error: BaseException | None = None) -> None:
        if self.done:
            return
        self.done = True
        _IN_FLIGHT.discard(self)
        attrs: dict[str, Any] = {}
        try:  # not `handle_internal_errors`: a generator context manager costs more than this
            attrs = self._end_attributes(error)
            usage = self.usage
            if usage is not None:
                usage = self._priced(usage, attrs)
                attrs.update(usage_attributes(usage, massgen=False))
                attrs[semconv.MASTRACE_USAGE] = usage.to_dict()
            if (usage is None or (self.stream and not self.finish_reasons)) and not _refused(error):
                # Cut off before the usage came (or none was sent): unknown, not 0, and the rounds
                # and sessions around it say so.
                attrs[semconv.MASTRACE_USAGE_UNKNOWN] = True
                units: dict[str, int | float] = {UNCOUNTED_CALLS: 1}
                usage = (
                    TokenUsage(provider=self.provider, units=units)
                    if usage is None
                    else replace(usage, units={**usage.units, **units})
                )
            if usage is not None:
                credit_usage(usage, None, chain=self.sinks)
        except Exception as exc:
            log_internal_error("llm end", exc)
        self.span._end_with(attrs, error)  # every attribute of the end in one call into the SDK

    def _end_attributes(self, error: BaseException | None) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        # Set at the end with the rest; a value the SDK's or the framework's own tracing set on this
        # span meanwhile (after the first chunk, when it saw its first content) is theirs to keep.
        if self.first_chunk is not None and not self._has(semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK):
            attrs[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = self.first_chunk - self.started
        attrs.update(self.extra)
        if self.stream:
            attrs[semconv.MASTRACE_STREAM_CHUNKS] = self.chunks
            attrs[semconv.MASTRACE_STREAM_COMPLETED] = error is None and bool(self.finish_reasons)
        if error is not None and not isinstance(error, GeneratorExit) and not self._has(semconv.ERROR_TYPE):
            attrs[semconv.ERROR_TYPE] = type(error).__qualname__
        if self.response_id:
            attrs[semconv.GEN_AI_RESPONSE_ID] = self.response_id
        if self.response_model:
            attrs[semconv.GEN_AI_RESPONSE_MODEL] = self.response_model
        if self.finish_reasons:
            attrs[semconv.GEN_AI_RESPONSE_FINISH_REASONS] = tuple(self.finish_reasons)
        if self.output.choices:
            calls = self.output.tool_calls()
            if calls:  # ids and names are not content: kept with capture off
                attrs[semconv.MASTRACE_RESPONSE_TOOL_CALLS] = calls
            if self.capture:
                attrs[semconv.GEN_AI_OUTPUT_MESSAGES] = self.output.messages(failed=error is not None)
        return attrs

    def _has(self, key: str) -> bool:
        attributes = getattr(self.otel_span, "attributes", None)
        return bool(attributes) and key in attributes  # type: ignore[operator]

    def _priced(self, usage: TokenUsage, attrs: dict[str, Any]) -> TokenUsage:
        """`usage` with its cost decided; the cost's attributes go into `attrs`."""
        model = self.response_model or self.model
        priced = pricing.price_call(
            usage,
            model,
            provider=self.provider,
            reported=self.cost,
            calculator=self.options.cost_calculator,
            framework=self.framework_pricing,
        )
        attrs.update(priced.attributes(model))
        return priced.usage


def _refused(error: BaseException | None) -> bool:
    """Whether the call failed with an HTTP error status (the provider refused it: no usage to miss)."""
    return isinstance(getattr(error, "status_code", None), int)


def _named(reader: Reader, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Mapping[str, Any]:
    """The call's arguments by name (the reader's positional parameters named, keywords as they are)."""
    if not args or not reader.positional:
        return kwargs
    return {**dict(zip(reader.positional, args, strict=False)), **kwargs}


_IN_FLIGHT: weakref.WeakSet[Call] = weakref.WeakSet()
"""The calls started and not ended yet (`cut_off_calls` ends those of a round cut short)."""


def start_call(reader: Reader, instance: Any, kwargs: Mapping[str, Any]) -> Call | None:
    """A traced call, or None when it is not to be traced (inside another traced call, no-op, error)."""
    if current_call.get() is not None:
        return None
    try:  # not `handle_internal_errors`: a generator context manager costs more than this
        call = Call(reader, instance, kwargs)
    except Exception as exc:
        log_internal_error("llm start", exc)
        return None
    if call.span is NOOP_SPAN:
        return None
    _IN_FLIGHT.add(call)
    return call


def cut_off_calls(sink: object, reason: str) -> int:
    """End now the calls in flight whose usage goes to `sink` (a round's accumulator), because what
    they ran in ended from outside (`AgentRound.cut_short`): each ends inside it, says it was cut
    off, and its usage (unknown, if it had not come yet) reaches the round and its session before
    they end. Returns how many."""
    cut = 0
    for call in list(_IN_FLIGHT):
        if not call.done and any(s is sink for s in call.sinks):
            call.cut_off(reason)
            cut += 1
    return cut


def sync_wrapper(reader: Reader) -> Callable[..., Any]:
    """A `wrapt` wrapper for an SDK's synchronous `create`."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call = start_call(reader, instance, _named(reader, args, kwargs))
        if call is None:
            return wrapped(*args, **kwargs)
        with call.running():
            result = wrapped(*args, **kwargs)
        if call.stream:
            return SyncStream(result, call)
        call.on_response(result)
        call.end()
        return result

    return wrapper


def async_wrapper(reader: Reader) -> Callable[..., Any]:
    """A `wrapt` wrapper for an SDK's asynchronous `create`."""

    async def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call = start_call(reader, instance, _named(reader, args, kwargs))
        if call is None:
            return await wrapped(*args, **kwargs)
        with call.running():
            result = await wrapped(*args, **kwargs)
        if call.stream:
            return AsyncStream(result, call)
        call.on_response(result)
        call.end()
        return result

    return wrapper


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
        self.wrap_with(sync_owner, sync_name, sync_wrapper(reader))
        self.wrap_with(async_owner, async_name, async_wrapper(reader))

    def wrap_with(self, owner: Any, name: str, wrapper: Callable[..., Any]) -> None:
        """Wrap one function or method with a `wrapt` wrapper."""
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
