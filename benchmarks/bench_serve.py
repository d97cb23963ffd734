"""`mastrace serve` intake throughput: spans sent over OTLP/HTTP and OTLP/gRPC into the local store,
vs the same spans exported in-process into a store (goal >= 0.5x, and >= 50k spans/s).

Run: `python benchmarks/bench_serve.py [--spans N]`
"""

from __future__ import annotations

import argparse
import http.client
import tempfile
import time
from pathlib import Path

from bench_store import build_spans
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

from mastrace._snapshot import Limits
from mastrace._transform import prepare_span
from mastrace.scrubbing._engine import Scrubber
from mastrace.serve import start_intake
from mastrace.store import LocalStoreExporter

BATCH = 512


def in_process(spans: list, folder: Path) -> float:
    exporter, scrubber, limits = LocalStoreExporter(folder / "inproc"), Scrubber(), Limits()
    start = time.perf_counter()
    for i in range(0, len(spans), BATCH):
        exporter.export([prepare_span(s, scrubber, limits) for s in spans[i : i + BATCH]])
    exporter.shutdown()
    return time.perf_counter() - start


def over_http(spans: list, folder: Path) -> float:
    server = start_intake(folder / "http", http_port=0, grpc_port=None)
    bodies = [encode_spans(spans[i : i + BATCH]).SerializeToString() for i in range(0, len(spans), BATCH)]
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port)
    start = time.perf_counter()
    for body in bodies:
        conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
        conn.getresponse().read()
    elapsed = time.perf_counter() - start
    server.stop()
    assert server.intake.stored == len(spans)
    return elapsed


def over_grpc(spans: list, folder: Path) -> float:
    server = start_intake(folder / "grpc", http_port=None, grpc_port=0)
    exporter = GrpcExporter(endpoint=f"127.0.0.1:{server.grpc_port}", insecure=True)
    start = time.perf_counter()
    for i in range(0, len(spans), BATCH):
        exporter.export(spans[i : i + BATCH])
    elapsed = time.perf_counter() - start
    exporter.shutdown()
    server.stop()
    assert server.intake.stored == len(spans)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=50_000)
    args = parser.parse_args()
    spans = build_spans(args.spans)
    with tempfile.TemporaryDirectory(prefix="mastrace-bench-") as folder:
        base = in_process(spans, Path(folder))
        for name, run in (("OTLP/HTTP", over_http), ("OTLP/gRPC", over_grpc)):
            took = run(spans, Path(folder))
            print(
                f"{name}: {len(spans) / took:,.0f} spans/s vs in-process {len(spans) / base:,.0f} spans/s "
                f"-> {base / took:.2f}x (goal >= 0.5x, >= 50,000 spans/s)"
            )


if __name__ == "__main__":
    main()
