"""`mastrace run -- program` against `python program`, for a program that imports no LLM SDK.

The program does a fixed amount of pure-Python work (`--work` seconds of CPU, about) in ten spans
opened through OpenTelemetry's API. Three commands run as whole processes, interleaved (A B C A B C
…), `--repeat` times each: `python program.py`, `mastrace run -- program.py` (default integrations:
loaded only if the program imports their package, which it does not) and `mastrace run --instrument
none -- program.py`. Printed: the median CPU time (user + system, of the process and its children)
and wall time of each, the ratios to `python program.py` (target: `mastrace run` ≤ 1.2× in CPU) and
the fixed cost in seconds (what a shorter program pays in full).

Run: `python benchmarks/bench_run_overhead.py [--repeat N] [--work SECONDS]`
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MASTRACE = Path(sys.executable).parent / "mastrace"
PROGRAM = """\
import sys, time
from opentelemetry import trace

tracer = trace.get_tracer("bench.app")
work = float(sys.argv[1])
rounds = 0
for step in range(10):  # ten spans: the work, not the tracing of it, dominates
    with tracer.start_as_current_span("bench.step"):
        deadline = time.process_time() + work / 10
        while time.process_time() < deadline:
            sum(i * i for i in range(20_000))
            rounds += 1
print(rounds)
"""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("MASTRACE_", "OTEL_"))}


def measured(command: list[str], cwd: Path) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one whole process and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, env=_env(), cwd=cwd)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{command} failed: {done.stderr.decode()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--work", type=float, default=2.0, help="CPU seconds of work the program does")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        cwd = Path(folder)
        (cwd / "program.py").write_text(PROGRAM)
        store = str(cwd / "store")
        work = str(args.work)
        commands = {
            "python program.py": [sys.executable, "program.py", work],
            "mastrace run -- program.py": [str(MASTRACE), "run", "--store", store, "--", "program.py", work],
            "mastrace run --instrument none": [
                str(MASTRACE),
                "run",
                "--store",
                store,
                "--instrument",
                "none",
                "--",
                "program.py",
                work,
            ],
        }
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.repeat):
            for name, command in commands.items():
                results[name].append(measured(command, cwd))
    base_cpu = statistics.median(c for c, _ in results["python program.py"])
    base_wall = statistics.median(w for _, w in results["python program.py"])
    print(f"program work ≈ {args.work:.1f} s CPU, {args.repeat} runs each, interleaved; medians")
    print(f"{'command':34} {'CPU (s)':>8} {'wall (s)':>9} {'CPU ×':>7} {'wall ×':>7} {'+CPU (s)':>9}")
    for name, runs in results.items():
        cpu = statistics.median(c for c, _ in runs)
        wall = statistics.median(w for _, w in runs)
        print(
            f"{name:34} {cpu:8.3f} {wall:9.3f} {cpu / base_cpu:6.2f}× {wall / base_wall:6.2f}× "
            f"{cpu - base_cpu:9.3f}"
        )
    print("target: mastrace run -- program.py ≤ 1.2× python program.py in CPU")


if __name__ == "__main__":
    main()
