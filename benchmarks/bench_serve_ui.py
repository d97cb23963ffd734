"""`mastrace serve`'s UI: startup to first answer, resident memory while idle, and the first paint of
a 10,000-span trace in headless Chromium (goals: <= 1 s, <= 80 MB, <= 1 s).

Run: `python benchmarks/bench_serve_ui.py [--spans N] [--repeat N]` (needs Playwright and Chromium).
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import mastrace


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start_serve(store: Path) -> tuple[subprocess.Popen[bytes], int, float]:
    http, grpc = free_port(), free_port()
    mastrace_bin = Path(sys.executable).parent / "mastrace"
    began = time.perf_counter()
    proc = subprocess.Popen(
        [
            str(mastrace_bin),
            "serve",
            "--store",
            str(store),
            "--http-port",
            str(http),
            "--grpc-port",
            str(grpc),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{http}/health", timeout=1) as reply:
                if reply.status == 200:
                    return proc, http, time.perf_counter() - began
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("mastrace serve exited") from None
            time.sleep(0.01)


def write_trace(store: Path, n: int) -> str:
    mastrace.configure(local=store, service_name="bench-ui")
    tracer = mastrace.get_tracer("bench")
    with tracer.span("coordination.session") as root:
        for i in range(n // 100):
            with tracer.span(f"agent.a{i % 4}.round_{i}"):
                for j in range(99):
                    with tracer.span(f"step {i}.{j}", attributes={"i": i, "j": j}):
                        pass
    mastrace.shutdown()
    assert root.span_context is not None
    return f"{root.span_context.trace_id:032x}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mastrace-bench-ui-") as folder:
        store = Path(folder) / "store"
        startups = []
        for _ in range(args.repeat):
            proc, _, took = start_serve(Path(folder) / "empty")
            startups.append(took)
            proc.terminate()
            proc.wait()
        median = statistics.median(startups)
        print(f"startup to first answer (HTTP and gRPC on): median {median:.2f} s (goal <= 1 s)")
        trace_id = write_trace(store, args.spans)
        proc, port, _ = start_serve(store)
        try:
            time.sleep(2)
            print(f"resident memory while idle: {rss_mb(proc.pid):.0f} MB (goal <= 80 MB)")
            from playwright.sync_api import sync_playwright

            executable = shutil.which("chromium") or shutil.which("chromium-browser")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox"], headless=True)
                paints = []
                for _ in range(args.repeat):
                    page = browser.new_page(viewport={"width": 1400, "height": 900})
                    began = time.perf_counter()
                    page.goto(f"http://127.0.0.1:{port}/runs/{trace_id}")
                    page.wait_for_selector(".row", timeout=30_000)
                    paints.append(time.perf_counter() - began)
                    rows = page.locator(".row").count()
                    page.close()
                browser.close()
            print(
                f"first paint of a {args.spans:,}-span trace in headless Chromium: median "
                f"{statistics.median(paints):.2f} s, {rows} rows in the page (goal <= 1 s)"
            )
            print(f"resident memory after serving it: {rss_mb(proc.pid):.0f} MB")
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
