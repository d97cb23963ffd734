"""`mastrace serve` under load and under attack: throughput, memory and latency, side by side.

Each part starts `mastrace serve` in a process of its own (so that its peak memory, VmHWM, is its
alone) and prints what it measured:

1. intake: OTLP/HTTP protobuf batches of 512 spans from 1 sender, then from 8 at once, against the
   same spans exported in-process into a store: spans/s, ratios, server peak RSS (goal: <= 300 MB);
   OTLP/gRPC from 1 sender;
2. a gzip bomb (1 MB inflating to 1 GiB): the answer, its time, server peak RSS;
3. 8 senders posting 30 MB bodies at once (protobuf, then JSON), each retrying after 503 as its
   `Retry-After` says: answers, spans stored, server peak RSS (goal: <= 300 MB);
4. intake latency (a 50-span POST, sequential) on a store of 300,000 spans, alternating phases
   without and with one open runs-list tab (a client polling `/api/runs` as the page does: one
   request at a time, 1.5 s after the last answer, with its ETag): the ratio of the medians
   (goal: <= 2x).

Run: `python benchmarks/bench_serve.py [--spans N] [--store-spans N] [--rounds N] [--skip PART ...]`
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter
from pathlib import Path

from bench_analyze import write_store
from bench_store import build_spans
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from mastrace.pipeline._transform import prepare_span
from mastrace.scrubbing._engine import Scrubber
from mastrace.store import LocalStoreExporter
from mastrace.tracing._snapshot import Limits

BATCH = 512
RSS_GOAL_MB = 300
LATENCY_GOAL = 2.0
MASTRACE = Path(sys.executable).parent / "mastrace"
PROTOBUF = {"Content-Type": "application/x-protobuf"}


class Serve:
    """`mastrace serve` in its own process."""

    def __init__(self, store: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTRACE_", "OTEL_"))}
        self.process = subprocess.Popen(
            [str(MASTRACE), "serve", "--http-port", "0", "--grpc-port", "0", "--store", str(store)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        first = self.process.stdout.readline()
        self.http_port = int(re.findall(r"http://[^:]+:(\d+)/", first)[0])
        self.grpc_port = int(re.findall(r"OTLP/gRPC on [^:]+:(\d+)", first)[0])

    def rss_mb(self, field: str = "VmHWM") -> float:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(re.findall(rf"{field}:\s+(\d+) kB", status)[0]) / 1024

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.communicate(timeout=120)


def post(
    port: int, body: bytes, headers: dict[str, str], conn: http.client.HTTPConnection | None = None
) -> tuple[int, dict[str, str]]:
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        conn.request("POST", "/v1/traces", body, headers)
        response = conn.getresponse()
        response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}
    finally:
        if own:
            conn.close()


def post_until_taken(port: int, body: bytes, headers: dict[str, str], codes: Counter[int]) -> None:
    """POST `body`, retrying after 503/429 as `Retry-After` says, until it is taken."""
    while True:
        status, reply = post(port, body, headers)
        codes[status] += 1
        if status not in (429, 503):
            return
        time.sleep(float(reply.get("retry-after", "1")))


def _send_all(port: int, bodies: list[bytes]) -> None:
    """POST each body on one kept-alive connection (retrying after 503 as told)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    for body in bodies:
        status, _ = post(port, body, PROTOBUF, conn)
        if status != 200:
            post_until_taken(port, body, PROTOBUF, Counter())
    conn.close()


def _run_all(threads: list[threading.Thread]) -> float:
    """Seconds the threads take, all started at once."""
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start


def _met(value: float, goal: float, unit: str) -> str:
    return f"({'met' if value <= goal else 'NOT met'}: <= {goal:g}{unit})"


def in_process(spans: list[ReadableSpan], folder: Path) -> float:
    exporter, scrubber, limits = LocalStoreExporter(folder / "inproc"), Scrubber(), Limits()
    start = time.perf_counter()
    for i in range(0, len(spans), BATCH):
        exporter.export([prepare_span(s, scrubber, limits) for s in spans[i : i + BATCH]])
    exporter.shutdown()
    return time.perf_counter() - start


