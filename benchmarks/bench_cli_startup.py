"""Start-up of the `mastrace` command: `--help` and `runs` on a small store, against bare Python.

Four commands run as whole processes, interleaved (A B C D A B C D …), `--repeat` times each:
`python -c pass`, `python -c "import duckdb"`, `mastrace --help` and `mastrace runs` on a store of
one demo run. Printed: the median wall time of each and the ratios the targets are about
(`--help` ≤ 3× `python -c pass`; `runs` ≤ 1.5× `python -c "import duckdb"`; `--help` ≤ 0.3 s).

Run: `python benchmarks/bench_cli_startup.py [--repeat N]`
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MASTRACE = Path(sys.executable).parent / "mastrace"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("MASTRACE_", "OTEL_"))}


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, env=_env())
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{command} failed: {done.stderr.decode()[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mastrace-bench-cli-") as folder:
        store = Path(folder) / "store"
        demo = [sys.executable, str(ROOT / "examples" / "coordination_demo.py"), "--store", str(store)]
        subprocess.run(demo, check=True, capture_output=True, env=_env())
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "python -c 'import duckdb'": [sys.executable, "-c", "import duckdb"],
            "mastrace --help": [str(MASTRACE), "--help"],
            "mastrace runs (1 run)": [str(MASTRACE), "runs", "--store", str(store)],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for command in commands.values():  # warm the file cache once
            timed(command)
        for _ in range(args.repeat):
            for name, command in commands.items():
                times[name].append(timed(command))
    median = {name: statistics.median(values) for name, values in times.items()}
    for name, value in median.items():
        print(f"{name:28s} median {value * 1000:7.1f} ms   (min {min(times[name]) * 1000:.1f})")
    help_ratio = median["mastrace --help"] / median["python -c pass"]
    runs_ratio = median["mastrace runs (1 run)"] / median["python -c 'import duckdb'"]
    print(f"--help / python -c pass:           {help_ratio:.2f}x (target <= 3x)")
    print(f"runs / python -c 'import duckdb':  {runs_ratio:.2f}x (target <= 1.5x)")
    print(f"--help absolute:                   {median['mastrace --help']:.3f} s (target <= 0.3 s)")


if __name__ == "__main__":
    main()
