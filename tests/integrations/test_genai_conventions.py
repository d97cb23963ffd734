"""The eight calls of `genai_peer` (OpenAI and Anthropic: tool call, tool-result follow-up, streamed
text, streamed tool call) through the real `openai` and `anthropic` clients, instrumented: the GenAI
semantic conventions' attributes, messages and tool calls, content capture switches, the span being
current while the SDK works, and the anthropic SDK's own span handed over."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
import openai
import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind

import mastrace
from genai_peer import (
    ANTHROPIC_CALL_ID,
    ANTHROPIC_TOOLS,
    CACHED_TOKENS,
    CALLS,
    INPUT_TOKENS,
    OPENAI_CALL_ID,
    OPENAI_HISTORY,
    OUTPUT_TOKENS,
    QUESTION,
    SYSTEM,
    Handler,
    anthropic_client,
    openai_client,
)
from mastrace import semconv
from mastrace.integrations.openai import instrument_openai, uninstrument_openai
from mastrace.testing import CapturedSpans, capture_spans

_PARTS_REQUIRED = {
    "text": {"content"},
    "tool_call": {"name"},
    "tool_call_response": {"response"},
    "reasoning": {"content"},
    "uri": {"modality", "uri"},
    "blob": {"modality", "content"},
}


def check_parts(parts: Any) -> None:
    """Each part has a `type` and the fields the conventions' JSON schema requires for that type."""
    assert isinstance(parts, list)
    for part in parts:
        assert isinstance(part.get("type"), str), part
        missing = _PARTS_REQUIRED.get(part["type"], set()) - set(part)
        assert not missing, (part, missing)


def check_messages(messages: Any, *, output: bool = False) -> None:
    """Messages follow the input (or output) messages schema: role, parts, and finish_reason for output."""
    assert isinstance(messages, list) and messages
    for message in messages:
        assert message["role"] in ("system", "user", "assistant", "tool"), message
        check_parts(message["parts"])
        if output:
            assert message["finish_reason"] in ("stop", "length", "content_filter", "tool_call", "error")


def _llm_spans(captured: CapturedSpans) -> list[Any]:
    return [s for s in captured.spans if s.name.startswith("llm.")]


def _run(captured: CapturedSpans, name: str, url: str) -> tuple[Any, dict[str, Any]]:
    captured.clear()
    before = len(captured.spans)
    CALLS[name](url)
    new = captured.spans[before:]
    assert [s.name for s in new] == [_span_name(name)], [s.name for s in new]
    return new[0], captured.attributes(new[0].name)


def _span_name(call: str) -> str:
    provider = call.split()[0]
    return f"llm.{provider}.stream" if "streamed" in call else f"llm.{provider}.chat"


