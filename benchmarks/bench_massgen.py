"""A real MassGen 0.1.97 run (3 agents, one with a stdio MCP server, loopback OpenAI-compatible
server) as users start it: `massgen ...` against `mastrace run -- massgen ...` (goal <= 1.05x).

Two figures per run, each a fresh process: the time from process start to the first LLM request
the server receives (everything mastrace does before MassGen's first call: import, configure,
instrumentation, the configuration snapshot), and the whole run's wall time. The variants alternate
`--rounds` times (the first pair is a warm-up) and the medians are compared.

Needs MassGen: `.venv-massgen/bin/python benchmarks/bench_massgen.py [--rounds N]`
"""

from __future__ import annotations

import argparse
import os
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


def one_run(tmp: Path, variant: str) -> tuple[float, float]:
    """(seconds to the first LLM request, seconds for the whole run) of one fresh process."""
    ledger = Ledger()
    server = make_server(ledger, Plan(questions=(QUESTION,)))
    first: list[float] = []
    handle = server.RequestHandlerClass.do_POST  # type: ignore[attr-defined]

    def timed(self: object) -> None:
        if not first:
            first.append(time.time())
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
        started = time.time()
        done = subprocess.run(command, cwd=tmp, capture_output=True, text=True, timeout=900)
        total = time.time() - started
        if done.returncode != 0 or not first:
            raise SystemExit(f"{variant} run failed ({done.returncode}): {done.stderr[-2000:]}")
        return first[0] - started, total
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
    results: dict[str, list[tuple[float, float]]] = {"without": [], "with": []}
    for i in range(args.rounds + 1):
        for variant in ("without", "with") if i % 2 else ("with", "without"):
            measured = one_run(tmp, variant)
            if i:  # the first pair warms the disk cache
                results[variant].append(measured)
    for index, label in ((0, "start -> first LLM request"), (1, "whole run")):
        without = statistics.median(r[index] for r in results["without"])
        with_ = statistics.median(r[index] for r in results["with"])
        for variant, runs in results.items():
            print(f"  {label:27} {variant:8} " + " ".join(f"{r[index]:.2f}" for r in runs))
        print(
            f"{label}: median of {args.rounds}: massgen {without:.2f} s, mastrace run {with_:.2f} s, "
            f"ratio {with_ / without:.3f}x (goal <= 1.05x)"
        )


if __name__ == "__main__":
    main()