def part_intake(spans: list[ReadableSpan], folder: Path) -> None:
    bodies = [encode_spans(spans[i : i + BATCH]).SerializeToString() for i in range(0, len(spans), BATCH)]
    base = in_process(spans, folder)
    print(f"\n1. intake of {len(spans):,} spans (batches of {BATCH})")
    print(f"  in-process export into a store: {len(spans) / base:10,.0f} spans/s")
    for senders in (1, 8):
        serve = Serve(folder / f"intake-{senders}")
        idle = serve.rss_mb("VmRSS")
        share = [bodies[i::senders] for i in range(senders)]

        threads = [threading.Thread(target=_send_all, args=(serve.http_port, mine)) for mine in share]
        took = _run_all(threads)
        peak = serve.rss_mb()
        serve.stop()
        print(
            f"  OTLP/HTTP, {senders} sender(s): {len(spans) / took:10,.0f} spans/s = {base / took:.2f}x "
            f"in-process; server RSS idle {idle:.0f} MB, peak {peak:.0f} MB {_met(peak, RSS_GOAL_MB, ' MB')}"
        )
    serve = Serve(folder / "intake-grpc")
    exporter = GrpcExporter(endpoint=f"127.0.0.1:{serve.grpc_port}", insecure=True, timeout=600)
    start = time.perf_counter()
    for i in range(0, len(spans), BATCH):
        exporter.export(spans[i : i + BATCH])
    took = time.perf_counter() - start
    exporter.shutdown()
    peak = serve.rss_mb()
    serve.stop()
    print(
        f"  OTLP/gRPC, 1 sender:  {len(spans) / took:10,.0f} spans/s = {base / took:.2f}x; peak {peak:.0f} MB"
    )


def part_bomb(folder: Path) -> None:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = b"\0" * (1 << 20)
    bomb = b"".join(packer.compress(zeros) for _ in range(1024)) + packer.flush()
    serve = Serve(folder / "bomb")
    idle = serve.rss_mb("VmRSS")
    start = time.perf_counter()
    status, _ = post(serve.http_port, bomb, {**PROTOBUF, "Content-Encoding": "gzip"})
    took = time.perf_counter() - start
    peak = serve.rss_mb()
    serve.stop()
    print(f"\n2. gzip bomb: {len(bomb) / 1e6:.1f} MB inflating to 1 GiB")
    print(
        f"  answer {status} in {took:.2f} s; server RSS idle {idle:.0f} MB, peak {peak:.0f} MB "
        f"({'met' if peak <= RSS_GOAL_MB else 'NOT met'}: <= {RSS_GOAL_MB} MB)"
    )


def big_body(megabytes: int) -> tuple[bytes, int]:
    """An OTLP protobuf body of about `megabytes` MB (spans with a 1 KB attribute) and its span count."""
    kept: list[ReadableSpan] = []

    class Keep:
        def export(self, spans: list[ReadableSpan]) -> int:
            kept.extend(spans)
            return 0

        def shutdown(self) -> None:
            pass

        def force_flush(self, timeout_millis: int = 0) -> bool:
            return True

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Keep()))  # type: ignore[arg-type]
    tracer = provider.get_tracer("bench.serve")
    n = megabytes * 1000
    for i in range(n):
        with tracer.start_as_current_span(f"big.{i % 10}", attributes={"pad": "p" * 900, "i": i}):
            pass
    provider.shutdown()
    return encode_spans(kept).SerializeToString(), n


