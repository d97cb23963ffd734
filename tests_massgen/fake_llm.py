"""A loopback OpenAI-compatible streaming server that plays MassGen's coordination protocol.

Each agent's model name identifies it. An agent's first request is answered with a `new_answer`
tool call; later requests that offer `vote` get a `vote` for the first answer in the context; a
request offering neither (the final presentation) gets plain text. Every response streams a few text
chunks and puts its usage in the last chunk. The server records what it handed out (the ledger), so
tests compare exactly.

A `Plan` scripts the failure paths: HTTP 500 for given requests of a model (the SDK retries them),
a model that votes for an agent id that does not exist, a model whose first answer comes late (so
that the votes already cast are discarded), a model that answers twice.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Plan:
    """What the server does besides the happy path.

    Attributes:
        http_500: Model -> the numbers (1-based, per model) of its requests answered with HTTP 500.
        bad_voter: A model that votes for `agent9`, an id MassGen does not know.
        late: Model -> seconds to wait before its first answer (votes cast meanwhile are discarded).
        questions: The questions of the session, in order (to tell the turns apart).
        mcp_error: Call the MCP tool with arguments it rejects (the result is an MCP error).
        mcp_crash: Call the MCP tool with arguments that make the MCP server process exit mid-call.
        stall: Models whose first request is held, unanswered, until `release` is set.
        stalled: Set when a held request has arrived.
        release: Set to let the held requests go (the tests set it before the server shuts down).
    """

    http_500: dict[str, set[int]] = field(default_factory=dict)
    bad_voter: str | None = None
    late: dict[str, float] = field(default_factory=dict)
    questions: tuple[str, ...] = ()
    mcp_error: bool = False
    mcp_crash: bool = False
    stall: set[str] = field(default_factory=set)
    stalled: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


@dataclass
class Ledger:
    """What the server answered: one entry per request, in arrival order."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def served(self) -> list[dict[str, Any]]:
        """The requests answered with a completion (not an HTTP error)."""
        return [c for c in self.calls if c["status"] == 200]

    @property
    def input_tokens(self) -> int:
        return sum(c["prompt_tokens"] for c in self.served)

    @property
    def output_tokens(self) -> int:
        return sum(c["completion_tokens"] for c in self.served)

    def by_model(self) -> dict[str, dict[str, int]]:
        """Per model: requests, HTTP errors, input and output tokens of the completions served."""
        out: dict[str, dict[str, int]] = {}
        for call in self.calls:
            row = out.setdefault(call["model"], {"requests": 0, "errors": 0, "input": 0, "output": 0})
            row["requests"] += 1
            if call["status"] >= 400:
                row["errors"] += 1
            row["input"] += call["prompt_tokens"]
            row["output"] += call["completion_tokens"]
        return out

    def turns(self) -> list[list[dict[str, Any]]]:
        """The calls split at each new question (a request whose prompt holds a new user message)."""
        out: list[list[dict[str, Any]]] = []
        question = None
        for call in self.calls:
            if call["question"] != question:
                question = call["question"]
                out.append([])
            out[-1].append(call)
        return out


def _vote_options(body: dict[str, Any]) -> list[str]:
    """The agent ids the `vote` tool offers (MassGen lists the agents that have an answer)."""
    for tool in body.get("tools") or []:
        fn = tool.get("function") or {}
        if fn.get("name") == "vote":
            prop = (fn.get("parameters") or {}).get("properties", {}).get("agent_id", {})
            return list(prop.get("enum") or [])
    return []


def _tool_names(body: dict[str, Any]) -> set[str]:
    names = set()
    for tool in body.get("tools") or []:
        fn = tool.get("function") or {}
        if fn.get("name"):
            names.add(fn["name"])
    return names


def _question(text: str, questions: tuple[str, ...]) -> str:
    """The turn's question: the last of the questions asked that the prompt holds (a later turn's
    prompt holds the earlier questions too)."""
    return next((q for q in reversed(questions) if q in text), "")


@dataclass
class _Session:
    """What the server plays from and records into, until `FakeServer.begin` starts anew."""

    ledger: Ledger
    plan: Plan
    answered: dict[tuple[str, str], int] = field(default_factory=dict)  # (model, question) -> answers
    used_tool: set[tuple[str, str]] = field(default_factory=set)
    requests: dict[str, int] = field(default_factory=dict)


