"""`instrument_anthropic()` with the real `anthropic` client against a loopback Messages API server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import anthropic
import pytest

import mastrace
from live_server import serving
from mastrace.integrations.anthropic import instrument_anthropic, uninstrument_anthropic
from mastrace.testing import CapturedSpans

INPUT, OUTPUT, CACHE_READ = 12, 8, 4
WORDS = ["Red", " dust", " espresso", "."]


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps({'type': event, **data})}\n\n".encode()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
        if body["model"] == "fail":
            payload = json.dumps(
                {"type": "error", "error": {"type": "api_error", "message": "boom"}}
            ).encode()
            self.send_response(500)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        message = {"id": "m1", "type": "message", "role": "assistant", "model": body["model"] + "-2026"}
        if not body.get("stream"):
            payload = json.dumps(
                {
                    **message,
                    "content": [{"type": "text", "text": "".join(WORDS)}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": INPUT,
                        "output_tokens": OUTPUT,
                        "cache_read_input_tokens": CACHE_READ,
                    },
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
        start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
        start["usage"] = {"input_tokens": INPUT, "output_tokens": 1, "cache_read_input_tokens": CACHE_READ}
        self.wfile.write(_sse("message_start", {"message": start}))
        if body["model"] == "tools":  # one block whole at its start (as some gateways send), one in fragments
            whole = {"type": "tool_use", "id": "toolu_a", "name": "look", "input": {"where": "Mars"}}
            pieces = {"type": "tool_use", "id": "toolu_b", "name": "look", "input": {}}
            self.wfile.write(_sse("content_block_start", {"index": 0, "content_block": whole}))
            self.wfile.write(_sse("content_block_stop", {"index": 0}))
            self.wfile.write(_sse("content_block_start", {"index": 1, "content_block": pieces}))
            for fragment in ('{"where":', ' "Venus"}'):
                fragment_delta = {"type": "input_json_delta", "partial_json": fragment}
                self.wfile.write(_sse("content_block_delta", {"index": 1, "delta": fragment_delta}))
            self.wfile.write(_sse("content_block_stop", {"index": 1}))
            tool_delta = {"delta": {"stop_reason": "tool_use", "stop_sequence": None}}
            self.wfile.write(_sse("message_delta", {**tool_delta, "usage": {"output_tokens": OUTPUT}}))
            self.wfile.write(_sse("message_stop", {}))
            self.wfile.flush()
            return
        self.wfile.write(
            _sse("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
        )
        for word in WORDS:
            self.wfile.write(
                _sse("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": word}})
            )
        self.wfile.write(_sse("content_block_stop", {"index": 0}))
        delta = {
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": OUTPUT},
        }
        self.wfile.write(_sse("message_delta", delta))
        self.wfile.write(_sse("message_stop", {}))
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with serving(Handler) as url:
        yield url


@pytest.fixture
def instrumented() -> Iterator[None]:
    assert instrument_anthropic()
    yield
    uninstrument_anthropic()


class Agent(mastrace.AgentMixin):
    agent_id = "agent_b"


def _client(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="sk-ant-test-not-real", max_retries=0)


def test_a_message_is_a_chat_span_with_merged_usage(
    mastrace_spans: CapturedSpans, server_url: str, instrumented: None
) -> None:
    with Agent().agent_round(0, "initial_answer") as rnd:
        reply = _client(server_url).messages.create(
            model="claude-x", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
        )
    assert reply.content[0].text == "".join(WORDS)  # type: ignore[union-attr]
    attrs = mastrace_spans.attributes("llm.anthropic.chat")
    assert attrs["gen_ai.provider.name"] == "anthropic" and attrs["gen_ai.request.max_tokens"] == 100
    assert attrs["gen_ai.response.model"] == "claude-x-2026"
    assert attrs["gen_ai.response.finish_reasons"] == ("end_turn",)
    # Anthropic counts cached input apart from input_tokens: mastrace's input includes it.
    assert attrs["gen_ai.usage.input_tokens"] == INPUT + CACHE_READ
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == CACHE_READ
    assert rnd.usage.output_tokens == OUTPUT  # type: ignore[attr-defined]


def test_a_stream_merges_usage_reported_in_parts(
    mastrace_spans: CapturedSpans, server_url: str, instrumented: None
) -> None:
    with Agent().agent_round(1, "voting") as rnd:
        stream = _client(server_url).messages.create(
            model="claude-x", max_tokens=100, messages=[{"role": "user", "content": "hi"}], stream=True
        )
        text = "".join(e.delta.text for e in stream if e.type == "content_block_delta")  # type: ignore[union-attr]
    assert text == "".join(WORDS)
    attrs = mastrace_spans.attributes("llm.anthropic.stream")
    assert attrs["mastrace.stream.completed"] is True and attrs["mastrace.stream.chunks"] == len(WORDS) + 5
    assert attrs["gen_ai.usage.output_tokens"] == OUTPUT  # the final count, not 1 + 8
    assert mastrace_spans.parent_of(mastrace_spans.one("llm.anthropic.stream")) is mastrace_spans.one(
        "agent.agent_b.round_1"
    )
    assert rnd.usage.input_tokens == INPUT + CACHE_READ  # type: ignore[attr-defined]


def test_async_and_errors(mastrace_spans: CapturedSpans, server_url: str, instrumented: None) -> None:
    async def main() -> None:
        client = anthropic.AsyncAnthropic(base_url=server_url, api_key="sk-ant-test-not-real", max_retries=0)
        stream = await client.messages.create(
            model="claude-x", max_tokens=10, messages=[{"role": "user", "content": "a"}], stream=True
        )
        async for _ in stream:
            pass
        with pytest.raises(anthropic.InternalServerError):
            await client.messages.create(
                model="fail", max_tokens=10, messages=[{"role": "user", "content": "b"}]
            )
        await client.close()

    asyncio.run(main())
    assert mastrace_spans.attributes("llm.anthropic.stream")["gen_ai.usage.output_tokens"] == OUTPUT
    failed = mastrace_spans.one("llm.anthropic.chat")
    assert failed.status.status_code.name == "ERROR"


def test_streamed_tool_input_whole_or_in_fragments_is_recorded(server_url: str, instrumented: None) -> None:
    """A tool call whose input arrives whole in `content_block_start` and one whose input arrives in
    fragments are both recorded with their arguments, as the SDK assembles them."""
    from mastrace.testing import capture_spans

    with capture_spans(capture_content=True) as captured:
        with _client(server_url).messages.stream(
            model="tools", max_tokens=16, messages=[{"role": "user", "content": "where?"}]
        ) as stream:
            final = stream.get_final_message()
        attrs = captured.attributes("llm.anthropic.stream")
    assert [block.input for block in final.content] == [{"where": "Mars"}, {"where": "Venus"}]
    (message,) = attrs["gen_ai.output.messages"]
    assert [(p["id"], p["arguments"]) for p in message["parts"]] == [
        ("toolu_a", {"where": "Mars"}),
        ("toolu_b", {"where": "Venus"}),
    ]
