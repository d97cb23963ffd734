"""`LLMBackendMixin`: the `llm.<provider>.stream` span, usage extraction, pricing and crediting."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from mastrace import (
    AgentMixin,
    ConfigError,
    LLMBackendMixin,
    StaticPricing,
    TokenUsage,
    UsageTrackableMixin,
    semconv,
)
from mastrace.testing import CapturedSpans, capture_spans

OPENAI_CHUNKS: list[dict[str, Any]] = [
    {"model": "gpt-4o-2024-08-06", "choices": [{"delta": {"content": "Hel"}}]},
    {"model": "gpt-4o-2024-08-06", "choices": [{"delta": {"content": "lo"}}]},
    {"model": "gpt-4o-2024-08-06", "choices": [], "usage": {"prompt_tokens": 42, "completion_tokens": 7}},
]


class Backend(LLMBackendMixin):
    provider = "openai"


class Agent(AgentMixin):
    agent_id = "agent_a"


class TrackedBackend(LLMBackendMixin, UsageTrackableMixin):
    provider = "anthropic"


class CustomBackend(LLMBackendMixin):
    provider = "custom"

    def extract_usage(self, chunk: Any) -> TokenUsage | None:
        return TokenUsage(input_tokens=chunk["in"], output_tokens=chunk["out"]) if "in" in chunk else None


async def _aiter(items: list[Any]) -> AsyncIterator[Any]:
    for item in items:
        await asyncio.sleep(0)
        yield item


def test_sync_stream_yields_the_same_chunks_in_one_span(mastrace_spans: CapturedSpans) -> None:
    """The wrapper yields every chunk unchanged, inside one `llm.<provider>.stream` span under the round."""
    with Agent().agent_round(0):
        chunks = list(Backend().llm_stream("gpt-4o", iter(OPENAI_CHUNKS), max_tokens=256, temperature=0.3))
    assert chunks == OPENAI_CHUNKS
    span = mastrace_spans.one("llm.openai.stream")
    attrs = mastrace_spans.attributes("llm.openai.stream")
    assert mastrace_spans.parent_of(span) is mastrace_spans.one("agent.agent_a.round_0")
    assert attrs[semconv.GEN_AI_OPERATION_NAME] == "chat" and attrs[semconv.GEN_AI_PROVIDER_NAME] == "openai"
    assert attrs[semconv.GEN_AI_REQUEST_MODEL] == "gpt-4o"
    assert (
        attrs[semconv.GEN_AI_REQUEST_MAX_TOKENS] == 256 and attrs[semconv.GEN_AI_REQUEST_TEMPERATURE] == 0.3
    )
    assert attrs[semconv.GEN_AI_RESPONSE_MODEL] == "gpt-4o-2024-08-06"
    assert attrs[semconv.MASTRACE_STREAM_CHUNKS] == 3 and attrs[semconv.MASTRACE_STREAM_COMPLETED] is True
    assert attrs[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] >= 0.0
    assert span.status.status_code is StatusCode.UNSET


def test_usage_from_the_final_chunk_is_on_the_span(mastrace_spans: CapturedSpans) -> None:
    """The call's token usage goes to gen_ai.usage.* and mastrace.usage on the stream span."""
    list(Backend().llm_stream("gpt-4o", OPENAI_CHUNKS))
    attrs = mastrace_spans.attributes("llm.openai.stream")
    assert attrs[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 42 and attrs[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 7
    assert attrs[semconv.MASTRACE_USAGE]["total_tokens"] == 49
    assert semconv.MASSGEN_USAGE_INPUT not in attrs  # massgen.usage.* belongs to rounds


def test_async_stream_is_wrapped_the_same_way(mastrace_spans: CapturedSpans) -> None:
    """An async iterable gives an async generator with the same span and usage."""

    async def main() -> list[Any]:
        with Agent().agent_round(0):
            return [c async for c in Backend().llm_stream("gpt-4o", _aiter(OPENAI_CHUNKS))]

    assert asyncio.run(main()) == OPENAI_CHUNKS
    attrs = mastrace_spans.attributes("llm.openai.stream")
    assert attrs[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 42 and attrs[semconv.MASTRACE_STREAM_CHUNKS] == 3
    assert mastrace_spans.attributes("agent.agent_a.round_0")[semconv.MASSGEN_USAGE_INPUT] == 42


def test_usage_objects_are_read_like_dicts(mastrace_spans: CapturedSpans) -> None:
    """SDK chunk objects with a `usage` attribute are understood."""
    chunk = SimpleNamespace(usage=SimpleNamespace(prompt_tokens=3, completion_tokens=2))
    list(Backend().llm_stream("gpt-4o", [chunk]))
    assert mastrace_spans.attributes("llm.openai.stream")[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 3


def test_anthropic_usage_split_over_two_events_is_combined(mastrace_spans: CapturedSpans) -> None:
    """`message_start` input counts and `message_delta` output counts make one usage."""
    events = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 25, "output_tokens": 1}}},
        {"type": "content_block_delta", "delta": {"text": "Hi"}},
        {"type": "message_delta", "usage": {"output_tokens": 15}},
    ]
    list(TrackedBackend().llm_stream("claude-sonnet-4-5", events))
    attrs = mastrace_spans.attributes("llm.anthropic.stream")
    assert (attrs[semconv.GEN_AI_USAGE_INPUT_TOKENS], attrs[semconv.GEN_AI_USAGE_OUTPUT_TOKENS]) == (25, 15)


