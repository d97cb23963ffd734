"""`instrument_openai()` overhead on a 50-chunk streamed chat completion, content capture off and on,
against the same call uninstrumented and under the OpenTelemetry reference instrumentation
(`opentelemetry-instrumentation-openai-v2`, latest conventions), in one run.

The loopback OpenAI-compatible server runs in a process of its own, so every client below sees the
same server. mastrace's variants run in this process (configured with a dropping exporter and, like
the reference, an application MeterProvider, so metrics are computed too). The reference needs
`wrapt<2` and runs in its own environment (`.venv-genai-ref`, `make .venv-genai-ref/.synced`), in a
worker process that measures its variants, and its own uninstrumented baseline, when asked: each
round runs every variant in turn, `--n` calls each, and the medians per call are compared. Every
variant's timing ends with a flush of its tracer provider, so the export threads' work on a
variant's spans is charged to that variant, not to whichever runs next. Goals: <= 1.05x
uninstrumented with capture off, <= 1.10x with it on, and below the reference in both.

Run: `python benchmarks/bench_openai.py [--n N] [--rounds N]`
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CHUNKS = 50
HERE = Path(__file__).resolve().parent
REFERENCE_PYTHON = HERE.parent / ".venv-genai-ref" / "bin" / "python"
MESSAGES = [
    {"role": "system", "content": "You are a terse assistant. " * 8},
    {"role": "user", "content": "Summarise the answers so far and vote for the best one. " * 4},
]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else delayed ACKs add ~40 ms to every keep-alive request

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        parts = [
            f"data: {json.dumps({**base, 'choices': [{'index': 0, 'delta': {'content': 'tok '}}]})}\n\n"
            for _ in range(CHUNKS)
        ]
        last = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        usage = {"prompt_tokens": 10, "completion_tokens": CHUNKS, "total_tokens": 10 + CHUNKS}
        parts.append(f"data: {json.dumps(last)}\n\n")
        parts.append(f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n")
        body = "".join(parts).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


def serve_forever() -> None:
    """The server process: prints its port, serves until killed."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


def make_call(url: str) -> Callable[[int], None]:
    import openai

    client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)

    def calls(n: int) -> None:
        for _ in range(n):
            stream = client.chat.completions.create(
                model="m", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
            )
            for _ in stream:
                pass

    return calls


def _timed(fn: Callable[[int], None], n: int, flush: Callable[[], object]) -> tuple[float, float]:
    """Wall-clock and CPU milliseconds per call, the spans of the calls exported (`flush`). CPU time is
    the client process's, every thread of it (the export threads included): it is what
    instrumentation costs, and it moves far less than wall-clock time when other processes load
    the machine."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn(n)
    flush()
    return (time.perf_counter() - wall) / n * 1e3, (time.process_time() - cpu) / n * 1e3


def reference_worker(url: str) -> None:
    """The reference's process: answers `<variant> <n>` lines with milliseconds per call."""
    from opentelemetry import metrics, trace
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Dropping(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropping()))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    calls = make_call(url)
    instrumentor = OpenAIInstrumentor()
    for line in sys.stdin:
        variant, n = line.split()
        if variant != "plain":
            os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = (
                "SPAN_ONLY" if variant == "on" else "NO_CONTENT"
            )
            instrumentor.instrument()
        wall, cpu = _timed(calls, int(n), provider.force_flush)
        if variant != "plain":
            instrumentor.uninstrument()
        print(wall, cpu, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    server = subprocess.Popen([sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True)
    worker = None
    try:
        assert server.stdout is not None
        url = f"http://127.0.0.1:{server.stdout.readline().strip()}/v1"
        if REFERENCE_PYTHON.exists():
            worker = subprocess.Popen(
                [str(REFERENCE_PYTHON), __file__, "--reference", url],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        else:
            print(f"(no reference: {REFERENCE_PYTHON} is missing; run make .venv-genai-ref/.synced)")
        samples = measure(url, worker, args.n, args.rounds)
    finally:
        for process in (worker, server):
            if process is not None:
                process.kill()
                process.wait()
    report(samples)


def measure(url: str, worker: subprocess.Popen[str] | None, n: int, rounds: int) -> dict[str, list[float]]:
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    sys.path.insert(0, str(HERE))
    from _common import DroppingExporter

    import mastrace
    from mastrace.integrations.openai import instrument_openai, uninstrument_openai

    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    mastrace.configure(local=False, exporters=[DroppingExporter()])  # spans made, exported, dropped
    calls = make_call(url)

    def ours(capture: bool) -> Callable[[int], None]:
        def run(count: int) -> None:
            instrument_openai(capture_content=capture)
            try:
                calls(count)
            finally:
                uninstrument_openai()

        return run

    local = {
        "uninstrumented": calls,
        "mastrace, capture off": ours(False),
        "mastrace, capture on": ours(True),
    }
    remote = {
        "reference: uninstrumented": "plain",
        "reference, capture off": "off",
        "reference, capture on": "on",
    }
    names = [*local, *(remote if worker else {})]
    samples: dict[str, list[float]] = {f"{name} {unit}": [] for name in names for unit in ("wall", "cpu")}
    for fn in local.values():
        fn(3)  # warm up
    for round_no in range(rounds + 1):
        measured = {name: _timed(fn, n, mastrace.force_flush) for name, fn in local.items()}
        if worker is not None and worker.stdin is not None and worker.stdout is not None:
            for name, variant in remote.items():
                worker.stdin.write(f"{variant} {n}\n")
                worker.stdin.flush()
                wall, cpu = worker.stdout.readline().split()
                measured[name] = (float(wall), float(cpu))
        for name, (wall, cpu) in measured.items():
            if round_no:  # round 0 warms up
                samples[f"{name} wall"].append(wall)
                samples[f"{name} cpu"].append(cpu)
    mastrace.shutdown()
    return samples


def _ratio(samples: dict[str, list[float]], name: str, baseline: str) -> float:
    """The median over rounds of `name` / `baseline` measured in the same round (load cancels out)."""
    return statistics.median(a / b for a, b in zip(samples[name], samples[baseline], strict=True))


def report(samples: dict[str, list[float]]) -> None:
    rounds = len(samples["uninstrumented wall"])
    print(f"\n{CHUNKS}-chunk streamed call, median ms per call over {rounds} rounds")
    for name, values in samples.items():
        print(f"  {name:<32} {statistics.median(values):8.3f} ms")
    for unit in ("cpu", "wall"):
        plain = f"uninstrumented {unit}"
        rows = [
            (
                f"mastrace, capture {mode} / uninstrumented",
                _ratio(samples, f"mastrace, capture {mode} {unit}", plain),
                goal,
            )
            for mode, goal in (("off", "<= 1.05"), ("on", "<= 1.10"))
        ]
        if f"reference, capture off {unit}" in samples:
            for mode in ("off", "on"):
                ref = _ratio(
                    samples, f"reference, capture {mode} {unit}", f"reference: uninstrumented {unit}"
                )
                ours = _ratio(samples, f"mastrace, capture {mode} {unit}", plain)
                rows.append((f"reference, capture {mode} / its uninstrumented", ref, ""))
                rows.append((f"mastrace / reference overhead, capture {mode}", ours / ref, "< 1"))
        print(f"\n  {unit} time: ratio (median of per-round ratios)          measured  goal")
        for label, ratio, goal in rows:
            print(f"  {label:<52} {ratio:7.3f}×  {goal}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve_forever()
    elif sys.argv[1:2] == ["--reference"]:
        reference_worker(sys.argv[2])
    else:
        main()
