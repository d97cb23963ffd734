"""`instrument_openai()` with the real `openai` client against a loopback OpenAI-compatible server:
sync and async, streamed or not, errors, a stream abandoned half way, usage credited once."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import openai
import pydantic
import pytest

import mastrace
from live_server import serving
from mastrace.integrations.openai import instrument_openai, uninstrument_openai
from mastrace.testing import CapturedSpans

PROMPT_TOKENS, COMPLETION_TOKENS = 11, 7
WORDS = ["Mars", " coffee", " is", " red", " and", " strong", "."]


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
        model = body["model"]
        if model.startswith("fail-"):
            status = int(model.split("-")[1])
            payload = json.dumps({"error": {"message": "simulated failure", "type": "server_error"}}).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        usage: dict[str, Any] = {
            "prompt_tokens": PROMPT_TOKENS,
            "completion_tokens": COMPLETION_TOKENS,
            "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
        }
        if model == "with-cost":
            usage["cost"] = 0.0042
        structured = (body.get("response_format") or {}).get("type") == "json_schema"
        if not body.get("stream"):
            payload = json.dumps(
                {
                    "id": "c1",
                    "object": "chat.completion",
                    "created": 1,
                    "model": model + "-2026",
                    "choices": [
                        {
                            "index": 0,
                            "message": {
                                "role": "assistant",
                                "content": '{"colour": "red"}' if structured else "".join(WORDS),
                            },
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage,
                }
            ).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        base = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": model + "-2026"}
        try:
            for word in WORDS:
                chunk = {**base, "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            last = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            self.wfile.write(f"data: {json.dumps(last)}\n\n".encode())
            self.wfile.write(f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client went away half way
            pass

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with serving(Handler, "/v1") as url:
        yield url


@pytest.fixture
def instrumented() -> Iterator[None]:
    assert instrument_openai()
    yield
    uninstrument_openai()


class Agent(mastrace.AgentMixin):
    agent_id = "agent_a"


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key="sk-test-not-real", max_retries=0)


def test_a_call_is_a_chat_span_under_its_round(
    mastrace_spans: CapturedSpans, server_url: str, instrumented: None
) -> None:
    with Agent().agent_round(0, "initial_answer") as rnd:
        reply = _client(server_url).chat.completions.create(
            model="gpt-x", messages=[{"role": "user", "content": "hi"}], temperature=0.2
        )
    assert reply.choices[0].message.content == "".join(WORDS)  # the caller's result is untouched
    span = mastrace_spans.one("llm.openai.chat")
    round_span = mastrace_spans.one("agent.agent_a.round_0")
    assert mastrace_spans.parent_of(span) is round_span
    attrs = mastrace_spans.attributes("llm.openai.chat")
    assert attrs["gen_ai.operation.name"] == "chat" and attrs["gen_ai.request.model"] == "gpt-x"
    assert attrs["gen_ai.request.temperature"] == 0.2 and attrs["gen_ai.response.model"] == "gpt-x-2026"
    assert attrs["gen_ai.usage.input_tokens"] == PROMPT_TOKENS
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)
    assert "gen_ai.input.messages" not in attrs and "gen_ai.output.messages" not in attrs  # off by default
    usage = rnd.usage
    assert (usage.input_tokens, usage.output_tokens) == (PROMPT_TOKENS, COMPLETION_TOKENS)  # type: ignore[attr-defined]


def test_a_stream_is_one_stream_span_with_time_to_first_chunk(
    mastrace_spans: CapturedSpans, server_url: str, instrumented: None
) -> None:
    with Agent().agent_round(1, "voting") as rnd:
        stream = _client(server_url).chat.completions.create(
            model="gpt-x", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "".join(WORDS)
    attrs = mastrace_spans.attributes("llm.openai.stream")
    assert attrs["gen_ai.response.time_to_first_chunk"] > 0
    assert attrs["mastrace.stream.chunks"] == len(WORDS) + 2 and attrs["mastrace.stream.completed"] is True
    assert attrs["gen_ai.usage.output_tokens"] == COMPLETION_TOKENS
    assert rnd.usage.output_tokens == COMPLETION_TOKENS  # type: ignore[attr-defined]  # once, not per chunk


def test_async_calls_and_streams(mastrace_spans: CapturedSpans, server_url: str, instrumented: None) -> None:
    async def main() -> int:
        client = openai.AsyncOpenAI(base_url=server_url, api_key="sk-test-not-real", max_retries=0)
        async with Agent().agent_round(0, "initial_answer") as rnd:
            await client.chat.completions.create(model="gpt-x", messages=[{"role": "user", "content": "a"}])
            stream = await client.chat.completions.create(
                model="gpt-x", messages=[{"role": "user", "content": "b"}], stream=True
            )
            async for _ in stream:
                pass
        await client.close()
        return rnd.usage.input_tokens  # type: ignore[attr-defined, no-any-return]

    assert asyncio.run(main()) == 2 * PROMPT_TOKENS
    round_span = mastrace_spans.one("agent.agent_a.round_0")
    for name in ("llm.openai.chat", "llm.openai.stream"):
        assert mastrace_spans.parent_of(mastrace_spans.one(name)) is round_span


def test_an_error_is_recorded_and_raised_unchanged(
    mastrace_spans: CapturedSpans, server_url: str, instrumented: None
) -> None:
    with pytest.raises(openai.InternalServerError):
        _client(server_url).chat.completions.create(
            model="fail-500", messages=[{"role": "user", "content": "x"}]
        )
    span = mastrace_spans.one("llm.openai.chat")
    assert span.status.status_code.name == "ERROR"
    assert [e.name for e in span.events] == ["exception"]


def test_a_stream_abandoned_half_way_ends_its_span(
    mastrace_spans: CapturedSpans, server_url: str, instrumented: None
) -> None:
    stream = _client(server_url).chat.completions.create(
        model="gpt-x", messages=[{"role": "user", "content": "x"}], stream=True
    )
    for i, _ in enumerate(stream):
        if i == 1:
            break
    stream.close()
    attrs = mastrace_spans.attributes("llm.openai.stream")
    assert attrs["mastrace.stream.chunks"] == 2 and attrs["mastrace.stream.completed"] is False


def test_a_stream_cut_off_before_its_usage_says_its_usage_is_unknown(
    mastrace_spans: CapturedSpans, server_url: str, instrumented: None
) -> None:
    """A stream left before its usage chunk (an interrupt, a consumer that stops): the server may have
    counted its tokens, the client never learns them. The call and its round say the usage is unknown
    (`mastrace.usage.unknown`) instead of a silent 0; a call read to its end, and one the server
    refused (HTTP 500), do not."""
    client = _client(server_url)
    with Agent().agent_round(0, "initial_answer"):
        stream = client.chat.completions.create(
            model="gpt-x", messages=[{"role": "user", "content": "x"}], stream=True
        )
        next(iter(stream))
        stream.close()
    cut = mastrace_spans.attributes("llm.openai.stream")
    assert cut["mastrace.usage.unknown"] is True and cut["mastrace.stream.completed"] is False
    assert "gen_ai.usage.input_tokens" not in cut and "mastrace.usage" not in cut
    assert mastrace_spans.attributes("agent.agent_a.round_0")["mastrace.usage.unknown"] is True
    mastrace_spans.clear()
    with Agent().agent_round(1, "voting"):
        for _ in client.chat.completions.create(
            model="gpt-x", messages=[{"role": "user", "content": "x"}], stream=True
        ):
            pass
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="fail-500", messages=[{"role": "user", "content": "x"}])
    assert not [s.name for s in mastrace_spans.spans if "mastrace.usage.unknown" in (s.attributes or {})]


def test_provider_cost_and_content_capture(mastrace_spans: CapturedSpans, server_url: str) -> None:
    assert instrument_openai(capture_content=True)
    try:
        _client(server_url).chat.completions.create(
            model="with-cost", messages=[{"role": "user", "content": "my key is sk-proj-" + "A1b2" * 12}]
        )
    finally:
        uninstrument_openai()
    attrs = mastrace_spans.attributes("llm.openai.chat")
    assert attrs["mastrace.usage"]["cost"] == pytest.approx(0.0042)
    assert "".join(WORDS) in str(attrs["gen_ai.output.messages"])
    assert "[Scrubbed" in str(attrs["gen_ai.input.messages"]) and "A1b2A1b2" not in str(attrs)


def test_uninstrument_stops_tracing(mastrace_spans: CapturedSpans, server_url: str) -> None:
    instrument_openai()
    uninstrument_openai()
    _client(server_url).chat.completions.create(model="gpt-x", messages=[{"role": "user", "content": "x"}])
    assert not [s for s in mastrace_spans.spans if s.name.startswith("llm.")]


def test_an_unknown_version_is_one_warning_and_no_tracing(
    mastrace_spans: CapturedSpans,
    server_url: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(openai, "__version__", "99.0.0")
    assert instrument_openai() is False
    _client(server_url).chat.completions.create(model="gpt-x", messages=[{"role": "user", "content": "x"}])
    assert not [s for s in mastrace_spans.spans if s.name.startswith("llm.")]
    assert "not a version that instrument_openai() knows" in caplog.text


class Colour(pydantic.BaseModel):
    colour: str


def test_structured_output_parse_is_traced_and_credited(
    mastrace_spans: CapturedSpans, server_url: str, instrumented: None
) -> None:
    """`chat.completions.parse()` (structured output; the SDK posts without `create`), sync and async,
    is a chat span with its usage credited to the round once, and the parsed result is the caller's."""

    async def parse_async() -> Any:
        client = openai.AsyncOpenAI(base_url=server_url, api_key="sk-test-not-real", max_retries=0)
        return await client.chat.completions.parse(
            model="gpt-x", messages=[{"role": "user", "content": "colour?"}], response_format=Colour
        )

    with Agent().agent_round(0, "initial_answer") as rnd:
        reply = _client(server_url).chat.completions.parse(
            model="gpt-x", messages=[{"role": "user", "content": "colour?"}], response_format=Colour
        )
        async_reply = asyncio.run(parse_async())
    assert reply.choices[0].message.parsed == Colour(colour="red") == async_reply.choices[0].message.parsed
    spans = mastrace_spans.by_name("llm.openai.chat")
    assert len(spans) == 2
    for span in spans:
        assert span.attributes["gen_ai.output.type"] == "json"
        assert span.attributes["gen_ai.usage.input_tokens"] == PROMPT_TOKENS
        assert mastrace_spans.parent_of(span) is mastrace_spans.one("agent.agent_a.round_0")
    usage = rnd.usage
    assert (usage.input_tokens, usage.output_tokens) == (2 * PROMPT_TOKENS, 2 * COMPLETION_TOKENS)  # type: ignore[attr-defined]