def part_big_senders(folder: Path, megabytes: int = 30, senders: int = 8) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    body, _ = big_body(megabytes)
    sample, sample_n = big_body(1)
    per_span = (
        len(json_format.MessageToJson(ExportTraceServiceRequest.FromString(sample), indent=None)) / sample_n
    )
    json_spans = int(megabytes * 1e6 / per_span)  # as many spans as make about `megabytes` MB of JSON
    json_body = json_format.MessageToJson(
        ExportTraceServiceRequest.FromString(big_body(max(1, json_spans // 1000))[0]), indent=None
    ).encode()
    print(f"\n3. {senders} senders of ~{megabytes} MB bodies at once, each retrying after 503 as told")
    for label, data, headers in (
        ("protobuf", body, PROTOBUF),
        ("JSON", json_body, {"Content-Type": "application/json"}),
    ):
        serve = Serve(folder / f"big-{label}")
        codes: Counter[int] = Counter()
        threads = [
            threading.Thread(target=post_until_taken, args=(serve.http_port, data, headers, codes))
            for _ in range(senders)
        ]
        took = _run_all(threads)
        peak = serve.rss_mb()
        serve.stop()
        answers = ", ".join(f"{count}x {status}" for status, count in sorted(codes.items()))
        print(
            f"  {label:8} {len(data) / 1e6:5.1f} MB each: answers {answers}; all taken in {took:.1f} s; "
            f"server peak RSS {peak:.0f} MB {_met(peak, RSS_GOAL_MB, ' MB')}"
        )


def part_latency(folder: Path, store_spans: int, rounds: int, posts: int = 40) -> None:
    store = folder / "latency"
    write_store(store, store_spans)
    serve = Serve(store)
    small = [encode_spans(s).SerializeToString() for s in (build_spans(50) for _ in range(posts))]
    tab_on = threading.Event()
    stop = threading.Event()
    polls: list[float] = []

    def tab() -> None:  # what the runs page does: one request at a time, its ETag, 1.5 s apart
        etag = None
        while not stop.is_set():
            if not tab_on.wait(0.1):
                continue
            conn = http.client.HTTPConnection("127.0.0.1", serve.http_port, timeout=600)
            start = time.perf_counter()
            conn.request("GET", "/api/runs", headers={"If-None-Match": etag} if etag else {})
            response = conn.getresponse()
            response.read()
            polls.append(time.perf_counter() - start)
            etag = response.getheader("ETag") or etag
            conn.close()
            stop.wait(1.5)

    poller = threading.Thread(target=tab, daemon=True)
    poller.start()
    samples: dict[bool, list[float]] = {False: [], True: []}
    conn = http.client.HTTPConnection("127.0.0.1", serve.http_port, timeout=600)
    for _ in range(rounds):
        for open_tab in (False, True):
            tab_on.set() if open_tab else tab_on.clear()
            time.sleep(2.0 if open_tab else 0.5)  # let the tab's first poll start, or the last end
            for body in small:
                start = time.perf_counter()
                status, _ = post(serve.http_port, body, PROTOBUF, conn)
                samples[open_tab].append(time.perf_counter() - start)
                assert status == 200, status
                time.sleep(0.05)
    stop.set()
    tab_on.set()
    poller.join(timeout=60)
    conn.close()
    serve.stop()
    without, with_tab = statistics.median(samples[False]), statistics.median(samples[True])
    p95 = lambda xs: sorted(xs)[int(0.95 * (len(xs) - 1))]  # noqa: E731
    print(
        f"\n4. intake latency, store of {store_spans:,} spans ({rounds} alternating rounds of {posts} POSTs)"
    )
    print(f"  without a tab: median {without * 1000:7.1f} ms, p95 {p95(samples[False]) * 1000:7.1f} ms")
    print(f"  one open tab:  median {with_tab * 1000:7.1f} ms, p95 {p95(samples[True]) * 1000:7.1f} ms")
    ratio = with_tab / without
    print(
        f"  ratio of medians {ratio:.2f}x {_met(ratio, LATENCY_GOAL, 'x')}; the tab's polls took median "
        f"{statistics.median(polls):.2f} s ({len(polls)} polls)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=50_000, help="spans for the throughput part")
    parser.add_argument(
        "--store-spans", type=int, default=300_000, help="spans in the store for the latency part"
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of the latency part")
    parser.add_argument("--skip", nargs="*", default=[], choices=["intake", "bomb", "big", "latency"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mastrace-bench-serve-") as tmp:
        folder = Path(tmp)
        if "intake" not in args.skip:
            part_intake(build_spans(args.spans), folder)
        if "bomb" not in args.skip:
            part_bomb(folder)
        if "big" not in args.skip:
            part_big_senders(folder)
        if "latency" not in args.skip:
            part_latency(folder, args.store_spans, args.rounds)


if __name__ == "__main__":
    main()
