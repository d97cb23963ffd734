"""`mastrace serve`'s UI: startup to first answer, resident memory while idle, the first paint of a
10,000-span trace and of its coordination graph in headless Chromium (goals: <= 1 s, <= 80 MB, <= 1 s,
<= 1 s), and how soon a live 3-agent run's started rounds are on screen (goal: within one poll interval
of the answer that first holds them, i.e. start -> on screen <= flush interval + poll interval).

Run: `python benchmarks/bench_serve_ui.py [--spans N] [--repeat N]` (needs Playwright and Chromium).
"""

from __future__ import annotations

import argparse
import os
import secrets
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


POLL_S = 1.5  # run.html's POLL_MS
FLUSH_S = 0.5  # the default flush interval

LIVE = """
import os, sys, time
import mastrace
store, control = sys.argv[1], sys.argv[2]
mastrace.configure(local=store, service_name="bench-live")
tracer = mastrace.get_tracer("live")
with tracer.span("coordination.session"):
    time.sleep(0.5)
    started = time.time_ns()
    rounds = [tracer.start_span(f"agent.agent_{a}.round_0", {"massgen.agent_id": a}) for a in "abc"]
    with open(control + ".tmp", "w") as out:
        out.write(str(started))
    os.replace(control + ".tmp", control)
    while not os.path.exists(control + ".release"):
        time.sleep(0.02)
    for span in rounds:
        span.end()
mastrace.shutdown()
"""


def live_round_latency(browser: object, port: int, store: Path, folder: Path, index: int) -> float:
    """Seconds from a live run's rounds' start to all three on screen in a run page opened before."""
    trace_id = secrets.token_hex(16)
    page = browser.new_page(viewport={"width": 1400, "height": 900})  # type: ignore[attr-defined]
    page.goto(f"http://127.0.0.1:{port}/runs/{trace_id}")
    page.wait_for_selector("#status:has-text('no such run')", timeout=30_000)
    control = folder / f"live-{index}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTRACE_", "OTEL_"))}
    env["TRACEPARENT"] = f"00-{trace_id}-{secrets.token_hex(8)}-01"
    proc = subprocess.Popen([sys.executable, "-c", LIVE, str(store), str(control)], env=env)
    try:
        for agent in "abc":
            page.wait_for_selector(
                f".row.running:has(.label:text-is('agent.agent_{agent}.round_0'))", timeout=60_000
            )
        seen = time.time_ns()
        started = int(control.read_text())
        (folder / f"live-{index}.release").touch()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        page.close()
    return (seen - started) / 1e9


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
                paints, graphs = [], []
                for _ in range(args.repeat):
                    page = browser.new_page(viewport={"width": 1400, "height": 900})
                    began = time.perf_counter()
                    page.goto(f"http://127.0.0.1:{port}/runs/{trace_id}")
                    page.wait_for_selector(".row", timeout=30_000)
                    paints.append(time.perf_counter() - began)
                    rows = page.locator(".row").count()
                    began = time.perf_counter()
                    page.click("#show-graph")
                    page.wait_for_selector(
                        "#graph svg.coordination-graph, #graph-status:not(:empty)", timeout=30_000
                    )
                    graphs.append(time.perf_counter() - began)
                    page.close()
                latencies = [
                    live_round_latency(browser, port, store, Path(folder), i) for i in range(args.repeat)
                ]
                browser.close()
            print(
                f"first paint of a {args.spans:,}-span trace in headless Chromium: median "
                f"{statistics.median(paints):.2f} s, {rows} rows in the page (goal <= 1 s)"
            )
            print(
                f"first paint of its coordination graph (after the page): median "
                f"{statistics.median(graphs):.2f} s (goal <= 1 s)"
            )
            worst = max(latencies)
            print(
                f"live 3-agent run, rounds' start -> all three on screen as running: median "
                f"{statistics.median(latencies):.2f} s, worst {worst:.2f} s over {len(latencies)} runs; "
                f"worst / (flush {FLUSH_S} s + one poll {POLL_S} s) = {worst / (FLUSH_S + POLL_S):.2f}× "
                "(goal <= 1.0×)"
            )
            print(f"resident memory after serving it: {rss_mb(proc.pid):.0f} MB")
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
