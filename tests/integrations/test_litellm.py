"""`instrument_litellm()` with the real `litellm` package against the loopback OpenAI-compatible
server of `test_openai`: sync and async, streamed or not, errors, a stream abandoned half way,
LiteLLM's cost, and one span (and one usage credit) when `instrument_openai()` is on as well."""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from live_server import serving

# LiteLLM fetches its price table from the internet on import unless told to use its own copy, and
# warns (DeprecationWarning) while loading it.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import litellm

import mastrace
from mastrace.integrations.litellm import instrument_litellm, uninstrument_litellm
from mastrace.integrations.openai import instrument_openai, uninstrument_openai
from mastrace.testing import CapturedSpans, capture_spans

from .test_openai import COMPLETION_TOKENS, PROMPT_TOKENS, WORDS, Handler

# LiteLLM's own code calls deprecated pydantic methods; that is not ours to turn into errors.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serving(Handler, "/v1") as url:
        yield url


@pytest.fixture
def instrumented() -> Iterator[None]:
    assert instrument_litellm()
    yield
    uninstrument_litellm()


class Agent(mastrace.AgentMixin):
    agent_id = "agent_l"


def _call(url: str, model: str = "openai/gpt-x", **kwargs: Any) -> Any:
    return litellm.completion(
        model=model, messages=[{"role": "user", "content": "hi"}], api_base=url, api_key="sk-test", **kwargs
    )


def test_a_call_is_a_chat_span_with_usage_under_its_round(
    mastrace_spans: CapturedSpans, url: str, instrumented: None
) -> None:
    with Agent().agent_round(0):
        reply = _call(url, temperature=0.3)
    assert reply.choices[0].message.content == "".join(WORDS)
    attrs = mastrace_spans.attributes("llm.litellm.chat")
    assert attrs["gen_ai.request.model"] == "openai/gpt-x" and attrs["gen_ai.request.temperature"] == 0.3
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (
        PROMPT_TOKENS,
        COMPLETION_TOKENS,
    )
    assert "gen_ai.request.api_key" not in attrs and "gen_ai.request.api_base" not in attrs
    rnd = mastrace_spans.attributes("agent.agent_l.round_0")
    assert rnd["massgen.usage.input"] == PROMPT_TOKENS


def test_a_stream_is_one_span_with_time_to_first_chunk_and_usage(
    mastrace_spans: CapturedSpans, url: str, instrumented: None
) -> None:
    stream = _call(url, stream=True, stream_options={"include_usage": True})
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "".join(WORDS)
    attrs = mastrace_spans.attributes("llm.litellm.stream")
    assert attrs["mastrace.stream.completed"] is True and attrs["gen_ai.response.time_to_first_chunk"] > 0
    assert attrs["gen_ai.usage.input_tokens"] == PROMPT_TOKENS
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)


def test_async_calls_and_streams(mastrace_spans: CapturedSpans, url: str, instrumented: None) -> None:
    async def main() -> str:
        await litellm.acompletion(
            model="openai/gpt-x", messages=[{"role": "user", "content": "a"}], api_base=url, api_key="sk-test"
        )
        stream = await litellm.acompletion(
            model="openai/gpt-x",
            messages=[{"role": "user", "content": "b"}],
            api_base=url,
            api_key="sk-test",
            stream=True,
            stream_options={"include_usage": True},
        )
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    assert asyncio.run(main()) == "".join(WORDS)
    assert mastrace_spans.attributes("llm.litellm.chat")["gen_ai.usage.output_tokens"] == COMPLETION_TOKENS
    assert mastrace_spans.attributes("llm.litellm.stream")["gen_ai.usage.output_tokens"] == COMPLETION_TOKENS


def test_an_error_is_recorded_and_raised_unchanged(
    mastrace_spans: CapturedSpans, url: str, instrumented: None
) -> None:
    with pytest.raises(litellm.exceptions.InternalServerError):
        _call(url, model="openai/fail-500", max_retries=0, num_retries=0)
    spans = mastrace_spans.by_name("llm.litellm.chat")
    assert spans and all(s.status.status_code.name == "ERROR" for s in spans)


