"""Startup of a traced process: `import mastrace; mastrace.configure()` vs the OpenTelemetry SDK's import.

Each variant runs in a fresh interpreter, alternating, `--repeat` times; the best wall time and the
maximum resident set size of each are compared. Targets: at most 30 ms more than importing the
OpenTelemetry SDK, and at most 35 MB resident. The traced process must not load DuckDB, asyncio or
wrapt: the script checks that too.

Run: `python benchmarks/bench_startup.py [--repeat N]`
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

TARGET_EXTRA_MS = 30.0
TARGET_RSS_MB = 35.0
REPORT = (
    "\nimport resource, sys\n"
    "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
    "','.join(m for m in ('duckdb', 'asyncio', 'wrapt') if m in sys.modules))"
)
VARIANTS = {
    "opentelemetry.sdk.trace import": "import opentelemetry.sdk.trace",
    "mastrace import + configure()": "import mastrace\nmastrace.configure()",
}


def run_once(code: str, cwd: str) -> tuple[float, float, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTRACE_", "OTEL_"))}
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", code + REPORT], capture_output=True, text=True, cwd=cwd, env=env
    )
    elapsed = time.perf_counter() - start
    fields = out.stdout.split()
    return elapsed, int(fields[0]) / 1024, fields[1] if len(fields) > 1 else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    best: dict[str, tuple[float, float, str]] = {}
    with tempfile.TemporaryDirectory(prefix="mastrace-bench-") as cwd:
        for _ in range(args.repeat):
            for name, code in VARIANTS.items():
                t, rss, loaded = run_once(code, cwd)
                old = best.get(name)
                best[name] = (min(t, old[0]) if old else t, max(rss, old[1]) if old else rss, loaded)
    (base_t, base_rss, _), (ours_t, ours_rss, loaded) = best.values()
    for name, (t, rss, _) in best.items():
        print(f"{name:34s} best {t * 1000:6.0f} ms   max RSS {rss:5.1f} MB")
    extra = (ours_t - base_t) * 1000
    print(
        f"mastrace on top of the SDK:        {extra:+.0f} ms (target <= {TARGET_EXTRA_MS:.0f}), "
        f"{ours_rss - base_rss:+.1f} MB; RSS {ours_rss:.1f} MB (target <= {TARGET_RSS_MB:.0f})"
    )
    print(f"heavy modules loaded by the traced process: {loaded or 'none'}")


if __name__ == "__main__":
    main()
