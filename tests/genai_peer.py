"""A loopback OpenAI- and Anthropic-compatible server, and the eight calls the GenAI tests make.

The server is the only fake the tests use (the remote LLM): the real `openai`, `anthropic` and
`litellm` clients talk to it over HTTP. It answers like the real APIs do:

- a request that offers tools and does not yet hold a tool result asks for the `get_weather` tool
  (`call_w1` / `toolu_w1`, arguments `{"city": "Paris"}`);
- a request that holds a tool result answers with text;
- `stream: true` gets server-sent events (OpenAI chunks with the tool call's arguments split over
  several chunks and usage last when `stream_options.include_usage` is set; Anthropic's
  `message_start` ... `message_stop` with `input_json_delta` fragments).

The eight calls (`CALLS`): for each provider a tool call, the tool-result follow-up, a streamed
text answer and a streamed tool call. `python genai_peer.py reference OUT.json` runs the four
OpenAI calls under the OpenTelemetry reference instrumentation (in its own environment) and writes
the spans it made.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

SYSTEM = "You are a terse weather assistant."
QUESTION = "What is the weather in Paris?"
ANSWER_WORDS = ["It", " is", " sunny", " and", " 21", "°C", " in", " Paris", "."]
ANSWER = "".join(ANSWER_WORDS)
TOOL_RESULT = '{"temperature_c": 21, "sky": "sunny"}'
ARGUMENTS = '{"city": "Paris"}'
OPENAI_CALL_ID, ANTHROPIC_CALL_ID = "call_w1", "toolu_w1"
INPUT_TOKENS, OUTPUT_TOKENS, CACHED_TOKENS = 31, 9, 4
WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


# --- the server -------------------------------------------------------------------------------------
def _has_tool_result(body: dict[str, Any]) -> bool:
    for message in body.get("messages") or ():
        if message.get("role") == "tool":
            return True
        content = message.get("content")
        if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
            return True
    return False


def _sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> bytes:
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out).encode()


def _openai_usage() -> dict[str, Any]:
    return {
        "prompt_tokens": INPUT_TOKENS,
        "completion_tokens": OUTPUT_TOKENS,
        "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
        "prompt_tokens_details": {"cached_tokens": CACHED_TOKENS},
    }


def openai_reply(body: dict[str, Any]) -> tuple[str, bytes]:
    """The content type and body an OpenAI-compatible server answers `body` with."""
    model = body["model"] + "-2026"
    wants_tool = bool(body.get("tools")) and not _has_tool_result(body)
    base = {"id": "chatcmpl-peer1", "created": 1, "model": model, "system_fingerprint": "fp_peer"}
    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": None if wants_tool else ANSWER}
        if wants_tool:
            function = {"name": "get_weather", "arguments": ARGUMENTS}
            message["tool_calls"] = [{"id": OPENAI_CALL_ID, "type": "function", "function": function}]
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if wants_tool else "stop"}
        reply = {**base, "object": "chat.completion", "choices": [choice], "usage": _openai_usage()}
        return "application/json", json.dumps(reply).encode()
    base = {**base, "object": "chat.completion.chunk"}
    chunks: list[dict[str, Any]] = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
    if wants_tool:
        first = {"index": 0, "id": OPENAI_CALL_ID, "type": "function"}
        first["function"] = {"name": "get_weather", "arguments": ""}
        chunks.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [first]}}]})
        for fragment in ('{"ci', 'ty": "Pa', 'ris"}'):
            delta = {"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]}
            chunks.append({**base, "choices": [{"index": 0, "delta": delta}]})
    else:
        for word in ANSWER_WORDS:
            chunks.append({**base, "choices": [{"index": 0, "delta": {"content": word}}]})
    finish = "tool_calls" if wants_tool else "stop"
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        chunks.append({**base, "choices": [], "usage": _openai_usage()})
    events: list[tuple[str | None, dict[str, Any] | str]] = [(None, c) for c in chunks]
    return "text/event-stream", _sse([*events, (None, "[DONE]")])


def _anthropic_usage(output: int) -> dict[str, Any]:
    return {
        "input_tokens": INPUT_TOKENS - CACHED_TOKENS,
        "cache_read_input_tokens": CACHED_TOKENS,
        "cache_creation_input_tokens": 0,
        "output_tokens": output,
    }


def anthropic_reply(body: dict[str, Any]) -> tuple[str, bytes]:
    """The content type and body an Anthropic-compatible server answers `body` with."""
    model = body["model"] + "-2026"
    wants_tool = bool(body.get("tools")) and not _has_tool_result(body)
    stop = "tool_use" if wants_tool else "end_turn"
    message = {"id": "msg_peer1", "type": "message", "role": "assistant", "model": model}
    if not body.get("stream"):
        content: list[dict[str, Any]] = [{"type": "text", "text": ANSWER}]
        if wants_tool:
            tool = {"type": "tool_use", "id": ANTHROPIC_CALL_ID, "name": "get_weather"}
            content = [{"type": "text", "text": "Checking."}, {**tool, "input": json.loads(ARGUMENTS)}]
        reply = {**message, "content": content, "stop_reason": stop, "stop_sequence": None}
        reply["usage"] = _anthropic_usage(OUTPUT_TOKENS)
        return "application/json", json.dumps(reply).encode()
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    start["usage"] = _anthropic_usage(1)
    events: list[tuple[str | None, dict[str, Any] | str]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    text_block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    events.append(("content_block_start", text_block))
    words = ["Checking."] if wants_tool else ANSWER_WORDS
    for word in words:
        delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": word}}
        events.append(("content_block_delta", delta))
    events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    if wants_tool:
        block = {"type": "tool_use", "id": ANTHROPIC_CALL_ID, "name": "get_weather", "input": {}}
        events.append(
            ("content_block_start", {"type": "content_block_start", "index": 1, "content_block": block})
        )
        for fragment in ('{"ci', 'ty": "Pa', 'ris"}'):
            delta = {"type": "input_json_delta", "partial_json": fragment}
            events.append(
                ("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": delta})
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": 1}))
    end = {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}}
    end["usage"] = {"output_tokens": OUTPUT_TOKENS}
    events += [("message_delta", end), ("message_stop", {"type": "message_stop"})]
    return "text/event-stream", _sse(events)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    requests: ClassVar[list[dict[str, Any]]] = []  # what the clients sent, for assertions

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
        type(self).requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
        reply = anthropic_reply if self.path.rstrip("/").endswith("/messages") else openai_reply
        content_type, payload = reply(body)
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        return None


def send_json(
    handler: BaseHTTPRequestHandler, payload: Any, status: int = 200, headers: dict[str, str] | None = None
) -> None:
    """Answer a request with `payload` as JSON (and any extra `headers`)."""
    data = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(data)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)


@contextlib.contextmanager
def serve(handler: type[BaseHTTPRequestHandler] = Handler) -> Iterator[str]:
    """Run a server on 127.0.0.1 (this module's, or another `handler`); yields its base URL
    (`http://127.0.0.1:<port>`)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


# --- the eight calls --------------------------------------------------------------------------------
OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": WEATHER_SCHEMA,
        },
    }
]
ANTHROPIC_TOOLS = [
    {"name": "get_weather", "description": "Weather for a city.", "input_schema": WEATHER_SCHEMA}
]
OPENAI_HISTORY = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
OPENAI_FOLLOW_UP = [
    *OPENAI_HISTORY,
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": OPENAI_CALL_ID,
                "type": "function",
                "function": {"name": "get_weather", "arguments": ARGUMENTS},
            }
        ],
    },
    {"role": "tool", "tool_call_id": OPENAI_CALL_ID, "content": TOOL_RESULT},
]
ANTHROPIC_FOLLOW_UP = [
    {"role": "user", "content": QUESTION},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": ANTHROPIC_CALL_ID, "name": "get_weather", "input": {"city": "Paris"}},
        ],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": ANTHROPIC_CALL_ID, "content": TOOL_RESULT}],
    },
]