@pytest.mark.parametrize("call", list(CALLS))
def test_every_call_has_the_conventions_attributes_without_content(
    call: str, peer: str, instrumented_llms: None, mastrace_spans: CapturedSpans
) -> None:
    """One CLIENT span per call with the required and recommended keys, tool call ids, and no content."""
    span, attrs = _run(mastrace_spans, call, peer)
    provider, streamed = call.split()[0], "streamed" in call
    assert span.kind is SpanKind.CLIENT and span.parent is None
    expected = {
        semconv.GEN_AI_OPERATION_NAME: "chat",
        semconv.GEN_AI_PROVIDER_NAME: provider,
        semconv.GEN_AI_REQUEST_MODEL: "gpt-peer" if provider == "openai" else "claude-peer",
        semconv.GEN_AI_RESPONSE_MODEL: ("gpt-peer" if provider == "openai" else "claude-peer") + "-2026",
        semconv.GEN_AI_RESPONSE_ID: "chatcmpl-peer1" if provider == "openai" else "msg_peer1",
        semconv.GEN_AI_REQUEST_MAX_TOKENS: 64,
        semconv.SERVER_ADDRESS: "127.0.0.1",
        semconv.SERVER_PORT: int(peer.rsplit(":", 1)[1]),
        semconv.GEN_AI_USAGE_INPUT_TOKENS: INPUT_TOKENS,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: OUTPUT_TOKENS,
        semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: CACHED_TOKENS,
    }
    assert {k: attrs.get(k) for k in expected} == expected
    assert attrs.get(semconv.GEN_AI_REQUEST_STREAM) is (True if streamed else None)
    assert (attrs.get(semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, -1.0) > 0) is streamed
    tool_call = "tool call" in call
    reasons = {"openai": ("tool_calls", "stop"), "anthropic": ("tool_use", "end_turn")}[provider]
    assert attrs[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == (reasons[0] if tool_call else reasons[1],)
    call_id = OPENAI_CALL_ID if provider == "openai" else ANTHROPIC_CALL_ID
    if tool_call:
        assert attrs[semconv.MASTRACE_RESPONSE_TOOL_CALLS] == [{"id": call_id, "name": "get_weather"}]
    if "tool result" in call:
        assert attrs[semconv.MASTRACE_REQUEST_TOOL_CALL_IDS] == (call_id,)
    content = {
        semconv.GEN_AI_INPUT_MESSAGES,
        semconv.GEN_AI_OUTPUT_MESSAGES,
        semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
    }
    assert not content & set(attrs) and semconv.GEN_AI_TOOL_DEFINITIONS not in attrs
    assert not [k for k in attrs if k.startswith("gen_ai.request.") and k.split(".")[2] in ("user", "stop")]


@pytest.mark.parametrize("call", list(CALLS))
def test_content_capture_records_messages_in_the_conventions_structure(
    call: str, peer: str, instrumented_llms: None
) -> None:
    """With capture on: input and output messages, tool calls with arguments, tool results, definitions."""
    with capture_spans(capture_content=True) as captured:
        _, attrs = _run(captured, call, peer)
    provider = call.split()[0]
    inputs, outputs = attrs[semconv.GEN_AI_INPUT_MESSAGES], attrs[semconv.GEN_AI_OUTPUT_MESSAGES]
    check_messages(inputs)
    check_messages(outputs, output=True)
    if provider == "anthropic":  # the system prompt is apart from the history
        assert attrs[semconv.GEN_AI_SYSTEM_INSTRUCTIONS] == [{"type": "text", "content": SYSTEM}]
        assert inputs[0] == {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}
    else:
        assert inputs[0] == {"role": "system", "parts": [{"type": "text", "content": SYSTEM}]}
    call_id = OPENAI_CALL_ID if provider == "openai" else ANTHROPIC_CALL_ID
    if "tool call" in call:
        tool_part = outputs[0]["parts"][-1]
        assert tool_part == {
            "type": "tool_call",
            "id": call_id,
            "name": "get_weather",
            "arguments": {"city": "Paris"},
        }
        assert outputs[0]["finish_reason"] == "tool_call"
        assert attrs[semconv.GEN_AI_TOOL_DEFINITIONS][0]["name"] == "get_weather"
    else:
        assert outputs[0]["parts"][-1] == {"type": "text", "content": "It is sunny and 21°C in Paris."}
    if "tool result" in call:
        parts = [p for m in inputs for p in m["parts"]]
        assert {
            "type": "tool_call",
            "id": call_id,
            "name": "get_weather",
            "arguments": {"city": "Paris"},
        } in parts
        response = next(p for p in parts if p["type"] == "tool_call_response")
        assert response["id"] == call_id and json.loads(response["response"])["temperature_c"] == 21


@pytest.mark.parametrize(
    ("variable", "value", "configured", "explicit", "captured"),
    [
        ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true", None, None, True),
        ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY", None, None, True),
        ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "NO_CONTENT", None, None, False),
        ("MASTRACE_CAPTURE_CONTENT", "1", None, None, True),
        ("MASTRACE_CAPTURE_CONTENT", "1", False, None, False),
        ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true", None, False, False),
        ("MASTRACE_CAPTURE_CONTENT", "0", None, True, True),
    ],
)
def test_content_capture_switches_and_their_precedence(
    variable: str,
    value: str,
    configured: bool | None,
    explicit: bool | None,
    captured: bool,
    peer: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """instrument_*(capture_content=) beats configure(capture_content=), which beats the two variables."""
    monkeypatch.setenv(variable, value)
    instrument_openai(capture_content=explicit)
    try:
        kwargs = {} if configured is None else {"capture_content": configured}
        with capture_spans(**kwargs) as spans:
            CALLS["openai tool call"](peer)
    finally:
        uninstrument_openai()
    assert (semconv.GEN_AI_INPUT_MESSAGES in spans.attributes("llm.openai.chat")) is captured


def test_captured_content_is_scrubbed(peer: str, instrumented_llms: None) -> None:
    """A secret inside a message is scrubbed before it leaves, the message structure kept."""
    secret = "sk-ant-api03-" + "Zx9" * 30
    with capture_spans(capture_content=True) as captured:
        anthropic_client(peer).messages.create(
            model="claude-peer", max_tokens=8, messages=[{"role": "user", "content": f"my key is {secret}"}]
        )
        attrs = captured.attributes("llm.anthropic.chat")
    assert secret not in json.dumps(attrs[semconv.GEN_AI_INPUT_MESSAGES])
    check_messages(attrs[semconv.GEN_AI_INPUT_MESSAGES])
    assert "[Scrubbed" in attrs[semconv.GEN_AI_INPUT_MESSAGES][0]["parts"][0]["content"]


def test_the_llm_span_is_current_while_the_sdk_sends(
    peer: str, instrumented_llms: None, mastrace_spans: CapturedSpans
) -> None:
    """A span the HTTP client starts while sending nests under the LLM span (one trace per call)."""
    tracer = trace.get_tracer("http-client-instrumentation")

    def on_request(request: Any) -> None:
        tracer.start_span("HTTP POST").end()

    client = openai.OpenAI(
        base_url=peer + "/v1",
        api_key="sk-test-not-real",
        max_retries=0,
        http_client=openai.DefaultHttpxClient(event_hooks={"request": [on_request]}),
    )
    client.chat.completions.create(model="gpt-peer", messages=[{"role": "user", "content": QUESTION}])
    http, llm = mastrace_spans.one("HTTP POST"), mastrace_spans.one("llm.openai.chat")
    assert mastrace_spans.parent_of(http) is llm and llm.parent is None


def test_the_anthropic_sdk_span_is_handed_over_not_a_second_root(
    peer: str, instrumented_llms: None, mastrace_spans: CapturedSpans
) -> None:
    """The SDK's `anthropic.messages.create` span is mastrace's: one span, HTTP details, traceparent."""
    Handler.requests.clear()
    with _Agent().agent_round(0) as rnd:
        CALLS["anthropic tool call"](peer)
        CALLS["anthropic streamed tool call"](peer)
    assert [s.name for s in mastrace_spans.spans if "anthropic" in s.name] == [
        "llm.anthropic.chat",
        "llm.anthropic.stream",
    ]
    chat = mastrace_spans.one("llm.anthropic.chat")
    assert (
        chat.attributes["http.response.status_code"] == 200 and chat.attributes["url.path"] == "/v1/messages"
    )
    sent = Handler.requests[0]["headers"].get("traceparent", "")
    assert sent.split("-")[2] == f"{chat.context.span_id:016x}"
    assert rnd.usage.input_tokens == 2 * INPUT_TOKENS and rnd.usage.output_tokens == 2 * OUTPUT_TOKENS  # type: ignore[attr-defined]


class _Agent(mastrace.AgentMixin):
    agent_id = "agent_a"


def test_anthropic_sdk_span_stays_when_anthropic_is_not_instrumented(
    peer: str, mastrace_spans: CapturedSpans
) -> None:
    """Without instrument_anthropic() the SDK's own span is left as the SDK makes it."""
    CALLS["anthropic tool call"](peer)
    assert mastrace_spans.names() == ["anthropic.messages.create"]


def test_messages_stream_in_every_form_is_one_span_with_usage_credited_once(
    peer: str, instrumented_llms: None, mastrace_spans: CapturedSpans
) -> None:
    """messages.stream(): text_stream, events, get_final_message, async, and a stream left early."""
    client = anthropic_client(peer)
    params: dict[str, Any] = {
        "model": "claude-peer",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": QUESTION}],
    }
    with _Agent().agent_round(0) as rnd:
        with client.messages.stream(**params) as stream:
            text = "".join(stream.text_stream)
        with client.messages.stream(**params) as stream:
            kinds = [event.type for event in stream]
        with client.messages.stream(**params, tools=ANTHROPIC_TOOLS) as stream:
            final = stream.get_final_message()
        with client.messages.stream(**params) as stream:
            next(iter(stream))  # leaves after the first event

        async def read_async() -> str:
            aclient = anthropic.AsyncAnthropic(base_url=peer, api_key="sk-ant-test-not-real", max_retries=0)
            async with aclient.messages.stream(**params) as astream:
                return "".join([t async for t in astream.text_stream])

        atext = asyncio.run(read_async())
    assert text == atext == "It is sunny and 21°C in Paris." and "message_stop" in kinds
    assert final.content[-1].id == ANTHROPIC_CALL_ID
    spans = mastrace_spans.by_name("llm.anthropic.stream")
    assert len(spans) == 5 and not mastrace_spans.by_name("anthropic.messages.create")
    completed = [s.attributes[semconv.MASTRACE_STREAM_COMPLETED] for s in spans]
    assert sorted(completed) == [False, True, True, True, True]
    assert rnd.usage.output_tokens == 4 * OUTPUT_TOKENS + 1  # type: ignore[attr-defined]  # the early one: 1 so far
    tool_calls = json.loads(str(spans[2].attributes[semconv.MASTRACE_RESPONSE_TOOL_CALLS]))
    assert tool_calls == [{"id": ANTHROPIC_CALL_ID, "name": "get_weather"}]


def test_a_failed_call_has_error_type(instrumented_llms: None, mastrace_spans: CapturedSpans) -> None:
    """A call that cannot reach its server ends its span with error status and `error.type`."""
    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk-test-not-real", max_retries=0)
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="gpt-peer", messages=[{"role": "user", "content": "x"}])
    span = mastrace_spans.one("llm.openai.chat")
    assert span.status.status_code.name == "ERROR"
    assert span.attributes[semconv.ERROR_TYPE] == "APIConnectionError"


