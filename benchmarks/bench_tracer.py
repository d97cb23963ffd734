"""Hot-path cost of a span: raw OTel SDK vs mastrace vs logfire, measured side by side; and the cost
of an experiment run's fields (task, repetition, configuration snapshot and hash) and an evaluation
event on a run of ten spans, against the same run without them.

Run: .venv/bin/python benchmarks/bench_tracer.py [--n 20000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

sys.path.insert(0, os.path.dirname(__file__))
from _common import DroppingExporter, interleaved, print_ratios, print_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=20_000, help="spans per variant per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--only-experiment", action="store_true", help="time only the experiment run against plain runs"
    )
    args = parser.parse_args()

    import logfire

    import mastrace
    from mastrace.tracing import _tracer

    # Raw SDK: one provider with a BatchSpanProcessor feeding an exporter that drops everything.
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DroppingExporter(), max_queue_size=1 << 20))
    raw = provider.get_tracer("bench")
    # mastrace on that same provider (the "app already set a provider" path): same processor.
    trace.set_tracer_provider(provider)
    mastrace.configure(local=False, propagate_threads=False)
    if args.only_experiment:
        _experiment_case(args.n, args.rounds)
        mastrace.shutdown()
        return
    mt = mastrace.get_tracer("bench")
    # logfire, offline, as a local instance so it does not touch the global provider.
    lf = logfire.configure(
        local=True,
        send_to_logfire=False,
        console=False,
        metrics=False,
        additional_span_processors=[BatchSpanProcessor(DroppingExporter())],
    )
    noop = trace.NoOpTracer()
    disabled = _tracer.Tracer("bench-disabled")

    @mastrace.instrument("agent.{agent_id}.round_{round}")
    def instrumented(agent_id: str, round: int) -> None:
        return None

    def manual(agent_id: str, round: int) -> None:
        with mt.span(f"agent.{agent_id}.round_{round}"):
            return None

    @mastrace.instrument("agent.{agent_id}.round_{round}")
    async def instrumented_async(agent_id: str, round: int) -> None:
        return None

    async def manual_async(agent_id: str, round: int) -> None:
        with mt.span(f"agent.{agent_id}.round_{round}"):
            return None

    loop = asyncio.new_event_loop()

    def run_async(fn):  # one coroutine drives n awaits so the loop's cost is not in the figure
        async def body(n: int) -> None:
            for _ in range(n):
                await fn("agent_a", 1)

        return lambda n: loop.run_until_complete(body(n))

    def v_raw(n: int) -> None:
        for _ in range(n):
            with raw.start_as_current_span("agent.agent_a.round_1"):
                pass

    def v_span(n: int) -> None:
        for _ in range(n):
            with mt.span("agent.agent_a.round_1"):
                pass

    def v_instr(n: int) -> None:
        for _ in range(n):
            instrumented("agent_a", 1)

    def v_manual(n: int) -> None:
        for _ in range(n):
            manual("agent_a", 1)

    def v_disabled(n: int) -> None:
        for _ in range(n):
            with disabled.span("agent.agent_a.round_1"):
                pass

    def v_noop(n: int) -> None:
        for _ in range(n):
            with noop.start_as_current_span("agent.agent_a.round_1"):
                pass

    def v_logfire(n: int) -> None:
        for _ in range(n):
            with lf.span("agent.agent_a.round_1"):
                pass

    # The state of a tracer when mastrace is unconfigured or MASTRACE_DISABLED=1: no OTel tracer.
    from mastrace.tracing._state import STATE

    disabled._gen = STATE.generation
    disabled._otel = None

    results = interleaved(
        {
            "raw OTel SDK start_as_current_span": v_raw,
            "mastrace tracer.span": v_span,
            "mastrace @instrument (sync)": v_instr,
            "function with tracer.span (sync)": v_manual,
            "mastrace @instrument (async)": run_async(instrumented_async),
            "coroutine with tracer.span (async)": run_async(manual_async),
            "mastrace disabled / unconfigured": v_disabled,
            "OTel API no-op tracer": v_noop,
            "logfire.span (send_to_logfire=False)": v_logfire,
        },
        args.n,
        args.rounds,
    )
    print_table(
        f"µs per span, median of {args.rounds} interleaved rounds of {args.n} spans "
        f"(python {sys.version.split()[0]})",
        results,
    )
    r = results
    print_ratios(
        [
            (
                "tracer.span / raw SDK",
                r["mastrace tracer.span"],
                r["raw OTel SDK start_as_current_span"],
                "<=",
                1.3,
            ),
            (
                "@instrument sync / tracer.span in a function",
                r["mastrace @instrument (sync)"],
                r["function with tracer.span (sync)"],
                "<=",
                1.2,
            ),
            (
                "@instrument async / tracer.span in a coroutine",
                r["mastrace @instrument (async)"],
                r["coroutine with tracer.span (async)"],
                "<=",
                1.2,
            ),
            (
                "disabled / OTel API no-op",
                r["mastrace disabled / unconfigured"],
                r["OTel API no-op tracer"],
                "<=",
                1.0,
            ),
            (
                "logfire.span / tracer.span (speed-up)",
                r["logfire.span (send_to_logfire=False)"],
                r["mastrace tracer.span"],
                ">=",
                3.0,
            ),
        ]
    )
    _experiment_case(args.n, args.rounds)
    loop.close()
    mastrace.shutdown()


# What a run's configuration looks like (a MASEval-style snapshot: agents, a per-run task id and seed).
_CONFIG = {
    "agents": {"a": {"model": "gpt-4o", "temperature": 0.2, "max_tokens": 512, "tools": ["search", "calc"]}},
    "benchmark": {"name": "bench"},
    "task_id": "t1",
    "seed": 7,
}
_SPANS_PER_RUN = 10


def _experiment_case(n: int, rounds: int) -> None:
    """One run = a root span, ten spans of work and a score; with `experiment_run()` (the root gets
    the experiment, task, repetition, configuration snapshot and hash, and its outcome) and
    `record_evaluation()`, against a plain root span and a plain `tracer.event` for the score (the
    same number of spans: the ratio is what the experiment's fields and API add)."""
    import mastrace

    tracer = mastrace.get_tracer("bench")

    def work() -> None:
        for _ in range(_SPANS_PER_RUN):
            with tracer.span("llm.openai.chat"):
                pass

    score = {"gen_ai.evaluation.name": "correct", "gen_ai.evaluation.score.value": 1.0}

    def v_plain(runs: int) -> None:
        for i in range(runs):
            with tracer.span("experiment.run", attributes={"task": "t1", "repetition": i % 5}):
                work()
                tracer.event("gen_ai.evaluation.result", **score)

    def v_by_hand(runs: int) -> None:
        # The same attributes written by hand: a user's own experiment fields, without the API.
        snap = _snapshot()
        for i in range(runs):
            attrs = {
                "mastrace.experiment.task_id": "t1",
                "mastrace.experiment.repetition": i % 5,
                "logfire.msg": f"Experiment run: task t1 repetition {i % 5}",
                "mastrace.experiment.name": "bench",
                "mastrace.config": snap.text,
                "mastrace.config.hash": snap.hash,
            }
            with tracer.span("experiment.run", attributes=attrs) as span:
                work()
                tracer.event("gen_ai.evaluation.result", **score, **{"gen_ai.evaluation.score.label": "pass"})
                span.set_attribute("mastrace.experiment.outcome", "success")

    def v_experiment(runs: int) -> None:
        for i in range(runs):
            with mastrace.experiment_run("t1", repetition=i % 5, experiment="bench", config=_CONFIG) as run:
                work()
                run.record_evaluation("correct", score=True)

    runs = max(1, n // (_SPANS_PER_RUN + 1))
    results = interleaved(
        {
            "run: root + 10 spans + 1 event (plain root)": v_plain,
            "run: the same attributes by hand + 10 spans + 1 event": v_by_hand,
            "run: experiment_run() + 10 spans + 1 evaluation": v_experiment,
        },
        runs,
        rounds,
    )
    print(
        f"\nµs per run ({_SPANS_PER_RUN} spans of work), median of {rounds} interleaved rounds of {runs} runs"
    )
    width = max(len(k) for k in results)
    for name, us in results.items():
        print(f"  {name:<{width}}  {us:8.2f} µs/run")
    plain, by_hand, experiment = results.values()
    print(f"  added by the experiment fields and the evaluation: {experiment - plain:.2f} µs/run")
    print(f"  added by the API over the same fields by hand:     {experiment - by_hand:.2f} µs/run")
    print_ratios(
        [
            ("experiment run / plain run (10 spans of work)", experiment, plain, "<=", 1.2),
            ("experiment run / the same fields by hand", experiment, by_hand, "<=", 1.05),
        ]
    )


def _snapshot() -> Any:
    from mastrace.pipeline._snapshots_on_spans import SnapshotCache

    return SnapshotCache().snapshot(_CONFIG)


if __name__ == "__main__":
    main()
