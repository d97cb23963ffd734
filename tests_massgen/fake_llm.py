"""A loopback OpenAI-compatible streaming server that plays MassGen's coordination protocol.

Each agent's model name identifies it. An agent's first request is answered with a `new_answer`
tool call; later requests that offer `vote` get a `vote` for the first answer; a request offering
neither (the final presentation) gets plain text. Every response streams a few text chunks and puts
its usage in the last chunk. The server records what it handed out, so tests can compare exactly.
"""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Ledger:
    """What the server answered: one entry per request, in arrival order."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def input_tokens(self) -> int:
        return sum(c["prompt_tokens"] for c in self.calls)

    @property
    def output_tokens(self) -> int:
        return sum(c["completion_tokens"] for c in self.calls)


def _tool_names(body: dict[str, Any]) -> set[str]:
    names = set()
    for tool in body.get("tools") or []:
        fn = tool.get("function") or {}
        if fn.get("name"):
            names.add(fn["name"])
    return names


def make_server(ledger: Ledger, text_chunks: int = 5) -> ThreadingHTTPServer:
    answered: set[str] = set()
    used_tool: set[str] = set()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
            model = body.get("model", "fake")
            tools = _tool_names(body)
            prompt_chars = len(json.dumps(body.get("messages", [])))
            with ledger.lock:
                index = len(ledger.calls)
                mcp_tool = next((t for t in sorted(tools) if t.endswith("multiply")), None)
                if mcp_tool is not None and model not in used_tool and model not in answered:
                    used_tool.add(model)
                    kind = mcp_tool
                    args = {"a": 6, "b": 7}
                elif "new_answer" in tools and model not in answered:
                    answered.add(model)
                    kind = "new_answer"
                    args = {"content": f"The answer from {model} is 42."}
                elif "vote" in tools:
                    kind = "vote"  # for the first agent whose answer is in the context
                    text = json.dumps(body.get("messages", []))
                    target = next((a for a in ("agent1", "agent2", "agent3") if f"{a}." in text), "agent1")
                    args = {"agent_id": target, "reason": f"{target} explains it best"}
                else:
                    kind = "text"
                    args = {}
                prompt_tokens = 100 + prompt_chars % 97 + index
                completion_tokens = 20 + index
                ledger.calls.append(
                    {
                        "model": model,
                        "kind": kind,
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": completion_tokens,
                    }
                )
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            base = {"id": f"c{index}", "object": "chat.completion.chunk", "created": 1, "model": model}

            def send(choices: list[dict[str, Any]], **extra: Any) -> None:
                data = json.dumps({**base, "choices": choices, **extra})
                self.wfile.write(f"data: {data}\n\n".encode())
                self.wfile.flush()

            try:
                words = (
                    ["Thinking", " about", " it", " carefully", "."]
                    if kind != "text"
                    else ["The", " final", " answer", " is", " 42."]
                )
                for word in (words * ((text_chunks + len(words) - 1) // len(words)))[:text_chunks]:
                    send(
                        [{"index": 0, "delta": {"role": "assistant", "content": word}, "finish_reason": None}]
                    )
                if kind != "text":
                    call = {
                        "index": 0,
                        "id": f"call_{index}",
                        "type": "function",
                        "function": {"name": kind, "arguments": json.dumps(args)},
                    }
                    send([{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}])
                    send([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}])
                else:
                    send([{"index": 0, "delta": {}, "finish_reason": "stop"}])
                usage = {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                }
                send([], usage=usage)
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            return None

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


if __name__ == "__main__":  # a standalone server for trying MassGen by hand
    ledger = Ledger()
    server = make_server(ledger)
    print(f"http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print(json.dumps(ledger.calls), file=sys.stderr)
