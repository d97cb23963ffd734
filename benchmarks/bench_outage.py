"""A collector that is down: exit time, store-and-forward, memory, and reading many stores.

Printed side by side in one run:

1. exit time of a 2-span script with a live collector vs one whose port refuses (goal: <= 1 s more);
2. a run with an outage in the middle, then `mastrace push`: spans missing at the receiver and
   duplicates (goal 0 and 0), and push throughput;
3. peak RSS of a process exporting spans to a collector that hangs vs to none (goal <= 50 MB more);
4. reading 4 stores of N/4 spans vs one store of N (`mastrace runs`'s query; goal <= 1.2x).

Run: `python benchmarks/bench_outage.py [--spans N] [--outage SECONDS]`
"""

from __future__ import annotations

import argparse
import gzip
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

ENV = {k: v for k, v in os.environ.items() if not k.startswith(("MASTRACE_", "OTEL_"))}
MASTRACE = Path(sys.executable).parent / "mastrace"


class Receiver:
    def __init__(self, port: int = 0) -> None:
        self.ids: Counter[bytes] = Counter()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                for rs in ExportTraceServiceRequest.FromString(body).resource_spans:
                    for ss in rs.scope_spans:
                        receiver.ids.update(s.span_id for s in ss.spans)
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


EXIT = textwrap.dedent(
    """
    import sys, mastrace
    mastrace.configure(otlp=sys.argv[1], local=sys.argv[2])
    t = mastrace.get_tracer("x")
    with t.span("a"):
        with t.span("b"):
            pass
    """
)


def exit_times(tmp: Path) -> tuple[float, float]:
    live, dead = [], []
    receiver = Receiver()
    try:
        for i in range(3):
            for url, out in (
                (f"http://127.0.0.1:{receiver.port}", live),
                (f"http://127.0.0.1:{free_port()}", dead),
            ):
                start = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-c", EXIT, url, str(tmp / f"exit{i}")], env=ENV, capture_output=True
                )
                out.append(time.perf_counter() - start)
    finally:
        receiver.stop()
    return min(live), min(dead)


def outage(tmp: Path, spans: int, seconds: float) -> tuple[int, int, int, float]:
    import mastrace

    store = tmp / "outage"
    receiver = Receiver()
    port = receiver.port
    mastrace.configure(local=store, otlp=f"http://127.0.0.1:{port}", service_name="outage")
    tracer = mastrace.get_tracer("outage")
    third = spans // 3
    for i in range(third):
        with tracer.span("before", attributes={"i": i}):
            pass
    mastrace.force_flush(timeout=30)
    receiver.stop()
    first = receiver.ids
    deadline = time.monotonic() + seconds
    i = 0
    while time.monotonic() < deadline or i < third:
        with tracer.span("during", attributes={"i": i}):
            pass
        i += 1
        if i >= third:
            time.sleep(0.01)
    receiver = Receiver(port)
    for i in range(third):
        with tracer.span("after", attributes={"i": i}):
            pass
    mastrace.shutdown()
    start = time.perf_counter()
    proc = subprocess.run(
        [str(MASTRACE), "push", "--to", f"http://127.0.0.1:{port}", "--store", str(store)],
        env=ENV,
        capture_output=True,
        text=True,
    )
    took = time.perf_counter() - start
    receiver.stop()
    from mastrace.store import query

    stored = {bytes.fromhex(r["span_id"]) for r in query("SELECT span_id FROM records", store)}
    got = first + receiver.ids  # what the collector got before the outage, after it, and from push
    return (
        len(stored),
        len(stored - set(got)),
        sum(n - 1 for n in got.values() if n > 1),
        took if proc.returncode == 0 else float("nan"),
    )


RSS = textwrap.dedent(
    """
    import resource, sys, mastrace
    otlp = sys.argv[2] or None
    mastrace.configure(local=sys.argv[1], otlp=otlp, otlp_exit_timeout=0.1)
    t = mastrace.get_tracer("rss")
    for i in range(int(sys.argv[3])):
        with t.span("work", attributes={"i": i, "model": "gpt-x", "round": i % 5}):
            pass
    mastrace.force_flush(timeout=5)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    """
)


def peak_rss(tmp: Path, spans: int) -> tuple[float, float]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)  # accepts connections, never answers: a hung collector
    try:
        out = []
        for otlp in ("", f"http://127.0.0.1:{sock.getsockname()[1]}"):
            env = {**ENV, "OTEL_EXPORTER_OTLP_TIMEOUT": "2"}
            proc = subprocess.run(
                [sys.executable, "-c", RSS, str(tmp / f"rss{len(out)}"), otlp, str(spans)],
                env=env,
                capture_output=True,
                text=True,
            )
            out.append(float(proc.stdout.split()[-1]))
        return out[0], out[1]
    finally:
        sock.close()


def many_stores(tmp: Path, spans: int) -> tuple[float, float]:
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_store import build_spans

    from mastrace.analysis import TraceStore
    from mastrace.store import LocalStoreExporter

    built = build_spans(spans)
    one = LocalStoreExporter(tmp / "one")
    one.export(built)
    one.shutdown()
    quarter = len(built) // 4
    for k in range(4):
        part = LocalStoreExporter(tmp / f"four{k}")
        part.export(built[k * quarter : (k + 1) * quarter])
        part.shutdown()
    times: dict[str, list[float]] = {"one": [], "four": []}
    for _ in range(3):
        for name, paths in (("one", [tmp / "one"]), ("four", [tmp / f"four{k}" for k in range(4)])):
            start = time.perf_counter()
            with TraceStore(paths) as store:
                store.runs()
            times[name].append(time.perf_counter() - start)
    return min(times["one"]), min(times["four"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--spans", type=int, default=200_000, help="spans for the memory and many-stores parts"
    )
    parser.add_argument("--outage", type=float, default=3.0, help="seconds the collector is down (issue: 30)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mastrace-bench-") as folder:
        tmp = Path(folder)
        live, dead = exit_times(tmp)
        print(
            f"exit, 2-span script:     live collector {live:.2f} s, refusing port {dead:.2f} s "
            f"-> {dead - live:+.2f} s (goal <= +1 s)"
        )
        stored, missing, duplicates, took = outage(tmp, 3_000, args.outage)
        print(
            f"outage of {args.outage:.0f} s then push: {stored} spans stored, {missing} missing at the "
            f"receiver, {duplicates} duplicates (goals 0, 0); push took {took:.2f} s"
        )
        idle, hung = peak_rss(tmp, args.spans)
        print(
            f"peak RSS, {args.spans:,} spans: no collector {idle:.0f} MB, hung collector {hung:.0f} MB "
            f"-> {hung - idle:+.0f} MB (goal <= +50 MB)"
        )
        one, four = many_stores(tmp, args.spans)
        print(
            f"`runs` over {args.spans:,} spans: one store {one:.3f} s, four stores {four:.3f} s "
            f"-> {four / one:.2f}x (goal <= 1.2x)"
        )


if __name__ == "__main__":
    main()
