"""Store compaction: read time against the number of segments, bytes per span, ingest while compacting.

Builds MassGen-shaped runs through the OpenTelemetry SDK (a session span carrying its own
configuration snapshot, agents' rounds with distinct prompts, LLM calls with messages and usage, tool
calls) and writes the same spans through `LocalStoreExporter` as:

- one segment (one process wrote everything);
- `--segments` segments (e.g. 500 and 2,000: one short process per task, each its own segment);
- each of those, compacted (`mastrace compact`).

For each store it times, on a fresh `TraceStore` each time (as a command does, without interpreter
start-up): `runs` (every run's summary), `tree` (the latest run's tree) and `query` (tokens by agent
over `records`), best of `--repeat`; and prints each against the one-segment store (target ≤ 1.5×).
Then the bytes per span on disk before and after compaction (target ≤ 1/10), the Parquet row-group
size's effect on size and on a one-trace lookup, and ingest throughput with a compaction loop running
beside the writers against none.

Run: `python benchmarks/bench_compact.py [--spans N] [--segments 500,2000] [--repeat N] [--dir DIR]`
(`--spans 1000000` for the large figures; the default runs in a few minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from mastrace.analysis._prefix import render_trace
from mastrace.analysis._store import TraceStore
from mastrace.store import LocalStoreExporter, connect
from mastrace.store._compact import compact
from mastrace.store._manifest import COMPACT_DIR

TARGET_RATIO = 1.5
TARGET_BYTES = 0.1
_WORDS = [
    "agent",
    "answer",
    "vote",
    "tool",
    "search",
    "file",
    "read",
    "write",
    "summary",
    "plan",
    "review",
    "model",
    "context",
    "token",
    "budget",
    "retry",
    "result",
    "error",
    "score",
    "task",
    "question",
    "draft",
    "final",
    "evaluate",
    "compare",
    "select",
    "refine",
    "critique",
    "verify",
]


class _Collect(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def build_runs(spans: int, seed: int = 7) -> list[list[ReadableSpan]]:
    """MassGen-shaped runs of about 20 spans each, every run with its own prompts and configuration."""
    import json

    rng = random.Random(seed)
    resource = Resource.create(
        {
            "service.name": "massgen",
            "service.version": "0.1.97",
            "deployment.environment": "bench",
            "host.name": "bench-host",
            "process.runtime.name": "cpython",
            "process.runtime.version": "3.11.2",
            "process.command_args": json.dumps(["massgen", "--config", "three_agents.yaml"]),
        }
    )
    runs: list[list[ReadableSpan]] = []
    total = 0
    while total < spans:
        collector = _Collect()
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(SimpleSpanProcessor(collector))
        tracer = provider.get_tracer("mastrace", "0.4.0")
        agents = [f"agent_{c}" for c in "abc"]
        config = {
            "agents": [
                {
                    "id": a,
                    "backend": {"type": "openai", "model": rng.choice(["gpt-4o", "gpt-4o-mini", "o3"])},
                    "temperature": round(rng.random(), 2),
                    "system_message": _text(rng, 40),
                }
                for a in agents
            ],
            "orchestrator": {"max_rounds": 2, "voting": "majority", "timeout_s": rng.randint(60, 600)},
            "benchmark": {
                "git": {"commit": f"{rng.getrandbits(160):040x}", "dirty": False},
                "python": "3.11.2",
            },
        }
        text = json.dumps(config)
        digest = f"{rng.getrandbits(64):016x}"
        with tracer.start_as_current_span(
            "coordination.session",
            attributes={
                "mastrace.config": text,
                "mastrace.config.hash": digest,
                "massgen.task": _text(rng, 25),
            },
        ):
            for rnd in range(2):
                for agent in agents:
                    with tracer.start_as_current_span(
                        f"agent.{agent}.round_{rnd}",
                        attributes={
                            "massgen.agent_id": agent,
                            "massgen.round": rnd,
                            "massgen.round_type": "initial_answer" if rnd == 0 else "voting",
                            "massgen.usage.input": rng.randint(500, 5000),
                            "massgen.usage.output": rng.randint(50, 800),
                            "mastrace.config.hash": digest,
                            "gen_ai.agent.id": agent,
                        },
                    ):
                        with tracer.start_as_current_span(
                            "llm.openai.stream",
                            attributes={
                                "gen_ai.operation.name": "chat",
                                "gen_ai.request.model": "gpt-4o",
                                "gen_ai.usage.input_tokens": rng.randint(500, 5000),
                                "gen_ai.usage.output_tokens": rng.randint(50, 800),
                                "gen_ai.input.messages": json.dumps(
                                    [{"role": "user", "content": _text(rng, 30)}]
                                ),
                                "gen_ai.output.messages": json.dumps(
                                    [{"role": "assistant", "content": _text(rng, 30)}]
                                ),
                            },
                        ):
                            pass
                        with tracer.start_as_current_span(
                            "mcp.filesystem.read_file",
                            attributes={"gen_ai.tool.name": "read_file", "mcp.method.name": "tools/call"},
                        ):
                            pass
        provider.shutdown()
        runs.append(collector.spans)
        total += len(collector.spans)
    return runs


def write_store(path: Path, runs: list[list[ReadableSpan]], segments: int) -> int:
    """Write `runs` into `path` as `segments` processes would (each its own segment); span count."""
    per = max(1, -(-len(runs) // segments))
    count = 0
    for start in range(0, len(runs), per):
        exporter = LocalStoreExporter(path)
        for run in runs[start : start + per]:
            for batch in range(0, len(run), 512):
                count += exporter.export_counted(run[batch : batch + 512])
        exporter.shutdown()
    return count


def store_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and p.name != ".lock")


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def time_commands(path: Path, repeat: int) -> dict[str, float]:
    def runs() -> None:
        with TraceStore(path) as store:
            store.runs()

    def tree() -> None:
        with TraceStore(path) as store:
            render_trace(store, store.resolve("latest"))

    def query() -> None:
        with TraceStore(path) as store:
            store.rows(
                "SELECT attributes->>'massgen.agent_id' AS agent, "
                "sum((attributes->>'massgen.usage.input')::INT) AS tokens "
                "FROM records WHERE span_name LIKE 'agent.%' GROUP BY 1"
            )

    return {name: best(fn, repeat) for name, fn in (("runs", runs), ("tree", tree), ("query", query))}


def lookup(path: Path, trace_id: str, repeat: int) -> float:
    """One trace's spans with their attributes, on an open connection (what row groups change)."""
    con = connect(path, check=False)
    try:
        return best(
            lambda: con.execute(
                "SELECT span_name, attributes FROM records WHERE trace_id = ?", [trace_id]
            ).fetchall(),
            repeat,
        )
    finally:
        con.close()


