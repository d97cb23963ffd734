"""`mastrace compare` against `mastrace runs` on the same store of many experiment runs.

Writes a store of CONFIGS × TASKS × REPS runs (NDJSON segments in the store's row format, generated
directly so that setup takes seconds). Each run is its own trace, as `experiment_run()` writes it:
an `experiment.run` root (experiment name, task, repetition, outcome, config snapshot and hash), an
LLM call with token usage and cost, and two `gen_ai.evaluation.result` events (a boolean and a
number). Runs are spread over segment files of `--runs-per-segment` runs each (one per writing
process; 1 = every run written by its own process).

Then it times, alternately and `--repeat` times each, in this process (no interpreter start-up):

- runs: `TraceStore.runs()` + `render_runs` (what `mastrace runs --limit 0` does);
- compare: `gather()` + `compare()` with a baseline + `render_comparison` (what `mastrace compare
  --baseline ...` does), with `--resamples` bootstrap resamples;

and prints the median and best of each and the ratio of the medians (target: compare ≤ 2× runs).

Run: `python benchmarks/bench_compare.py [--configs N] [--tasks N] [--reps N] [--runs-per-segment N]
[--resamples N] [--repeat N] [--dir DIR]`
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--configs", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--runs-per-segment", type=int, default=50)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = (args.dir or Path(tmp)) / "store"
        runs_written = write_store(store, args.configs, args.tasks, args.reps, args.runs_per_segment)
        segments = len(list((store / SEGMENTS_DIR).iterdir()))
        print(f"store: {runs_written:,} runs ({runs_written * 4:,} spans) in {segments:,} segments")

        def runs() -> None:
            with TraceStore(str(store)) as ts:
                render_runs(ts.runs(limit=None))

        def comparing() -> None:
            with TraceStore(str(store)) as ts:
                gathered = gather(ts, experiment="bench")
            result = compare(gathered, baseline=f"{0:016x}", seed=0, resamples=args.resamples)
            assert len(result.configs) == args.configs and result.configs[0].runs == args.tasks * args.reps
            render_comparison(result)

        times: dict[str, list[float]] = {"runs": [], "compare": []}
        for _ in range(args.repeat):
            for name, fn in (("runs", runs), ("compare", comparing)):
                t = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t)
        for name, values in times.items():
            print(f"{name:8s} median {statistics.median(values):7.3f} s   best {min(values):7.3f} s")
        ratio = statistics.median(times["compare"]) / statistics.median(times["runs"])
        best = min(times["compare"]) / min(times["runs"])
        verdict = "ok" if ratio <= TARGET_RATIO else "over target"
        print(
            f"compare / runs: {ratio:.2f}x median, {best:.2f}x best "
            f"(target <= {TARGET_RATIO:.0f}x): {verdict}"
        )


if __name__ == "__main__":
    main()
