"""The caller's cost of a span with pending spans on (the store's export thread writes the start of
each span open at a flush) vs off (the same pipeline, that pass switched off), side by side.

Each variant traces agent rounds holding a short LLM-like span, while `--open` long spans stay open
(so the export thread's pass over open spans has work on every flush). The caller's side of both is
`Pipeline.on_start`'s dict insert and `on_end`'s queue append: the ratio should be ~1.0.

Run: .venv/bin/python benchmarks/bench_pending.py [--n 20000] [--rounds 7] [--open 200]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from _common import interleaved, print_ratios, print_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=20_000, help="spans per variant per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--open", type=int, default=200, help="spans kept open meanwhile")
    args = parser.parse_args()

    import mastrace
    from mastrace.setup import _config

    store = tempfile.mkdtemp(prefix="bench-pending-")
    mastrace.configure(local=store, propagate_threads=False)
    pipeline = _config._RT.pipeline
    assert pipeline is not None
    (local,) = [d for d in pipeline.destinations if d.name == "local"]
    watching = local.open_spans
    tracer = mastrace.get_tracer("bench")
    held = [tracer.start_span(f"agent.held_{i}.round_0") for i in range(args.open)]

    def traced(n: int) -> None:
        for i in range(n // 2):
            with (
                tracer.span("agent.a.round_1", attributes={"massgen.agent_id": "a", "i": i}),
                tracer.span("llm.call"),
            ):
                pass

    def pending_on(n: int) -> None:
        local.open_spans = watching
        traced(n)

    def pending_off(n: int) -> None:
        local.open_spans = None
        traced(n)

    results = interleaved({"pending on": pending_on, "pending off": pending_off}, args.n, args.rounds)
    local.open_spans = watching
    time.sleep(1.0)  # a few flushes with the held spans open
    for span in held:
        span.end()
    flushed = mastrace.force_flush(60)
    mastrace.shutdown()
    print_table(f"caller's µs per span ({args.open} spans held open; flush ok: {bool(flushed)})", results)
    print_ratios(
        [
            (
                "pending on / pending off (caller's cost)",
                results["pending on"],
                results["pending off"],
                "<=",
                1.05,
            )
        ]
    )


if __name__ == "__main__":
    main()
