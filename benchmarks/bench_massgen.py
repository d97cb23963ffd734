"""A real MassGen 0.1.97 run (3 agents, one with a stdio MCP server, loopback OpenAI-compatible
server) as users start it: `massgen ...` against `mastrace run -- massgen ...` (goal <= 1.05x).

Two figures per run, each a fresh process: the time from process start to the first LLM request
the server receives (everything mastrace does before MassGen's first call: import, configure,
instrumentation, the configuration snapshot), and the whole run. Each is measured as wall time and as
the process's CPU time (user + system, from /proc at the first request, from the kernel at exit): on a
shared, loaded machine the wall times scatter, the CPU times much less. The variants alternate
`--rounds` times (the first pair is a warm-up); the medians are compared, and so are the two variants
of each round (the median of the rounds' own ratios, which load that changes between rounds moves less).

Needs MassGen: `.venv-massgen/bin/python benchmarks/bench_massgen.py [--rounds N]`
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests_massgen.conftest import MODELS, write_config
from tests_massgen.fake_llm import Ledger, Plan, make_server

BIN = Path(sys.executable).parent
QUESTION = "What is six times seven?"


TICK = os.sysconf("SC_CLK_TCK")
Figures = tuple[float, float, float, float]  # wall to first request, wall total, CPU to first, CPU total


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def one_run(tmp: Path, variant: str) -> Figures:
    """Wall and CPU seconds to the first LLM request and for the whole run of one fresh process."""
    ledger = Ledger()
    server = make_server(ledger, Plan(questions=(QUESTION,)))
    first: list[float] = []
    handle = server.RequestHandlerClass.do_POST  # type: ignore[attr-defined]
    child: list[subprocess.Popen[str]] = []

    def timed(self: object) -> None:
        if not first:
            first.extend((time.time(), _cpu_seconds(child[0].pid)))
        handle(self)

    server.RequestHandlerClass.do_POST = timed  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        config = write_config(tmp, f"http://127.0.0.1:{server.server_address[1]}/v1", MODELS)
        massgen = ["massgen", "--automation", "--config", str(config), QUESTION]
        store = tmp / f"store-{time.monotonic_ns()}"
        command = (
            [str(BIN / "massgen"), *massgen[1:]]
            if variant == "without"
            else [str(BIN / "mastrace"), "run", "--store", str(store), "--", *massgen]
        )
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.time()
        proc = subprocess.Popen(command, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        child.append(proc)
        _, err = proc.communicate(timeout=900)
        total = time.time() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0 or not first:
            raise SystemExit(f"{variant} run failed ({proc.returncode}): {err[-2000:]}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return first[0] - started, total, first[1], cpu
    finally:
        server.shutdown()
        server.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-massgen-"))
    os.environ.update(
        {"HOME": str(tmp), "OPENAI_API_KEY": "sk-bench-not-real", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    )
    os.environ.pop("MASTRACE_DIR", None)
    results: dict[str, list[Figures]] = {"without": [], "with": []}
    for i in range(args.rounds + 1):
        for variant in ("without", "with") if i % 2 else ("with", "without"):
            measured = one_run(tmp, variant)
            if i:  # the first pair warms the disk cache
                results[variant].append(measured)
    labels = (
        "wall, start -> first LLM request",
        "wall, whole run",
        "CPU, start -> first LLM request",
        "CPU, whole run",
    )
    for index, label in enumerate(labels):
        without = statistics.median(r[index] for r in results["without"])
        with_ = statistics.median(r[index] for r in results["with"])
        for variant, runs in results.items():
            print(f"  {label:32} {variant:8} " + " ".join(f"{r[index]:.2f}" for r in runs))
        # Each round runs both variants back to back: the ratio within a round sees the same load.
        paired = statistics.median(
            w[index] / o[index] for w, o in zip(results["with"], results["without"], strict=True)
        )
        print(
            f"{label}: median of {args.rounds}: massgen {without:.2f} s, mastrace run {with_:.2f} s, "
            f"ratio {with_ / without:.3f}x, median of the rounds' own ratios {paired:.3f}x (goal <= 1.05x)"
        )


if __name__ == "__main__":
    main()
