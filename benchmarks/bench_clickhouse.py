"""The same spans in the local store and in ClickHouse's `otel_traces` (chDB), read by mastrace both ways.

Writes a MassGen-shaped store (`bench_analyze.write_store`: one session, 10 agents, rounds of LLM
calls, tool executions wrapping MCP calls), copies its spans into chDB through the writer that
`mastrace push --to chdb://…` uses (reporting spans/s of each ingest), then times, alternately and
`--repeat` times each, on both:

- `runs` (the newest 20), `tree latest` (2,000 lines), `analyze latest` (the Markdown report),
  each on a fresh store object, as one CLI command would;
- the seed guide's 16 SQL queries (Parts 3, 4 and 7, from `tests/seed_run.py`), all on one store
  object: through `--source chdb://…` they run in DuckDB over the spans copied out of ClickHouse,
  so the copy is timed apart (`copy`) from the queries (`16 queries`);
- and, for scale, ClickHouse's own answer to the aggregate `runs` needs, in ClickHouse SQL.

It prints the median and best seconds of each and the ratio chDB / store of the medians, and how
many of the 16 queries answer the same rows on both. (The generated store marks some tool spans as
exceptions by their `is_exception` column alone, with no `exception` event: such a row is no
OpenTelemetry span, and neither push nor ClickHouse carries it, so the two error queries find
nothing in chDB. `VIEW_TRACE_HIERARCHY`'s `LIMIT 50` cuts among spans that start at the same
microsecond, which either side may order differently.)

Run: `python benchmarks/bench_clickhouse.py [--spans N] [--repeat N] [--dir DIR]` (default 20,000 spans;
`--spans 1000000` for the 1M figures, which takes several minutes to load into chDB).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bench_analyze import TRACE_ID, write_store

from mastrace.analysis import TraceStore, build_report, render_markdown, render_runs, render_trace
from mastrace.analysis._clickhouse import ClickHouseStore
from mastrace.store._clickhouse import ClickHouseWriter, parse_target
from mastrace.store._replay import StoredSpan, read_segment, segment_paths
from seed_run import SEED_QUERIES

BATCH = 50_000


def _sql(text: str) -> str:
    for placeholder in ("[YOUR_TRACE_ID]", "[TRACE_ID]", "[trace_id]", "[trace_id_from_step_2]"):
        text = text.replace(placeholder, TRACE_ID)
    return text


def _normal(answer: tuple[list[str], list[tuple[object, ...]]]) -> tuple[list[str], list[str]]:
    """An answer compared as a set of rows (ties in ORDER BY … LIMIT may pick other rows' order)."""
    names, rows = answer
    return names, sorted(repr(tuple(round(v, 9) if isinstance(v, float) else v for v in row)) for row in rows)


def load_clickhouse(store: Path, url: str) -> tuple[int, float]:
    """Copy the store's spans into `url` in batches; returns spans written and seconds taken."""
    writer = ClickHouseWriter(parse_target(url))
    started = time.perf_counter()
    written = 0
    try:
        batch = []
        for path in segment_paths(store):
            for item in read_segment(path):
                if isinstance(item, StoredSpan):
                    batch.append(item.span)
                    if len(batch) >= BATCH:
                        written += writer.send(batch)
                        batch = []
        written += writer.send(batch)
    finally:
        writer.shutdown()
    return written, time.perf_counter() - started


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="work here (default: a temp dir)")
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-clickhouse-"))
    store = root / "store"
    started = time.perf_counter()
    count = write_store(store, args.spans, layout="writer")
    print(f"store: {count:,} spans written in {time.perf_counter() - started:.1f} s (generated rows)")
    url = f"chdb://{root / 'ch'}"
    written, seconds = load_clickhouse(store, url)
    rate = written / seconds
    print(f"chDB: {written:,} spans inserted in {seconds:.1f} s ({rate:,.0f} spans/s, push's writer)")
    target = parse_target(url)
    cap = max(written, 1) + 1

    def on_store(action: Callable[[TraceStore], object]) -> Callable[[], object]:
        def run() -> object:
            with TraceStore(store) as s:
                return action(s)

        return run

    def on_chdb(action: Callable[[TraceStore], object]) -> Callable[[], object]:
        def run() -> object:
            with ClickHouseStore(target, max_spans=cap) as s:
                return action(s)

        return run

    def queries(s: TraceStore) -> object:
        return [s.table(_sql(q)) for q in SEED_QUERIES.values()]

    def copy_then_queries(s: TraceStore) -> object:
        assert isinstance(s, ClickHouseStore)
        s.load_newest(None)
        return None

    def native_runs() -> object:
        with ClickHouseStore(target, max_spans=cap) as s:
            return s.remote(
                "SELECT TraceId, count() AS spans, "
                "sum(toFloat64OrNull(SpanAttributes['massgen.usage.input'])) AS tokens, "
                "min(Timestamp) AS started FROM {table} GROUP BY TraceId ORDER BY started DESC LIMIT 20"
            )

    cases: dict[str, tuple[Callable[[], object], Callable[[], object] | None]] = {
        "runs": (
            on_store(lambda s: render_runs(s.runs(limit=20))),
            on_chdb(lambda s: render_runs(s.runs(limit=20))),
        ),
        "tree latest": (
            on_store(lambda s: render_trace(s, s.resolve("latest"), max_spans=2000)),
            on_chdb(lambda s: render_trace(s, s.resolve("latest"), max_spans=2000)),
        ),
        "analyze latest": (
            on_store(lambda s: render_markdown(build_report(s, s.resolve("latest")))),
            on_chdb(lambda s: render_markdown(build_report(s, s.resolve("latest")))),
        ),
        "copy (all spans out of chDB)": (lambda: None, on_chdb(copy_then_queries)),
        "16 seed queries": (on_store(queries), None),
        "runs' aggregate in ClickHouse SQL": (lambda: None, native_runs),
    }
    # The 16 queries through --source: one copy, then the queries on it (timed apart from the copy).
    chdb_store = ClickHouseStore(target, max_spans=cap)
    chdb_store.load_newest(None)
    same = sum(
        _normal(a) == _normal(b)
        for a, b in zip(queries(chdb_store), on_store(queries)(), strict=True)  # type: ignore[call-overload]
    )
    print(f"the 16 seed queries: {same} of 16 answer the same rows on both (as sets, floats to 9 digits)")
    cases["16 seed queries"] = (on_store(queries), lambda: queries(chdb_store))

    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in cases}
    for _ in range(args.repeat):
        for name, (local, remote) in cases.items():
            times[name][0].append(_timed(local))
            if remote is not None:
                times[name][1].append(_timed(remote))
    chdb_store.close()
    print(f"\n{count:,} spans, median (best) of {args.repeat}, seconds")
    print(f"{'':36} {'store':>16} {'chDB (--source)':>18} {'chDB/store':>11}")
    for name, (local, remote) in times.items():
        left = f"{statistics.median(local):.3f} ({min(local):.3f})"
        right = f"{statistics.median(remote):.3f} ({min(remote):.3f})" if remote else "-"
        ratio = (
            statistics.median(remote) / statistics.median(local)
            if remote and statistics.median(local) > 1e-4
            else None
        )
        print(f"{name:36} {left:>16} {right:>18} {f'{ratio:.2f}×' if ratio else '-':>11}")


if __name__ == "__main__":
    main()