def test_a_client_pointed_elsewhere_is_recorded_at_its_new_address(
    mastrace_spans: CapturedSpans, server_url: str, instrumented: None
) -> None:
    """The server and provider follow a client whose base URL changes between calls (they are remembered
    per URL object, and a new URL is a new object)."""
    with serving(Handler, "/openrouter/v1") as other:
        client = _client(server_url)
        for _ in range(2):
            client.chat.completions.create(model="gpt-x", messages=[{"role": "user", "content": "x"}])
        client.base_url = other  # type: ignore[assignment]
        client.chat.completions.create(model="gpt-x", messages=[{"role": "user", "content": "x"}])
    assert mastrace_spans.names() == ["llm.openai.chat", "llm.openai.chat", "llm.openrouter.chat"]
    first, second, moved = (dict(s.attributes or {}) for s in mastrace_spans.spans)
    assert first["server.port"] == second["server.port"] == int(server_url.split(":")[2].split("/")[0])
    assert (moved["server.port"], moved["gen_ai.provider.name"]) == (
        int(other.split(":")[2].split("/")[0]),
        "openrouter",
    )
    assert first["gen_ai.provider.name"] == "openai"


def test_a_raw_streamed_response_reads_as_without_tracing(
    mastrace_spans: CapturedSpans, server_url: str, instrumented: None
) -> None:
    """`with_raw_response` (a response object, no iterator) parses and streams as it would untraced; its
    call span ends when the response is dropped."""
    raw = _client(server_url).chat.completions.with_raw_response.create(
        model="gpt-x", messages=[{"role": "user", "content": "x"}], stream=True
    )
    assert raw.http_response.status_code == 200
    text = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)
    assert text == "".join(WORDS)
    del raw
    gc.collect()
    assert mastrace_spans.one("llm.openai.stream").attributes["gen_ai.request.stream"] is True


def test_a_time_to_first_chunk_set_by_the_framework_is_kept(
    mastrace_spans: CapturedSpans, server_url: str, instrumented: None
) -> None:
    """The call records its time to first chunk as the stream ends, unless the framework's handle (or the
    SDK's own tracing) set one on the span meanwhile: theirs stays, as when the call set its own first."""
    from mastrace.integrations._llm_calls import PendingLLMSpan, pending_llm_span

    for framework_value in (None, 12.5):
        pending = PendingLLMSpan("llm.openai.stream", {"massgen.agent_id": "agent_a"})
        token = pending_llm_span.set(pending)
        try:
            stream = _client(server_url).chat.completions.create(
                model="gpt-x", messages=[{"role": "user", "content": "x"}], stream=True
            )
        finally:
            pending_llm_span.reset(token)
        for i, _ in enumerate(stream):
            if i == 1 and framework_value is not None:
                pending.spans[0].set_attribute("gen_ai.response.time_to_first_chunk", framework_value)
    own, kept = (s.attributes["gen_ai.response.time_to_first_chunk"] for s in mastrace_spans.spans)
    assert 0 < own < 12.5 and kept == 12.5