def openai_client(base_url: str) -> Any:
    import openai

    return openai.OpenAI(base_url=base_url + "/v1", api_key="sk-test-not-real", max_retries=0)


def anthropic_client(base_url: str) -> Any:
    import anthropic

    return anthropic.Anthropic(base_url=base_url, api_key="sk-ant-test-not-real", max_retries=0)


def openai_tool_call(base_url: str) -> str:
    reply = openai_client(base_url).chat.completions.create(
        model="gpt-peer", messages=OPENAI_HISTORY, tools=OPENAI_TOOLS, temperature=0.2, max_tokens=64
    )
    return str(reply.choices[0].message.tool_calls[0].id)


def openai_tool_result(base_url: str) -> str:
    reply = openai_client(base_url).chat.completions.create(
        model="gpt-peer", messages=OPENAI_FOLLOW_UP, tools=OPENAI_TOOLS, temperature=0.2, max_tokens=64
    )
    return str(reply.choices[0].message.content)


def openai_streamed_text(base_url: str) -> str:
    stream = openai_client(base_url).chat.completions.create(
        model="gpt-peer",
        messages=OPENAI_HISTORY,
        stream=True,
        stream_options={"include_usage": True},
        stop=["\n\n"],
        max_tokens=64,
    )
    return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)


def openai_streamed_tool_call(base_url: str) -> str:
    stream = openai_client(base_url).chat.completions.create(
        model="gpt-peer",
        messages=OPENAI_HISTORY,
        tools=OPENAI_TOOLS,
        stream=True,
        stream_options={"include_usage": True},
        max_tokens=64,
    )
    fragments = [
        call.function.arguments or ""
        for chunk in stream
        for choice in chunk.choices
        for call in choice.delta.tool_calls or ()
    ]
    return "".join(fragments)


