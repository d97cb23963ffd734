"""`instrument_openai()` overhead: a 50-chunk streamed chat completion against a loopback
OpenAI-compatible server, with the real `openai` client, instrumented vs not (goal <= 1.05x wall).

The two variants alternate, `--rounds` times `--n` calls each; the median per call is compared.

Run: `python benchmarks/bench_openai.py [--n N] [--rounds N]`
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
from _common import DroppingExporter

import mastrace
from mastrace.integrations.openai import instrument_openai, uninstrument_openai

CHUNKS = 50


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        parts = [
            f"data: {json.dumps({**base, 'choices': [{'index': 0, 'delta': {'content': 'tok '}}]})}\n\n"
            for _ in range(CHUNKS)
        ]
        usage = {"prompt_tokens": 10, "completion_tokens": CHUNKS, "total_tokens": 10 + CHUNKS}
        parts.append(f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n")
        body = "".join(parts).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = openai.OpenAI(
        base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="x", max_retries=0
    )
    mastrace.configure(local=False, exporters=[DroppingExporter()])  # spans made and exported, then dropped

    def call() -> None:
        stream = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        for _ in stream:
            pass

    samples: dict[str, list[float]] = {"plain": [], "instrumented": []}
    for _ in range(3):
        call()
    for _ in range(args.rounds):
        for name in samples:
            if name == "instrumented":
                instrument_openai()
            start = time.perf_counter()
            for _ in range(args.n):
                call()
            samples[name].append((time.perf_counter() - start) / args.n * 1e3)
            uninstrument_openai()
    plain, traced = statistics.median(samples["plain"]), statistics.median(samples["instrumented"])
    ratio = traced / plain
    print(f"50-chunk streamed call: plain {plain:.2f} ms, instrumented {traced:.2f} ms -> {ratio:.3f}x")
    print("goal: <= 1.05x")
    mastrace.shutdown()
    server.shutdown()


if __name__ == "__main__":
    main()
