"""Caller-side cost of a span with the local store on, against the raw SDK, measured side by side.

The baseline is a plain OpenTelemetry SDK TracerProvider with a BatchSpanProcessor feeding an
exporter that drops everything. Each variant creates the same spans (8 attributes each); variants
alternate within every round, and each timed batch is followed by an untimed flush so that one
variant's export work never lands in another's timing. A second table includes that flush: the
cost per span of getting it exported too.

Run: .venv/bin/python benchmarks/bench_export.py [--n 5000] [--rounds 9]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

sys.path.insert(0, os.path.dirname(__file__))
from _common import DroppingExporter, print_ratios, print_table

ATTRIBUTES = {
    "massgen.agent_id": "agent_a",
    "massgen.round": 3,
    "massgen.round_type": "coordination",
    "massgen.outcome": "answer",
    "massgen.usage.input": 1200,
    "massgen.usage.output": 350,
    "massgen.usage.cost": 0.0123,
    "massgen.is_winner": False,
}

Variant = tuple[Callable[[int], None], Callable[[], None]]  # (make n spans, flush)


def measure(variants: dict[str, Variant], n: int, rounds: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median µs per span: caller side only, and caller plus the flush that exports the batch."""
    caller: dict[str, list[float]] = {name: [] for name in variants}
    total: dict[str, list[float]] = {name: [] for name in variants}
    for run, flush in variants.values():  # warm up
        run(max(1, n // 10))
        flush()
    for _ in range(rounds):
        for name, (run, flush) in variants.items():
            start = time.perf_counter()
            run(n)
            ended = time.perf_counter()
            flush()
            done = time.perf_counter()
            caller[name].append((ended - start) / n * 1e6)
            total[name].append((done - start) / n * 1e6)
    return (
        {k: statistics.median(v) for k, v in caller.items()},
        {k: statistics.median(v) for k, v in total.items()},
    )


def raw_sdk_variant() -> Variant:
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DroppingExporter(), max_queue_size=1 << 20))
    tracer = provider.get_tracer("bench")

    def run(n: int) -> None:
        for _ in range(n):
            with tracer.start_as_current_span("agent.agent_a.round_3", attributes=ATTRIBUTES):
                pass

    return run, lambda: provider.force_flush()


def mastrace_variant(**configure: object) -> Variant:
    import mastrace

    mastrace.configure(propagate_threads=False, **configure)  # type: ignore[arg-type]
    tracer = mastrace.get_tracer("bench")

    def run(n: int) -> None:
        for _ in range(n):
            with tracer.span("agent.agent_a.round_3", attributes=ATTRIBUTES):
                pass

    return run, lambda: mastrace.force_flush(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=5_000, help="spans per variant per round")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()

    import mastrace

    with tempfile.TemporaryDirectory() as store:
        variants = {
            "raw SDK + BatchSpanProcessor (dropping)": raw_sdk_variant(),
            "mastrace, local store on": mastrace_variant(local=store),
        }
        caller, total = measure(variants, args.n, args.rounds)
        result = mastrace.force_flush(timeout=60)
        mastrace.shutdown()

    raw, local = (caller[k] for k in variants)
    print_table(f"caller side, {args.n} spans x {args.rounds} rounds (median)", caller)
    print_table("caller side plus the flush that exports them", total)
    print(f"\n  local store: exported {result.exported}, dropped {result.dropped}, failed {result.failed}")
    print_ratios([("mastrace (local store on) / raw SDK, caller side", local, raw, "<=", 1.3)])


if __name__ == "__main__":
    main()