def test_a_stream_abandoned_half_way_ends_its_span(
    mastrace_spans: CapturedSpans, url: str, instrumented: None
) -> None:
    stream = _call(url, stream=True)
    for i, _ in enumerate(stream):
        if i == 1:
            break
    del stream
    import gc

    gc.collect()
    attrs = mastrace_spans.attributes("llm.litellm.stream")
    assert attrs["mastrace.stream.completed"] is False and attrs["mastrace.stream.chunks"] == 2


def test_litellms_reported_cost_is_used(mastrace_spans: CapturedSpans, url: str, instrumented: None) -> None:
    _call(url, model="openai/with-cost")
    assert mastrace_spans.attributes("llm.litellm.chat")["mastrace.usage"]["cost"] == pytest.approx(0.0042)


def test_with_openai_instrumented_too_a_call_is_one_span_and_one_credit(
    mastrace_spans: CapturedSpans, url: str, instrumented: None
) -> None:
    assert instrument_openai()
    try:
        with Agent().agent_round(1):
            _call(url)
            stream = _call(url, stream=True, stream_options={"include_usage": True})
            for _ in stream:
                pass
    finally:
        uninstrument_openai()
    names = mastrace_spans.names()
    assert names.count("llm.litellm.chat") == 1 and names.count("llm.litellm.stream") == 1
    assert not [n for n in names if n.startswith("llm.openai")]
    assert mastrace_spans.attributes("agent.agent_l.round_1")["massgen.usage.input"] == 2 * PROMPT_TOKENS


def test_tool_calls_provider_and_server_follow_the_conventions(instrumented: None) -> None:
    """A tool call and a streamed tool call through LiteLLM: routed provider, server, tool call ids,
    and with capture on the conventions' messages (the same reader as `openai`)."""
    from genai_peer import OPENAI_CALL_ID, OPENAI_HISTORY, OPENAI_TOOLS, serve

    with serve() as base, capture_spans(capture_content=True) as captured:
        common: dict[str, Any] = {"api_base": base + "/v1", "api_key": "sk-test", "tools": OPENAI_TOOLS}
        litellm.completion(model="openai/gpt-peer", messages=OPENAI_HISTORY, **common)
        stream = litellm.completion(model="openai/gpt-peer", messages=OPENAI_HISTORY, stream=True, **common)
        for _ in stream:
            pass
        chat, streamed = captured.attributes("llm.litellm.chat"), captured.attributes("llm.litellm.stream")
    for attrs in (chat, streamed):
        assert (attrs["gen_ai.provider.name"], attrs["massgen.backend"]) == ("openai", "litellm")
        assert attrs["server.address"] == "127.0.0.1" and attrs["server.port"] == int(base.rsplit(":", 1)[1])
        assert attrs["mastrace.response.tool_calls"] == [{"id": OPENAI_CALL_ID, "name": "get_weather"}]
        tool_part = attrs["gen_ai.output.messages"][0]["parts"][-1]
        assert tool_part["arguments"] == {"city": "Paris"} and tool_part["id"] == OPENAI_CALL_ID
        assert [m["role"] for m in attrs["gen_ai.input.messages"]] == ["system", "user"]


def test_model_and_messages_given_positionally_are_read(url: str, instrumented: None) -> None:
    """`litellm.completion(model, messages, ...)` (and the async and streamed forms), whose first two
    parameters are positional, records the model, provider and messages as the keyword form does."""
    messages = [{"role": "user", "content": "hi"}]

    async def both_async() -> None:
        await litellm.acompletion("openai/gpt-x", messages, api_base=url, api_key="sk-test")
        stream = await litellm.acompletion(
            "openai/gpt-x", messages, api_base=url, api_key="sk-test", stream=True
        )
        async for _ in stream:
            pass

    with capture_spans(capture_content=True) as captured:
        litellm.completion("openai/gpt-x", messages, api_base=url, api_key="sk-test")
        asyncio.run(both_async())
        spans = [s for s in captured.spans if s.name.startswith("llm.litellm.")]
    assert [s.name for s in spans] == ["llm.litellm.chat", "llm.litellm.chat", "llm.litellm.stream"]
    for span in spans:
        assert span.attributes["gen_ai.request.model"] == "openai/gpt-x"
        assert span.attributes["gen_ai.provider.name"] == "openai"
        assert "hi" in span.attributes["gen_ai.input.messages"]