def anthropic_tool_call(base_url: str) -> str:
    reply = anthropic_client(base_url).messages.create(
        model="claude-peer",
        system=SYSTEM,
        messages=[{"role": "user", "content": QUESTION}],
        tools=ANTHROPIC_TOOLS,
        max_tokens=64,
    )
    return str(reply.content[-1].id)


def anthropic_tool_result(base_url: str) -> str:
    reply = anthropic_client(base_url).messages.create(
        model="claude-peer",
        system=SYSTEM,
        messages=ANTHROPIC_FOLLOW_UP,
        tools=ANTHROPIC_TOOLS,
        max_tokens=64,
    )
    return str(reply.content[0].text)


def anthropic_streamed_text(base_url: str) -> str:
    stream = anthropic_client(base_url).messages.create(
        model="claude-peer",
        system=SYSTEM,
        messages=[{"role": "user", "content": QUESTION}],
        max_tokens=64,
        stop_sequences=["\n\n"],
        stream=True,
    )
    return "".join(
        e.delta.text for e in stream if e.type == "content_block_delta" and e.delta.type == "text_delta"
    )


def anthropic_streamed_tool_call(base_url: str) -> str:
    with anthropic_client(base_url).messages.stream(
        model="claude-peer",
        system=SYSTEM,
        messages=[{"role": "user", "content": QUESTION}],
        tools=ANTHROPIC_TOOLS,
        max_tokens=64,
    ) as stream:
        message = stream.get_final_message()
    return json.dumps(message.content[-1].input)


CALLS: dict[str, Callable[[str], str]] = {
    "openai tool call": openai_tool_call,
    "openai tool result": openai_tool_result,
    "openai streamed text": openai_streamed_text,
    "openai streamed tool call": openai_streamed_tool_call,
    "anthropic tool call": anthropic_tool_call,
    "anthropic tool result": anthropic_tool_result,
    "anthropic streamed text": anthropic_streamed_text,
    "anthropic streamed tool call": anthropic_streamed_tool_call,
}
OPENAI_CALLS = [name for name in CALLS if name.startswith("openai")]


# --- the reference instrumentation, run in its own environment ----------------------------------------
def _span_record(span: Any) -> dict[str, Any]:
    return {
        "name": span.name,
        "kind": span.kind.name,
        "attributes": {k: list(v) if isinstance(v, tuple) else v for k, v in (span.attributes or {}).items()},
    }


def run_reference(out_path: str) -> None:
    """The four OpenAI calls under `opentelemetry-instrumentation-openai-v2`, latest conventions,
    content on; writes `{call: [span records]}` and `{"metrics": [names]}` as JSON to `out_path`."""
    import os

    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
    from opentelemetry import metrics, trace
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    OpenAIInstrumentor().instrument()
    result: dict[str, Any] = {}
    with serve() as url:
        for name in OPENAI_CALLS:
            exporter.clear()
            CALLS[name](url)
            result[name] = [_span_record(s) for s in exporter.get_finished_spans()]
    data = reader.get_metrics_data()
    names = sorted(
        {m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
        if data
        else set()
    )
    result["metrics"] = names
    with open(out_path, "w", encoding="utf-8") as out:
        json.dump(result, out, indent=1, sort_keys=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "reference":
        run_reference(sys.argv[2])
    else:
        raise SystemExit("usage: python genai_peer.py reference OUT.json")