def test_extract_usage_can_be_overridden(mastrace_spans: CapturedSpans) -> None:
    """A backend reads its own chunk shape by overriding extract_usage."""
    list(CustomBackend().llm_stream("m", [{"text": "a"}, {"in": 8, "out": 4}]))
    assert mastrace_spans.attributes("llm.custom.stream")[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4


def test_cost_calculator_prices_the_call_and_the_round(mastrace_spans: CapturedSpans) -> None:
    """With a cost calculator, the call's cost is on the stream span and in the round's usage."""
    backend = Backend()
    backend.cost_calculator = StaticPricing({"gpt-4o": {"input": 2.5, "output": 10.0}})
    with Agent().agent_round(0):
        list(backend.llm_stream("gpt-4o", OPENAI_CHUNKS))
    expected = (42 * 2.5 + 7 * 10.0) / 1_000_000
    assert mastrace_spans.attributes("llm.openai.stream")[semconv.MASTRACE_USAGE]["cost"] == pytest.approx(
        expected
    )
    assert mastrace_spans.attributes("agent.agent_a.round_0")[semconv.MASSGEN_USAGE_COST] == pytest.approx(
        expected
    )


def test_usage_trackable_backend_counts_each_call_once(mastrace_spans: CapturedSpans) -> None:
    """A backend that is also UsageTrackable records the call once, in its total and in the round."""
    backend = TrackedBackend()
    with Agent().agent_round(0) as rnd:
        list(backend.llm_stream("m", [{"usage": {"input_tokens": 9, "output_tokens": 3}}]))
    assert backend.gather_usage().input_tokens == 9  # type: ignore[attr-defined]
    assert rnd.usage.input_tokens == 9  # type: ignore[attr-defined]


def test_failing_stream_sets_error_status_and_re_raises(mastrace_spans: CapturedSpans) -> None:
    """An exception from the provider's stream propagates and marks the span as failed."""

    def broken() -> Iterator[dict[str, Any]]:
        yield {"delta": "a"}
        raise TimeoutError("stream stalled")

    with pytest.raises(TimeoutError):
        list(Backend().llm_stream("gpt-4o", broken()))
    span = mastrace_spans.one("llm.openai.stream")
    assert span.status.status_code is StatusCode.ERROR
    assert mastrace_spans.attributes("llm.openai.stream")[semconv.MASTRACE_STREAM_COMPLETED] is False


def test_early_break_ends_the_span_and_closes_the_provider_stream(mastrace_spans: CapturedSpans) -> None:
    """Leaving the loop early ends the span as incomplete and closes the wrapped stream."""
    closed: list[bool] = []

    def provider() -> Iterator[dict[str, Any]]:
        try:
            yield from OPENAI_CHUNKS
        finally:
            closed.append(True)

    stream = Backend().llm_stream("gpt-4o", provider())
    for _chunk in stream:
        break
    stream.close()
    assert closed == [True]
    attrs = mastrace_spans.attributes("llm.openai.stream")
    assert attrs[semconv.MASTRACE_STREAM_COMPLETED] is False and attrs[semconv.MASTRACE_STREAM_CHUNKS] == 1


def test_a_stream_end_reaches_the_sdk_in_one_call(
    mastrace_spans: CapturedSpans, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the call learnt, the stream's counts and `logfire.json_schema` go onto the span together."""
    from opentelemetry.sdk import trace as sdk_trace

    calls: list[list[str]] = []
    real_many, real_one = sdk_trace.Span.set_attributes, sdk_trace.Span.set_attribute

    def many(self: Any, attributes: Any) -> None:
        if self.name == "llm.openai.stream":
            calls.append(sorted(attributes))
        real_many(self, attributes)

    def one(self: Any, key: str, value: Any) -> None:
        if self.name == "llm.openai.stream":
            calls.append([key])
        real_one(self, key, value)

    monkeypatch.setattr(sdk_trace.Span, "set_attributes", many)
    monkeypatch.setattr(sdk_trace.Span, "set_attribute", one)
    with Agent().agent_round(0):
        chunks = list(Backend().llm_stream("gpt-4o", OPENAI_CHUNKS))
    assert len(chunks) == 3
    assert len(calls) == 1
    assert {
        semconv.GEN_AI_USAGE_INPUT_TOKENS,
        semconv.MASTRACE_USAGE,
        semconv.MASTRACE_STREAM_CHUNKS,
        semconv.MASTRACE_STREAM_COMPLETED,
        semconv.LOGFIRE_JSON_SCHEMA,
    } <= set(calls[0])
    attrs = mastrace_spans.attributes("llm.openai.stream")
    assert attrs[semconv.MASTRACE_STREAM_CHUNKS] == 3 and attrs[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 42


def test_stream_span_ends_when_the_consumer_drops_it_unfinished(mastrace_spans: CapturedSpans) -> None:
    """A stream dropped after one chunk ends its span (incomplete) with what the call learnt so far."""
    import gc

    stream = Backend().llm_stream("gpt-4o", iter(OPENAI_CHUNKS))
    next(stream)
    del stream
    gc.collect()
    attrs = mastrace_spans.attributes("llm.openai.stream")
    assert attrs[semconv.MASTRACE_STREAM_COMPLETED] is False and attrs[semconv.MASTRACE_STREAM_CHUNKS] == 1
    assert attrs[semconv.GEN_AI_RESPONSE_MODEL] == "gpt-4o-2024-08-06"


def test_messages_are_not_recorded_as_request_attributes(mastrace_spans: CapturedSpans) -> None:
    """Only primitive request parameters become attributes; messages and tools do not."""
    list(Backend().llm_stream("gpt-4o", [], messages=[{"role": "user", "content": "hi"}], stop=["\n"]))
    attrs = mastrace_spans.attributes("llm.openai.stream")
    assert "gen_ai.request.messages" not in attrs
    assert attrs["gen_ai.request.stop_sequences"] == ("\n",)


@pytest.mark.parametrize("name", ["system", "instructions", "input", "prompt", "suffix", "contents"])
def test_content_given_as_a_request_parameter_is_never_an_attribute(
    mastrace_spans: CapturedSpans, name: str
) -> None:
    """A system prompt, instructions or input passed as a plain request parameter is content: with
    capture off it is on no attribute of the span (other parameters still are)."""
    secret = "You are the private assistant of Jane Roe."
    list(
        Backend().llm_stream("gpt-4o", iter(OPENAI_CHUNKS), **{name: secret, "user": "u-1", "max_tokens": 9})
    )
    attrs = mastrace_spans.attributes("llm.openai.stream")
    assert not [key for key, value in attrs.items() if secret in str(value)]
    assert attrs["mastrace.request.user"] == "u-1" and attrs["gen_ai.request.max_tokens"] == 9


def test_backend_without_provider_is_refused() -> None:
    """Using LLMBackendMixin without a provider raises ConfigError."""
    with pytest.raises(ConfigError, match="provider"):
        LLMBackendMixin().llm_stream("m", [])


def test_usage_reaches_the_round_when_the_consumer_breaks_out_of_an_async_stream(
    mastrace_spans: CapturedSpans,
) -> None:
    """Stopping right after the usage chunk still credits the round and annotates the LLM span."""

    async def provider_stream() -> AsyncIterator[dict[str, Any]]:
        yield {"delta": "hi"}
        yield {"usage": {"prompt_tokens": 10, "completion_tokens": 5}}
        yield {"done": True}

    async def main() -> Any:
        async with Agent().agent_round(1) as rnd:
            async for chunk in Backend().llm_stream("gpt-4o", provider_stream()):
                if "usage" in chunk:
                    break
        return rnd.usage

    usage = asyncio.run(main())
    assert (usage.input_tokens, usage.output_tokens) == (10, 5)
    llm = mastrace_spans.one("llm.openai.stream").attributes or {}
    assert llm["gen_ai.usage.input_tokens"] == 10
    round_attrs = mastrace_spans.one("agent.agent_a.round_1").attributes or {}
    assert round_attrs["massgen.usage.input"] == 10


def test_with_capture_on_the_mixin_records_the_messages() -> None:
    """`llm_stream(..., messages=[...])` with content capture on records the messages, the system
    instructions and the tool definitions as the SDK integrations do; with capture off, none."""
    tools = [{"type": "function", "function": {"name": "vote", "parameters": {"type": "object"}}}]
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 6x7?"}]
    with capture_spans(capture_content=True) as captured:
        list(Backend().llm_stream("gpt-4o", iter(OPENAI_CHUNKS), messages=messages, tools=tools))
        list(
            TrackedBackend().llm_stream(
                "claude-x", [], system="Be brief.", messages=[{"role": "user", "content": "Hi"}]
            )
        )
        attrs = captured.attributes("llm.openai.stream")
        claude = captured.attributes("llm.anthropic.stream")
    assert attrs["gen_ai.input.messages"] == [
        {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
        {"role": "user", "parts": [{"type": "text", "content": "What is 6x7?"}]},
    ]
    assert attrs["gen_ai.tool.definitions"][0]["name"] == "vote"
    assert claude["gen_ai.system_instructions"] == [{"type": "text", "content": "Be brief."}]
    assert claude["gen_ai.input.messages"] == [{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}]
    with capture_spans(capture_content=False) as captured:
        list(Backend().llm_stream("gpt-4o", iter(OPENAI_CHUNKS), messages=messages))
        off = captured.attributes("llm.openai.stream")
    assert "gen_ai.input.messages" not in off
