"""Sustained load, end to end: sessions of 28 spans traced and written to the local store, flush included.

Both variants write every span to a local store through a `BatchSpanProcessor`, so the comparison is
the whole path, caller and export thread together, competing for the GIL as they do in a real run:

- raw SDK: an OpenTelemetry SDK `TracerProvider` with `BatchSpanProcessor(LocalStoreExporter(...))`
  (the store's exporter wired into a plain SDK: no scrubbing, no size caps, no counts);
- mastrace: `mastrace.configure(local=...)` with its defaults (scrubbing on).

Each session is one `coordination.session` with 3 agents × 2 rounds; a round holds an LLM call (with
a prompt and a completion), a tool call and an MCP call, and the session logs its coordination
events: 28 spans, as a MassGen run has. Variants alternate in chunks of sessions; each chunk is timed
from its first span to the end of its flush. The median chunk time per session is compared.

`--matcher python` makes mastrace's scrubber use that first-pass matcher (as on an install without
`mastrace[speed]`); `--baseline REV` makes it use another revision's scrubbing engine from git. One
process runs one mastrace configuration: compare revisions by alternating runs of this script.

Run: .venv/bin/python benchmarks/bench_load.py [--sessions 10000] [--chunk 500] [--matcher NAME]
[--baseline REV]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

sys.path.insert(0, os.path.dirname(__file__))
import _scrub_baseline
from _common import print_ratios

SpanFactory = Callable[[str, dict[str, Any]], AbstractContextManager[Any]]
PROMPT = "Plan a three-day trip to Lisbon with a budget of 900 EUR; compare the answers so far. " * 6
COMPLETION = "Day 1: Alfama and the castle; day 2: Belém and the riverside; day 3: Sintra. " * 4


def session(span: SpanFactory, n: int) -> int:
    """Trace one MassGen-shaped session through `span`; return the number of spans made."""
    count = 1
    with span("coordination.session", {"massgen.num_agents": 3, "massgen.session_id": f"s{n}"}):
        for event in ("coordination_started", "answers_collected", "winner_selected"):
            with span(f"Coordination event: {event}", {"massgen.event_type": event}):
                count += 1
        for agent in ("agent_a", "agent_b", "agent_c"):
            for rnd in (0, 1):
                round_attrs = {
                    "massgen.agent_id": agent,
                    "massgen.round": rnd,
                    "massgen.round_type": "initial_answer" if rnd == 0 else "voting",
                    "gen_ai.operation.name": "invoke_agent",
                    "massgen.outcome": "answer",
                    "massgen.usage.input": 1200,
                    "massgen.usage.output": 300,
                    "massgen.usage.cost": 0.0042,
                }
                with span(f"agent.{agent}.round_{rnd}", round_attrs):
                    llm_attrs = {
                        "gen_ai.operation.name": "chat",
                        "gen_ai.request.model": "gpt-4o-mini",
                        "gen_ai.usage.input_tokens": 1200,
                        "gen_ai.usage.output_tokens": 300,
                        "massgen.prompt": f"{PROMPT} (session {n}, {agent}, round {rnd})",
                        "massgen.completion": f"{COMPLETION} [{n}]",
                    }
                    with span("llm.openai.chat", llm_attrs):
                        pass
                    with span("Tool execution: read_file", {"massgen.tool_name": "read_file"}):
                        pass
                    with span(
                        "mcp.filesystem.read_file", {"mcp.method.name": "tools/call", "path": "/w/a.md"}
                    ):
                        pass
                count += 4
    return count


def raw_variant(store: str) -> tuple[SpanFactory, Callable[[], None], Callable[[], None]]:
    from mastrace.store import LocalStoreExporter

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(LocalStoreExporter(store), max_queue_size=1 << 16))
    tracer = provider.get_tracer("bench")

    def span(name: str, attrs: dict[str, Any]) -> AbstractContextManager[Any]:
        return tracer.start_as_current_span(name, attributes=attrs)

    return span, lambda: provider.force_flush(), provider.shutdown


def mastrace_variant(store: str) -> tuple[SpanFactory, Callable[[], None], Callable[[], None]]:
    import mastrace

    mastrace.configure(local=store, propagate_threads=False)
    tracer = mastrace.get_tracer("bench")

    def span(name: str, attrs: dict[str, Any]) -> AbstractContextManager[Any]:
        return tracer.span(name, attrs)

    return span, lambda: mastrace.force_flush(timeout=120), mastrace.shutdown


def use_scrubber(matcher: str | None, baseline: str | None) -> None:
    """Make the scrubber mastrace builds on its export thread one of `baseline` and/or `matcher`."""
    if matcher is None and baseline is None:
        return
    from mastrace.scrubbing import _engine

    cls = _engine.Scrubber if baseline is None else _scrub_baseline.load(baseline)
    kwargs = {} if matcher is None else {"matcher": matcher}
    _engine.Scrubber = functools.partial(cls, **kwargs)  # type: ignore[misc]
    name = getattr(cls(**kwargs), "matcher", "the engine before the rule table")
    print(f"scrubbing with {baseline or 'this version'}'s engine, matcher: {name}")


def chunks(total: int, size: int) -> Iterator[int]:
    done = 0
    while done < total:
        yield min(size, total - done)
        done += size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000, help="sessions per variant")
    parser.add_argument("--chunk", type=int, default=500, help="sessions per timed chunk")
    parser.add_argument("--matcher", help="the scrubber's first-pass matcher (hyperscan, re2, python)")
    parser.add_argument("--baseline", metavar="REV", help="scrub with this git revision's engine")
    args = parser.parse_args()
    use_scrubber(args.matcher, args.baseline)

    import mastrace
    from mastrace.store import query

    with tempfile.TemporaryDirectory() as raw_dir, tempfile.TemporaryDirectory() as mt_dir:
        variants = {
            "raw SDK → local store": raw_variant(raw_dir),
            "mastrace → local store": mastrace_variant(mt_dir),
        }
        samples: dict[str, list[float]] = {name: [] for name in variants}
        spans = {name: 0 for name in variants}
        for span, flush, _ in variants.values():  # warm up
            for i in range(20):
                session(span, i)
            flush()
        for size in chunks(args.sessions, args.chunk):
            for name, (span, flush, _) in variants.items():
                start = time.perf_counter()
                for i in range(size):
                    spans[name] += session(span, i)
                flush()
                samples[name].append((time.perf_counter() - start) / size * 1e3)
        counts = mastrace.force_flush(timeout=120)
        for _, _, shutdown in variants.values():
            shutdown()
        stored = {
            name: query("SELECT count(*) AS n FROM records", path=path)[0]["n"]
            for name, path in zip(variants, (raw_dir, mt_dir), strict=True)
        }

    result = {name: statistics.median(values) * 1e3 for name, values in samples.items()}
    print(
        f"\nµs per session of 28 spans, end to end (flush included), median of "
        f"{len(next(iter(samples.values())))} chunks of {args.chunk} sessions"
    )
    for name, us in result.items():
        print(f"  {name:<24} {us:9.1f} µs/session  {us / 28:6.2f} µs/span")
    for name in variants:
        print(f"  {name}: {spans[name]:,} spans made, {stored[name]:,} in the store (with the warm-up's)")
    print(f"  mastrace counts: exported {counts.exported}, dropped {counts.dropped}, failed {counts.failed}")
    raw, mt = result.values()
    print_ratios([("mastrace / raw SDK, end to end under sustained load", mt, raw, "<=", 1.2)])


if __name__ == "__main__":
    main()
