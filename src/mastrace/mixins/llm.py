"""`LLMBackendMixin`: one `llm.<provider>.stream` span covering a whole streamed LLM call.


Example:
    >>> import mastrace
    >>> class Backend(mastrace.LLMBackendMixin):
    ...     provider = "openai"
    >>> chunks = [{"delta": "Hi"}, {"usage": {"prompt_tokens": 9, "completion_tokens": 2}}]
    >>> [c.get("delta") for c in Backend().llm_stream("gpt-4o", chunks, temperature=0.2)]
    ['Hi', None]
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import AsyncGenerator, AsyncIterable, Generator, Iterable, Mapping
from typing import Any

from opentelemetry.trace import SpanKind

from .. import pricing, semconv
from ..exceptions import ConfigError
from ..tracing._errors import handle_internal_errors, log_internal_error
from ..tracing._genai import capture_enabled, current_conversation_id, request_attributes
from ..tracing._snapshot import dumps_json
from ..tracing._streams import TracedAsyncGenerator, TracedGenerator
from ..tracing._tracer import NOOP_SPAN, NoOpSpan, Span, valid_attributes
from ..usage import CostCalculator, TokenUsage, credit_usage, field_of, usage_attributes
from .coordination import MIXIN_TRACER, put_own, texts
from .coordination import VALID_TYPES as _VALID_TYPES
from .gather import UsageTrackableMixin

__all__ = ["LLMBackendMixin"]

_SKIPPED = frozenset({"messages", "tools", "stream"})


class _StreamState:
    """What one streamed call has seen so far."""

    def __init__(
        self,
        backend: LLMBackendMixin,
        model: str,
        attrs: dict[str, Any],
        name: str,
        user: dict[str, Any] | None = None,
    ) -> None:
        self.backend = backend
        self.model = model
        self.attrs = attrs  # the call's own attributes, valid as they are
        self.user = user  # the caller's, coerced
        self.name = name
        self.span: Span | NoOpSpan = NOOP_SPAN
        self.started = 0.0
        self.chunks = 0
        self.usage: TokenUsage | None = None
        self.response_model: str | None = None
        self.response_id: str | None = None
        self.first_chunk: float | None = None
        self.finished = False
        self.end_attrs: Mapping[str, Any] | None = None
        self.provider: str | None = getattr(backend, "provider", None)
        # Whether the backend reads usage as `LLMBackendMixin.extract_usage` does (not overridden).
        self.plain_usage = type(backend).extract_usage is LLMBackendMixin.extract_usage

    def make_span(self) -> Span | NoOpSpan:
        self.span = MIXIN_TRACER._span(self.name, self.attrs, self.user, kind=SpanKind.CLIENT)
        self.started = time.perf_counter()
        return self.span

    def on_chunk(self, chunk: Any) -> None:
        self.chunks += 1
        if self.chunks == 1:  # set with the rest as the stream ends: one call into the SDK, not two
            self.first_chunk = time.perf_counter() - self.started
        # try/except rather than `handle_internal_errors`: a generator context manager costs more
        # than the rest of this, on every chunk.
        try:
            if self.plain_usage and type(chunk) is dict:  # `extract_usage` inlined for the usual chunk
                usage = chunk.get("usage")
                if usage is None:
                    message = chunk.get("message")
                    if message is not None:
                        usage = field_of(message, "usage")
                found = None if usage is None else TokenUsage.from_provider(usage, provider=self.provider)
                model = chunk.get("model")
            else:
                found = self.backend.extract_usage(chunk)
                model = field_of(chunk, "model")
            if found is not None:
                # Providers report cumulative counts (Anthropic splits them over two events).
                self.usage = found if self.usage is None else self.usage.merge_max(found)
            if isinstance(model, str):
                self.response_model = model
            if self.chunks == 1:
                response_id = field_of(chunk, "id")
                if isinstance(response_id, str):
                    self.response_id = response_id
        except Exception as exc:
            log_internal_error("llm stream chunk", exc)

    def finish(self) -> Mapping[str, Any] | None:
        """Price and credit the call's usage (once); returns what the call learnt, for its span.

        Called by the body as it ends and by the stream wrapper before it ends the span (which puts
        these attributes on it with its own, in one call into the SDK): the second call returns the
        same attributes and does nothing else.
        """
        if self.finished:
            return self.end_attrs
        self.finished = True
        try:
            # Built valid as they are (the span sets them without a coercion pass), unless a value
            # read from the chunks or the pricing is not a plain string or number: then coerced.
            attrs: dict[str, Any] = {}
            plain = True
            if self.first_chunk is not None:
                attrs[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = self.first_chunk
            if self.response_model is not None:
                attrs[semconv.GEN_AI_RESPONSE_MODEL] = self.response_model
                plain = type(self.response_model) is str
            if self.response_id is not None:
                attrs[semconv.GEN_AI_RESPONSE_ID] = self.response_id
                plain = plain and type(self.response_id) is str
            usage = self.usage
            json: dict[str, str] | None = None
            if usage is not None:
                priced = self.backend._mastrace_priced(usage, self.response_model or self.model)
                usage = priced.usage
                for key, value in priced.attributes(self.response_model or self.model).items():
                    if type(value) is list and texts(value) is not None:
                        value = tuple(value)
                    elif type(value) not in _VALID_TYPES:
                        plain = False
                    attrs[key] = value
                attrs.update(usage_attributes(usage, massgen=False))  # counts: ints
                record = usage.to_dict()
                if plain:
                    json = {semconv.MASTRACE_USAGE: dumps_json(record)}
                    attrs.update(json)
                else:
                    attrs[semconv.MASTRACE_USAGE] = record
            self.end_attrs = valid_attributes(attrs, json) if plain else attrs
            if usage is not None:
                if isinstance(self.backend, UsageTrackableMixin):
                    self.backend.record_usage(usage)
                else:
                    credit_usage(usage, self.backend)
        except Exception as exc:
            log_internal_error("llm stream end", exc)
        return self.end_attrs


def _sync_body(stream: Iterable[Any], state: _StreamState) -> Generator[Any, None, None]:
    iterator = iter(stream)
    try:
        for chunk in iterator:
            state.on_chunk(chunk)
            yield chunk
    except GeneratorExit:
        close = getattr(iterator, "close", None)
        if callable(close):
            close()
        raise
    finally:
        state.finish()


async def _async_body(stream: AsyncIterable[Any], state: _StreamState) -> AsyncGenerator[Any, None]:
    iterator = stream.__aiter__()
    try:
        async for chunk in iterator:
            state.on_chunk(chunk)
            yield chunk
    except GeneratorExit:
        aclose = getattr(iterator, "aclose", None)
        if callable(aclose):
            await aclose()
        raise
    finally:
        state.finish()


def _content(provider: str, request: dict[str, Any]) -> dict[str, Any]:
    """The request's content attributes (messages, system instructions, tool definitions), read
    as the SDK integrations read them: Anthropic's shape for `anthropic`, OpenAI's otherwise."""
    from ..tracing._messages import anthropic_request, openai_request

    content = anthropic_request(request) if provider == "anthropic" else openai_request(request)
    attrs: dict[str, Any] = {}
    if content["input"]:
        attrs[semconv.GEN_AI_INPUT_MESSAGES] = content["input"]
    if "system" in content:
        attrs[semconv.GEN_AI_SYSTEM_INSTRUCTIONS] = content["system"]
    if "tools" in content:
        attrs[semconv.GEN_AI_TOOL_DEFINITIONS] = content["tools"]
    return attrs


class LLMBackendMixin:
    """Adds `llm.<provider>.stream` spans to an LLM backend. The class must set `provider`.

    Attributes:
        provider: The provider name, e.g. `"openai"`, `"anthropic"`, `"openrouter"`.
        cost_calculator: Prices calls whose usage carries no cost (e.g. `mastrace.StaticPricing`).
    """

    provider: str
    cost_calculator: CostCalculator | None = None

    def llm_stream(self, model: str, stream: Iterable[Any] | AsyncIterable[Any], **request: Any) -> Any:
        """Wrap a streamed response; returns a generator (async for an async iterable) of the same chunks.

        Args:
            model: The requested model (`gen_ai.request.model`).
            stream: The provider's iterable or async iterable of chunks.
            **request: Request parameters: those the conventions name (`max_tokens`,
                `temperature`, `stop`, ...) become their `gen_ai.request.*` attributes, other
                primitive ones `mastrace.request.<name>`. With content capture on
                (`configure(capture_content=True)`), `messages`, `system` and `tools` are
                recorded as `gen_ai.input.messages`, `gen_ai.system_instructions` and
                `gen_ai.tool.definitions`, in the conventions' JSON structure.
        """
        provider = getattr(self, "provider", None)
        if not provider:
            raise ConfigError(f"{type(self).__name__} uses LLMBackendMixin but has no provider")
        # The call's own attributes, valid as they are (no coercion pass); the request's parameters
        # and content, and what was given that is not a plain string, go through it.
        attrs: dict[str, Any] = {semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OP_CHAT}
        user: dict[str, Any] = {}
        plain = type(provider) is str  # (`put_own` with the usual case first: fewer calls)
        if plain:
            attrs[semconv.GEN_AI_PROVIDER_NAME] = provider
        else:
            put_own(attrs, user, semconv.GEN_AI_PROVIDER_NAME, provider)
        if type(model) is str:
            attrs[semconv.GEN_AI_REQUEST_MODEL] = model
        else:
            put_own(attrs, user, semconv.GEN_AI_REQUEST_MODEL, model)
        attrs[semconv.GEN_AI_REQUEST_STREAM] = True
        if plain:
            attrs[semconv.MASSGEN_BACKEND] = provider
        else:
            put_own(attrs, user, semconv.MASSGEN_BACKEND, provider)
        if request:  # converted to the conventions' types: valid as they are, but for lists and subclasses
            for key, value in request_attributes(request, _SKIPPED).items():
                put_own(attrs, user, key, value)
        conversation = current_conversation_id()
        if type(conversation) is str:
            attrs[semconv.GEN_AI_CONVERSATION_ID] = conversation
        elif conversation is not None:
            put_own(attrs, user, semconv.GEN_AI_CONVERSATION_ID, conversation)
        if capture_enabled():
            with handle_internal_errors("llm stream content"):
                user.update(_content(provider, request))
        name = semconv.SPAN_LLM_STREAM.format(provider=provider)
        state = _StreamState(self, model, attrs, name, user or None)
        # The body runs in a copy of the caller's context: the span nests under the caller's span,
        # and usage reaches the caller's round even when other tasks pull the chunks.
        ctx = contextvars.copy_context()
        if hasattr(stream, "__aiter__"):
            return TracedAsyncGenerator(_async_body(stream, state), ctx, state.make_span, state.finish)  # type: ignore[arg-type]
        return TracedGenerator(_sync_body(stream, state), ctx, state.make_span, state.finish)

    def extract_usage(self, chunk: Any) -> TokenUsage | None:
        """Read the token usage a chunk reports, or None. Override for other chunk shapes.

        Understands a `usage` dict or object (OpenAI `prompt_tokens`/`completion_tokens`,
        Anthropic `input_tokens`/`output_tokens`), also under `message` (Anthropic `message_start`).
        """
        usage = field_of(chunk, "usage")
        if usage is None:
            usage = field_of(field_of(chunk, "message"), "usage")
        return TokenUsage.from_provider(usage, provider=getattr(self, "provider", None))

    def _mastrace_priced(self, usage: TokenUsage, model: str) -> pricing.Priced:
        """Price a call (reported cost, `cost_calculator`, the default table, else unknown)."""
        return pricing.price_call(
            usage,
            model,
            provider=getattr(self, "provider", None),
            reported=usage.cost or None,
            calculator=self.cost_calculator,
        )