class FakeServer(ThreadingHTTPServer):
    """The loopback server; `begin()` starts a new session at the same address (a new ledger, plan and
    protocol state), so that several MassGen runs can share one `base_url`, and so one configuration.
    A session begun for an API key answers the requests that carry it: runs started at once with
    different keys each play their own session."""

    session: _Session
    by_key: dict[str, _Session]

    def begin(self, ledger: Ledger, plan: Plan | None = None, api_key: str | None = None) -> None:
        session = _Session(ledger, plan or Plan())
        if api_key is None:
            self.session = session
        else:
            self.by_key[api_key] = session


def make_server(ledger: Ledger, plan: Plan | None = None, text_chunks: int = 5) -> FakeServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server: FakeServer

        def do_POST(self) -> None:
            key = self.headers.get("authorization", "").removeprefix("Bearer ").strip()
            session = self.server.by_key.get(key, self.server.session)
            ledger, plan, answered = session.ledger, session.plan, session.answered
            used_tool, requests = session.used_tool, session.requests
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
            model = body.get("model", "fake")
            tools = _tool_names(body)
            text = json.dumps(body.get("messages", []))
            question = _question(text, plan.questions)
            key = (model, question)
            delay = 0.0
            with ledger.lock:
                index = len(ledger.calls)
                requests[model] = number = requests.get(model, 0) + 1
                entry: dict[str, Any] = {
                    "model": model,
                    "question": question,
                    "status": 200,
                    "prompt_tokens": 0,
                    "completion_tokens": 0,
                    "target": None,
                }
                ledger.calls.append(entry)
                held = model in plan.stall and number == 1
                if number in plan.http_500.get(model, ()):
                    entry["kind"] = "http_500"
                    entry["status"] = 500
                elif held:
                    entry["kind"] = "stalled"
                    entry["status"] = 0  # never answered: the client gave up first
                else:
                    mcp_tool = next((t for t in sorted(tools) if t.endswith("multiply")), None)
                    if mcp_tool is not None and key not in used_tool and key not in answered:
                        used_tool.add(key)
                        kind, args = (
                            mcp_tool,
                            {"a": 6, "b": -7 if plan.mcp_error else 0 if plan.mcp_crash else 7},
                        )
                    elif "new_answer" in tools and key not in answered:
                        answered[key] = 1
                        kind, args = "new_answer", {"content": f"The answer from {model} is 42."}
                        delay = plan.late.get(model, 0.0)
                    elif "vote" in tools:
                        kind = "vote"  # for the first agent whose answer is in the context
                        options = _vote_options(body) or ["agent1"]
                        target = "agent9" if model == plan.bad_voter else options[0]
                        args = {"agent_id": target, "reason": f"{target} explains it best"}
                        entry["target"] = target
                    else:
                        kind, args = "text", {}
                    entry["kind"] = kind
                    entry["prompt_tokens"] = 100 + len(text) % 97 + index
                    entry["completion_tokens"] = 20 + index
            if held:
                plan.stalled.set()
                plan.release.wait(600)
                return
            if entry["status"] != 200:
                self._error(entry["status"])
                return
            if delay:
                time.sleep(delay)
            self._stream(entry, kind, args, text_chunks)

        def _error(self, status: int) -> None:
            payload = json.dumps({"error": {"message": "upstream failure", "type": "server_error"}}).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(payload)
            self.close_connection = True

        def _stream(self, entry: dict[str, Any], kind: str, args: dict[str, Any], chunks: int) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            base = {
                "id": f"c{id(entry)}",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": entry["model"],
            }

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
                for word in (words * ((chunks + len(words) - 1) // len(words)))[:chunks]:
                    send(
                        [{"index": 0, "delta": {"role": "assistant", "content": word}, "finish_reason": None}]
                    )
                if kind != "text":
                    call = {
                        "index": 0,
                        "id": f"call_{id(entry)}",
                        "type": "function",
                        "function": {"name": kind, "arguments": json.dumps(args)},
                    }
                    send([{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}])
                    send([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}])
                else:
                    send([{"index": 0, "delta": {}, "finish_reason": "stop"}])
                prompt, completion = entry["prompt_tokens"], entry["completion_tokens"]
                usage = {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                }
                send([], usage=usage)
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = FakeServer(("127.0.0.1", 0), Handler)
    server.by_key = {}
    server.begin(ledger, plan)
    return server


if __name__ == "__main__":  # a standalone server for trying MassGen by hand
    ledger = Ledger()
    server = make_server(ledger)
    print(f"http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print(json.dumps(ledger.calls), file=sys.stderr)
