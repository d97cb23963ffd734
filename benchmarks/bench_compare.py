"""`mastrace compare` against `mastrace runs` on the same store of many experiment runs.

By default the experiment of the issue: 10 configurations × 200 tasks × 5 repetitions = 10,000 runs,
each written as its own process writes it (`--writer process`): a pool of worker processes, each run
`configure(local=store, experiment=...)` → `experiment_run()` with an LLM call (tokens and cost) and
two `record_evaluation()` events (a boolean and a number) → `shutdown()`, through the real SDK, the
export pipeline and the store's writer, so every run is a segment of its own (10,000 segments).
`--writer synthetic` writes the same spans as NDJSON directly (seconds instead of minutes), spread
over segments of `--runs-per-segment` runs.

Then it times, alternately and `--repeat` times each:

- in this process (no interpreter start-up): runs = `TraceStore.runs()` + `render_runs`; compare =
  `gather()` + `compare()` with a baseline + `render_comparison`, with `--resamples` resamples;
- the commands, each in its own process: `mastrace runs --limit 0` and `mastrace compare --experiment
  bench --baseline <first configuration>` (automatic compaction off, so both read the same segments);

and prints the median and best of each and the ratio of the medians (target: compare ≤ 2× runs).
`--dir DIR` keeps the store (a store already there is read again, not rewritten).

Run: `python benchmarks/bench_compare.py [--configs N] [--tasks N] [--reps N] [--writer process|synthetic]
[--workers N] [--runs-per-segment N] [--resamples N] [--repeat N] [--dir DIR]`
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from mastrace import semconv
from mastrace.analysis import TraceStore, render_runs
from mastrace.analysis._compare import compare, gather, render_comparison
from mastrace.store._schema import SEGMENT_SUFFIX, SEGMENTS_DIR

TARGET_RATIO = 2.0
T0 = 1_700_000_000_000_000_000
MS = 1_000_000
_SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {
            semconv.MASTRACE_CONFIG: {"type": "object"},
            semconv.MASTRACE_USAGE: {"type": "object"},
        },
    }
)


def _line(
    trace: str, span: int, parent: int | None, name: str, start: int, end: int, attrs: dict[str, object]
) -> str:
    row: dict[str, object] = {
        "trace_id": trace,
        "span_id": f"{span:016x}",
        "start_ns": start,
        "end_ns": end,
        "created_ns": end,
        "span_name": name,
        "level": 9,
        "span_type": "log" if name == semconv.GEN_AI_EVALUATION_RESULT else "span",
        "otel_kind": "internal",
        "otel_status_code": "UNSET",
        "attributes": attrs,
        "attributes_json_schema": _SCHEMA,
        "service_name": "bench",
        "otel_scope_name": "mastrace.experiment",
    }
    if parent is not None:
        row["parent_span_id"] = f"{parent:016x}"
    return json.dumps(row, separators=(",", ":")) + "\n"


def _run_lines(n: int, config: int, task: int, rep: int, rng: random.Random) -> str:
    trace = f"{n + 1:032x}"
    start = T0 + n * 50 * MS
    root, llm, e1, e2 = 4 * n + 1, 4 * n + 2, 4 * n + 3, 4 * n + 4
    cfg = {"agents": {"a": {"model": f"model-{config}", "temperature": 0.2, "seed": rep * 1000 + task}}}
    root_attrs = {
        semconv.MASTRACE_EXPERIMENT_NAME: "bench",
        semconv.MASTRACE_EXPERIMENT_TASK_ID: f"t{task:04d}",
        semconv.MASTRACE_EXPERIMENT_REPETITION: rep,
        semconv.MASTRACE_EXPERIMENT_OUTCOME: "success",
        semconv.MASTRACE_CONFIG: cfg,
        semconv.MASTRACE_CONFIG_HASH: f"{config:016x}",
    }
    tokens = rng.randint(100, 1000)
    llm_attrs = {
        semconv.GEN_AI_USAGE_INPUT_TOKENS: tokens,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: tokens // 10,
        semconv.MASTRACE_USAGE: {"cost": tokens * 1e-6},
    }
    p = 0.4 + 0.05 * config
    return (
        _line(trace, root, None, semconv.SPAN_EXPERIMENT_RUN, start, start + 40 * MS, root_attrs)
        + _line(trace, llm, root, "llm.openai.chat", start + MS, start + 30 * MS, llm_attrs)
        + _line(
            trace,
            e1,
            root,
            semconv.GEN_AI_EVALUATION_RESULT,
            start + 35 * MS,
            start + 35 * MS,
            {
                semconv.GEN_AI_EVALUATION_NAME: "correct",
                semconv.GEN_AI_EVALUATION_SCORE_VALUE: float(rng.random() < p),
                semconv.MASTRACE_EVALUATION_BOOLEAN: True,
            },
        )
        + _line(
            trace,
            e2,
            root,
            semconv.GEN_AI_EVALUATION_RESULT,
            start + 36 * MS,
            start + 36 * MS,
            {semconv.GEN_AI_EVALUATION_NAME: "quality", semconv.GEN_AI_EVALUATION_SCORE_VALUE: rng.random()},
        )
    )


def write_store(path: Path, configs: int, tasks: int, reps: int, per_segment: int) -> int:
    folder = path / SEGMENTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(1)
    n = 0
    chunk: list[str] = []
    for config in range(configs):
        for task in range(tasks):
            for rep in range(reps):
                chunk.append(_run_lines(n, config, task, rep, rng))
                n += 1
                if len(chunk) == per_segment:
                    (folder / f"bench-{n:06d}{SEGMENT_SUFFIX}").write_text("".join(chunk), encoding="utf-8")
                    chunk = []
    if chunk:
        (folder / f"bench-{n:06d}{SEGMENT_SUFFIX}").write_text("".join(chunk), encoding="utf-8")
    return n


def _write_one(job: tuple[str, int, int, int, int]) -> None:
    """One run, as a process of its own writes it: configure, the run, shut down (its own segment)."""
    import mastrace

    store, n, config, task, rep = job
    rng = random.Random(n)
    mastrace.configure(local=store, service_name="bench-compare", experiment="bench")
    tracer = mastrace.get_tracer("bench")
    cfg = {"agents": {"a": {"model": f"model-{config}", "temperature": 0.2}}, "seed": rep * 1000 + task}
    tokens = rng.randint(100, 1000)
    usage = {
        semconv.GEN_AI_USAGE_INPUT_TOKENS: tokens,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: tokens // 10,
        semconv.MASTRACE_USAGE: {"cost": tokens * 1e-6},
    }
    with mastrace.experiment_run(f"t{task:04d}", repetition=rep, config=cfg) as run:
        with tracer.span("llm.openai.chat", attributes=usage):
            pass
        run.record_evaluation("correct", score=rng.random() < 0.4 + 0.05 * config)
        run.record_evaluation("quality", score=rng.random())
    mastrace.shutdown()


def write_by_processes(path: Path, configs: int, tasks: int, reps: int, workers: int) -> int:
    """Every run written through the SDK by a pool of `workers` processes, one segment per run."""
    jobs = []
    for config in range(configs):
        for task in range(tasks):
            for rep in range(reps):
                jobs.append((str(path), len(jobs), config, task, rep))
    env = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith(("MASTRACE_", "OTEL_"))}
    try:
        with multiprocessing.get_context("spawn").Pool(workers) as pool:
            for _ in pool.imap_unordered(_write_one, jobs, chunksize=20):
                pass
    finally:
        os.environ.update(env)
    return len(jobs)


def _timed(variants: dict[str, Callable[[], None]], repeat: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeat):
        for name, fn in variants.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return times


def _report(title: str, times: dict[str, list[float]]) -> None:
    print(f"\n{title}")
    for name, values in times.items():
        print(f"  {name:8s} median {statistics.median(values):7.3f} s   best {min(values):7.3f} s")
    ratio = statistics.median(times["compare"]) / statistics.median(times["runs"])
    best = min(times["compare"]) / min(times["runs"])
    verdict = "ok" if ratio <= TARGET_RATIO else "over target"
    print(
        f"  compare / runs: {ratio:.2f}x median, {best:.2f}x best (target <= {TARGET_RATIO:.0f}x): {verdict}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--configs", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--writer", choices=("process", "synthetic"), default="process")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--runs-per-segment", type=int, default=50, help="--writer synthetic only")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = (args.dir or Path(tmp)) / "store"
        expected = args.configs * args.tasks * args.reps
        if (store / SEGMENTS_DIR).is_dir():
            print(f"store: reading the one at {store} again")
        else:
            t = time.perf_counter()
            if args.writer == "process":
                write_by_processes(store, args.configs, args.tasks, args.reps, args.workers)
            else:
                write_store(store, args.configs, args.tasks, args.reps, args.runs_per_segment)
            how = (
                f"{args.workers} worker processes, a run each time" if args.writer == "process" else "NDJSON"
            )
            print(f"written in {time.perf_counter() - t:.1f} s ({how})")
        segments = sum(1 for p in (store / SEGMENTS_DIR).iterdir() if p.name.endswith(SEGMENT_SUFFIX))
        with TraceStore(str(store)) as ts:
            gathered = gather(ts, experiment="bench")
        keys = sorted({r.group for r in gathered.runs})
        print(
            f"store: {len(gathered.runs):,} runs of {len(keys)} configurations, {segments:,} segments "
            f"({expected:,} runs asked for)"
        )
        assert len(gathered.runs) == expected and len(keys) == args.configs, "the store is not the experiment"

        def runs() -> None:
            with TraceStore(str(store)) as ts:
                render_runs(ts.runs(limit=None))

        def comparing() -> None:
            with TraceStore(str(store)) as ts:
                found = gather(ts, experiment="bench")
            result = compare(found, baseline=keys[0], seed=0, resamples=args.resamples)
            assert len(result.configs) == args.configs and result.configs[0].runs == args.tasks * args.reps
            render_comparison(result)

        _report(
            f"in this process, {args.repeat} alternating rounds",
            _timed({"runs": runs, "compare": comparing}, args.repeat),
        )
        command = [str(Path(sys.executable).parent / "mastrace")]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTRACE_", "OTEL_"))}
        env["MASTRACE_AUTO_COMPACT"] = "0"

        def cli(*argv: str) -> Callable[[], None]:
            def call() -> None:
                subprocess.run(
                    [*command, *argv, "--store", str(store)], check=True, env=env, stdout=subprocess.DEVNULL
                )

            return call

        _report(
            f"the commands, each in its own process, {args.repeat} alternating rounds",
            _timed(
                {
                    "runs": cli("runs", "--limit", "0"),
                    "compare": cli(
                        "compare", "--experiment", "bench", "--baseline", keys[0],
                        "--resamples", str(args.resamples),
                    ),
                },
                args.repeat,
            ),
        )  # fmt: skip


if __name__ == "__main__":
    main()
