"""Shared helpers for the benchmark scripts: interleaved timing and a table printer."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


class DroppingExporter(SpanExporter):
    """Accepts every batch and keeps nothing: measures the SDK, not an exporter."""

    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[object]) -> SpanExportResult:
        self.count += len(spans)
        return SpanExportResult.SUCCESS


def interleaved(variants: dict[str, Callable[[int], None]], n: int, rounds: int) -> dict[str, float]:
    """Run each variant `n` times per round, alternating variants, and return median µs per call.

    Interleaving makes the ratios robust on a shared, noisy machine: every variant sees the same
    background load.
    """
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for fn in variants.values():  # warm up
        fn(max(1, n // 10))
    for _ in range(rounds):
        for name, fn in variants.items():
            start = time.perf_counter()
            fn(n)
            samples[name].append((time.perf_counter() - start) / n * 1e6)
    return {name: statistics.median(values) for name, values in samples.items()}


def print_table(title: str, results: dict[str, float]) -> None:
    print(f"\n{title}")
    width = max(len(k) for k in results)
    for name, us in results.items():
        print(f"  {name:<{width}}  {us:8.2f} µs/span")


def print_ratios(rows: Sequence[tuple[str, float, float, str, float]]) -> None:
    """Rows of (label, numerator µs, denominator µs, comparison, target)."""
    print("\n  ratio                                              measured  target  met")
    for label, num, den, op, target in rows:
        ratio = num / den if den else float("inf")
        met = ratio <= target if op == "<=" else ratio >= target
        print(f"  {label:<50} {ratio:7.2f}×  {op} {target:<4}  {'yes' if met else 'NO'}")