def test_hostile_requests_are_sent_untouched_and_traced(peer: str, instrumented_llms: None) -> None:
    """Messages given as a generator, malformed entries and a huge message: the call goes out as the
    caller built it, nothing is raised by mastrace, and the span is still recorded (content capped)."""
    client = openai_client(peer)
    huge = "lorem ipsum " * 200_000  # 2.4 MB
    with capture_spans(capture_content=True) as captured:
        Handler.requests.clear()
        client.chat.completions.create(model="gpt-peer", messages=(m for m in OPENAI_HISTORY))
        sent = Handler.requests[-1]["body"]["messages"]
        client.chat.completions.create(
            model="gpt-peer",
            messages=[{"role": "user", "content": [{"type": "weird", "x": object.__name__}, {"no": "type"}]}],
        )
        client.chat.completions.create(model="gpt-peer", messages=[{"role": "user", "content": huge}])
        spans = [s.attributes for s in captured.by_name("llm.openai.chat")]
    assert sent == OPENAI_HISTORY  # the generator reached the SDK whole
    assert len(spans) == 3 and "gen_ai.input.messages" not in spans[0]  # not read from a generator
    assert "weird" in str(spans[1]["gen_ai.input.messages"])
    assert "truncated" in str(spans[2]["gen_ai.input.messages"]) and len(str(spans[2])) < len(huge)
