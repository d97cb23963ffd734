"""Startup of a traced process: `import mastrace; mastrace.configure()` vs the OpenTelemetry SDK's import.

Each variant runs in a fresh interpreter, alternating, `--repeat` times; the best wall time and the
maximum resident set size of each are compared. Targets: at most 30 ms more than importing the
OpenTelemetry SDK, and at most 35 MB resident. The traced process must not load DuckDB, asyncio or
wrapt: the script checks that too.

Then a one-span script, whole: import + configure + 1 span + `force_flush()`, mastrace (local store,
default scrubbing) against the raw SDK (a `BatchSpanProcessor` into an exporter that keeps nothing),
wall time and RSS (targets <= 1.2x and <= 1.15x); and in that script the first `force_flush()` beside
a later one (target <= 1.5x), both when it comes at once and when the span lasts 0.3 s (a script's
first span usually does some work: the export thread prepares and warms itself up meanwhile). Two
later flushes: one right after a flush (both threads busy a moment before), and one after another
span as long as the first (the export thread idle as long: like for like with the first flush).

The interpreters run with bytecode caches (in a temporary `PYTHONPYCACHEPREFIX`, warmed once), as an
installed package does: without them every import compiles its source.

Run: `python benchmarks/bench_startup.py [--repeat N]`
"""

from __future__ import annotations

import argparse
import os
import statistics
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


ONE_SPAN = {
    "raw SDK": (
        "import time\nt0 = time.perf_counter()\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult\n"
        "class Sink(SpanExporter):\n"
        "    def export(self, spans):\n        return SpanExportResult.SUCCESS\n"
        "provider = TracerProvider()\nprovider.add_span_processor(BatchSpanProcessor(Sink()))\n"
        "tracer = provider.get_tracer('one')\n"
        "def span(work):\n    with tracer.start_as_current_span('one'):\n        time.sleep(work)\n"
        "flush = provider.force_flush\n"
    ),
    "mastrace": (
        "import time\nt0 = time.perf_counter()\nimport mastrace\n"
        "mastrace.configure(service_name='one', local='.mastrace')\n"
        "tracer = mastrace.get_tracer('one')\n"
        "def span(work):\n    with tracer.span('one'):\n        time.sleep(work)\n"
        "flush = mastrace.force_flush\n"
    ),
}
ONE_SPAN_TAIL = (
    "import sys\nwork = float(sys.argv[1])\n"
    "span(work)\na = time.perf_counter(); flush(); b = time.perf_counter()\nwhole = b - t0 - work\n"
    "span(0)\nc = time.perf_counter(); flush(); d = time.perf_counter()\n"
    "span(work)\ne = time.perf_counter(); flush(); f = time.perf_counter()\n"
    "import resource\n"
    "print(whole, b - a, d - c, f - e, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
)
TARGET_WHOLE, TARGET_RSS, TARGET_FIRST = 1.2, 1.15, 1.5


def _env(pycache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTRACE_", "OTEL_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def one_span(code: str, cwd: str, work: float) -> tuple[float, float, float, float, float]:
    out = subprocess.run(
        [sys.executable, "-c", code + ONE_SPAN_TAIL, str(work)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_env(os.path.join(cwd, "pycache")),
        check=True,
    )
    whole, first, later, alike, rss = map(float, out.stdout.split())
    return whole, first, later, alike, rss / 1024


def _met(value: float, target: float) -> str:
    return "met" if value <= target else "NOT met"


def one_span_scripts(repeat: int, cwd: str) -> None:
    for code in ONE_SPAN.values():  # warm the bytecode caches
        one_span(code, cwd, 0.0)
    for work in (0.0, 0.3):
        runs: dict[str, list[tuple[float, float, float, float, float]]] = {name: [] for name in ONE_SPAN}
        for i in range(repeat):
            names = list(ONE_SPAN) if i % 2 == 0 else list(reversed(ONE_SPAN))
            for name in names:
                runs[name].append(one_span(ONE_SPAN[name], cwd, work))
        med = {name: [statistics.median(r[k] for r in rows) for k in range(5)] for name, rows in runs.items()}
        print(f"\none-span script, the span lasting {work:.1f} s (median of {repeat}):")
        for name, (whole, first, later, alike, rss) in med.items():
            print(
                f"  {name:9s} import+configure+span+flush {whole * 1000:7.1f} ms (span's sleep excluded)  "
                f"RSS {rss:5.1f} MB  first flush {first * 1000:7.2f} ms  later: right after a flush "
                f"{later * 1000:6.2f} ms (ratio {first / later:5.1f}x), after another {work:.1f} s span "
                f"{alike * 1000:6.2f} ms (ratio {first / alike:5.1f}x)"
            )
        (rw, _, _, _, rr), (mw, mf, ml, ma, mr) = med["raw SDK"], med["mastrace"]
        print(
            f"  mastrace / raw SDK: wall {mw / rw:.2f}x "
            f"(target <= {TARGET_WHOLE}x: {_met(mw / rw, TARGET_WHOLE)}), "
            f"RSS {mr / rr:.2f}x (target <= {TARGET_RSS}x: {_met(mr / rr, TARGET_RSS)}); mastrace first "
            f"flush / later {mf / ml:.1f}x right after a flush, {mf / ma:.1f}x after the same span "
            f"(target <= {TARGET_FIRST}x: {_met(mf / ml, TARGET_FIRST)}, {_met(mf / ma, TARGET_FIRST)})"
        )


def run_once(code: str, cwd: str) -> tuple[float, float, str]:
    env = _env(os.path.join(cwd, "pycache"))
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
        for code in VARIANTS.values():  # warm the bytecode caches
            run_once(code, cwd)
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
    with tempfile.TemporaryDirectory(prefix="mastrace-bench-") as cwd:
        one_span_scripts(args.repeat, cwd)


if __name__ == "__main__":
    main()