def ingest(path: Path, runs: list[list[ReadableSpan]], segments: int, compacting: bool) -> float:
    """Spans/s written by `segments` short writers, with or without a compaction loop beside them."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            compact(path, min_age=0, grace=0)

    thread = threading.Thread(target=loop) if compacting else None
    start = time.perf_counter()
    if thread is not None:
        thread.start()
    count = write_store(path, runs, segments)
    elapsed = time.perf_counter() - start
    stop.set()
    if thread is not None:
        thread.join()
    return count / elapsed


def segment_table(
    base: Path, runs: list[list[ReadableSpan]], one: Path, counts: list[int], spans: int, repeat: int
) -> None:
    """The read-time table: 1 segment, then each count of segments as written and compacted."""
    stores: dict[str, Path] = {"1 segment": one}
    for n in counts:
        path = base / f"seg{n}"
        write_store(path, runs, n)
        stores[f"{n} segments"] = path
        packed = base / f"seg{n}-compacted"
        shutil.copytree(path, packed)
        started = time.perf_counter()
        compact(packed, min_age=0, grace=0)
        print(f"compacted {n} segments in {time.perf_counter() - started:.1f} s")
        stores[f"{n} segments, compacted"] = packed

    print(f"\n## Read time against segment count ({spans:,} spans; best of {repeat}; ratio to 1 segment)")
    print("| store | runs s | tree s | query s | runs × | tree × | query × |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    reference: dict[str, float] = {}
    for label, path in stores.items():
        times = time_commands(path, repeat)
        reference = reference or times
        ratios = [times[k] / reference[k] for k in ("runs", "tree", "query")]
        marks = " ".join("ok" if r <= TARGET_RATIO else "" for r in ratios)
        print(
            f"| {label} | {times['runs']:.3f} | {times['tree']:.3f} | {times['query']:.3f} | "
            + " | ".join(f"{r:.2f}" for r in ratios)
            + f" |  {marks}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spans", type=int, default=40_000)
    parser.add_argument("--segments", default="500,2000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--only-row-groups", action="store_true", help="only the row-group comparison")
    args = parser.parse_args()
    counts = [int(n) for n in args.segments.split(",")]
    base = Path(args.dir or tempfile.mkdtemp(prefix="bench-compact-"))
    base.mkdir(parents=True, exist_ok=True)

    started = time.perf_counter()
    runs = build_runs(args.spans)
    spans = sum(len(r) for r in runs)
    print(f"{spans:,} spans in {len(runs):,} runs built in {time.perf_counter() - started:.1f} s")

    one = base / "one"
    write_store(one, runs, 1)
    if not args.only_row_groups:
        segment_table(base, runs, one, counts, spans, args.repeat)

    before = store_bytes(one)
    packed = base / "one-compacted"
    shutil.copytree(one, packed)
    compact(packed, min_age=0, grace=0)
    after = store_bytes(packed)
    print(f"\n## Bytes per span ({spans:,} spans)")
    print("| store | bytes/span | ratio |")
    print("| --- | ---: | ---: |")
    print(f"| NDJSON segments (+ roots, skeleton) | {before / spans:,.1f} | 1 |")
    mark = "ok" if after / before <= TARGET_BYTES else "over target"
    print(f"| compacted (Parquet, ZSTD) | {after / spans:,.1f} | {after / before:.3f} ({mark}) |")

    with TraceStore(one) as store:
        trace = store.resolve("latest")
    print("\n## Row-group size: bytes/span and a one-trace lookup on an open connection (best of repeat)")
    print("| rows per group | bytes/span | lookup s |")
    print("| ---: | ---: | ---: |")
    for rows in (4_096, 16_384, 122_880):
        path = base / f"rg{rows}"
        shutil.copytree(one, path)
        compact(path, min_age=0, grace=0, row_group_rows=rows)
        size = sum(p.stat().st_size for p in (path / COMPACT_DIR).glob("*.parquet"))
        print(f"| {rows:,} | {size / spans:,.1f} | {lookup(path, trace, args.repeat):.4f} |")
    print(f"| (NDJSON, 1 segment) | {before / spans:,.1f} | {lookup(one, trace, args.repeat):.4f} |")

    if not args.only_row_groups:
        writers = counts[0]
        rates = {}
        for compacting in (False, True, False, True):
            path = base / f"ingest-{compacting}-{len(rates)}"
            rates.setdefault(compacting, []).append(ingest(path, runs, writers, compacting))
        plain, busy = statistics.median(rates[False]), statistics.median(rates[True])
        print(f"\n## Ingest ({spans:,} spans by {writers} short writers; median of 2)")
        print("| variant | spans/s | ratio |")
        print("| --- | ---: | ---: |")
        print(f"| no compaction | {plain:,.0f} | 1 |")
        print(f"| compaction loop running | {busy:,.0f} | {busy / plain:.2f} |")
    if args.dir is None:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
