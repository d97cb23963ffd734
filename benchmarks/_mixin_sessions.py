"""A MassGen-shaped session through the mixins, and the same spans replayed through the raw SDK.

`bench_mixins.py --part sessions` runs this in a process of its own: mastrace configured with its
defaults (a local store, scrubbing), and beside it a raw OpenTelemetry SDK `TracerProvider` whose
`BatchSpanProcessor` feeds an exporter that keeps nothing. The raw replay makes the spans the mixins
made (same names, nesting, kinds and final attributes, captured once and precomputed), so the ratio
between the two is mastrace's own per-call work.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from _common import DroppingExporter, print_ratios
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

PROMPT = "Plan a three-day trip to Lisbon with a budget of 900 EUR; compare the answers so far. "
CHUNKS = [{"id": "r1", "model": "gpt-4o-mini", "delta": w} for w in ("Day", " 1:", " Alfama", ".")]


def build_session(static_prices: bool) -> Callable[[int], None]:
    """One coordination session of 3 agents × 2 rounds, each with an LLM stream, a tool and an MCP call."""
    import mastrace
    from mastrace import (
        AgentMixin,
        ConfigurableMixin,
        CoordinationMixin,
        LLMBackendMixin,
        MCPClientMixin,
        Registry,
        StaticPricing,
        ToolMixin,
    )

    class Backend(LLMBackendMixin, ConfigurableMixin):
        provider = "openai"

        def __init__(self) -> None:
            self.model = "gpt-4o-mini"
            self.temperature = 0.2

    class Agent(AgentMixin, ToolMixin, MCPClientMixin, ConfigurableMixin):
        server_name = "filesystem"

        def __init__(self, agent_id: str, backend: Backend) -> None:
            self.agent_id = agent_id
            self.backend = backend
            self.system_message = f"You are {agent_id}, a careful travel planner."

    class Orchestrator(CoordinationMixin, ConfigurableMixin):
        pass

    backend = Backend()
    if static_prices:
        backend.cost_calculator = StaticPricing({"gpt-4o-mini": {"input": 0.15, "output": 0.6}})
    registry = Registry()
    agents = [Agent(a, backend) for a in ("agent_a", "agent_b", "agent_c")]
    orchestrator = Orchestrator()
    orchestrator.mastrace_registry = registry
    with registry.scope():
        registry.register("backends", "openai", backend)
        for agent in agents:
            registry.register("agents", agent.agent_id, agent)
    last = {"usage": {"prompt_tokens": 1200, "completion_tokens": 300}, "model": "gpt-4o-mini"}

    def session(n: int) -> None:
        with orchestrator.coordination_session(PROMPT, [a.agent_id for a in agents]):
            orchestrator.coordination_event("coordination_started")
            for rnd in (0, 1):
                for agent in agents:
                    kind = "initial_answer" if rnd == 0 else "voting"
                    with agent.agent_round(rnd, kind) as r:
                        for _ in backend.llm_stream("gpt-4o-mini", [*CHUNKS, last], temperature=0.2):
                            pass
                        with agent.tool_execution("read_file"):
                            pass
                        with agent.mcp_tool_call("read_file", {"path": "/w/a.md"}) as call:
                            call.set_result({"content": [{"type": "text", "text": "ok"}]})
                        if rnd == 0:
                            r.set_outcome("answer", answer_label=f"{agent.agent_id}.1")
                            orchestrator.record_answer(agent.agent_id, f"{agent.agent_id}.1")
                        else:
                            r.set_outcome("vote", voted_for="agent_a", voted_for_label="agent_a.1")
                            orchestrator.record_vote(agent.agent_id, "agent_a", "agent_a.1", "clearest")
            orchestrator.record_winner("agent_a", "agent_a.1")
            with agents[0].agent_presentation(2):
                for _ in backend.llm_stream("gpt-4o-mini", [*CHUNKS, last]):
                    pass
            orchestrator.record_final_answer("agent_a")

    del mastrace
    return session


def replay_of(spans: list[ReadableSpan], tracer: Any) -> Callable[[int], None]:
    """Replay `spans` (one session) through `tracer`: same names, nesting, kinds and attributes."""
    children: dict[int | None, list[ReadableSpan]] = {}
    for s in sorted(spans, key=lambda s: s.start_time or 0):
        parent = s.parent.span_id if s.parent is not None else None
        children.setdefault(parent, []).append(s)
    known = {s.context.span_id for s in spans}
    roots = [s for p, kids in children.items() if p is None or p not in known for s in kids]
    plan: list[Any] = []

    def compile_(span: ReadableSpan) -> tuple[str, Any, dict[str, Any], list[Any]]:
        kids = [compile_(k) for k in children.get(span.context.span_id, [])]
        return (span.name, span.kind, dict(span.attributes or {}), kids)

    plan = [compile_(r) for r in roots]
    start = tracer.start_as_current_span

    def run(node: tuple[str, Any, dict[str, Any], list[Any]]) -> None:
        name, kind, attrs, kids = node
        with start(name, kind=kind, attributes=attrs):
            for kid in kids:
                run(kid)

    def session(n: int) -> None:
        for node in plan:
            run(node)

    return session


def measure(variants: dict[str, Callable[[int], None]], n: int, rounds: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {k: [] for k in variants}
    for fn in variants.values():
        for i in range(max(1, n // 10)):
            fn(i)
    for r in range(rounds):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))
        for name in order:
            fn = variants[name]
            start = time.perf_counter()
            for i in range(n):
                fn(i)
            samples[name].append((time.perf_counter() - start) / n * 1e6)
    return {k: statistics.median(v) for k, v in samples.items()}


def main(n: int, rounds: int, sink: str = "store") -> None:
    """`sink="store"`: mastrace with its defaults (local store, scrubbing); `"noop"`: mastrace exporting
    into the same no-op sink as the raw SDK, scrubbing off, which leaves only its caller-side work."""
    import importlib.util

    import mastrace
    from mastrace.testing import capture_spans

    speed = all(importlib.util.find_spec(m) is not None for m in ("orjson", "hyperscan"))
    prices = importlib.util.find_spec("genai_prices") is not None
    with tempfile.TemporaryDirectory() as store:
        options: dict[str, Any] = {"local": store, "propagate_threads": False, "service_name": "bench"}
        if sink == "noop":
            options.update(local=False, scrubbing=False, exporters=[DroppingExporter()])
        mastrace.configure(**options)
        mt = mastrace.get_tracer("bench")
        session_default = build_session(static_prices=False)
        session_static = build_session(static_prices=True)
        with capture_spans() as captured:
            session_default(0)
        shape = list(captured.spans)
        mastrace.configure(**options)
        raw_provider = TracerProvider()
        raw_provider.add_span_processor(BatchSpanProcessor(DroppingExporter(), max_queue_size=1 << 20))
        raw_tracer = raw_provider.get_tracer("bench")
        replay = replay_of(shape, raw_tracer)
        size = sum(len(str(v)) + len(k) for s in shape for k, v in (s.attributes or {}).items())

        def raw_span(i: int) -> None:
            for _ in range(len(shape)):
                with raw_tracer.start_as_current_span("work", attributes={"i": i}):
                    pass

        def mt_span(i: int) -> None:
            for _ in range(len(shape)):
                with mt.span("work", {"i": i}):
                    pass

        results = measure(
            {
                "raw SDK, the mixins' spans replayed (no-op sink)": replay,
                "mixins, default table prices": session_default,
                "mixins, StaticPricing": session_static,
                "raw SDK tracer spans (no-op sink)": raw_span,
                "tracer.span (local store + scrubbing)"
                if sink == "store"
                else "tracer.span (no-op sink, no scrubbing)": mt_span,
            },
            n,
            rounds,
        )
        flushed = mastrace.force_flush(timeout=120)
        mastrace.shutdown()
    where = (
        "local store + scrubbing"
        if sink == "store"
        else "a no-op sink, scrubbing off (caller-side work only)"
    )
    print(
        f"\nmastrace into {where}; one session = {len(shape)} spans, {size / 1024:.1f} KB of attributes; "
        "µs per session, "
        f"median of {rounds} interleaved rounds of {n} sessions (extras installed: "
        f"prices={'yes' if prices else 'no'}, speed={'yes' if speed else 'no'})"
    )
    width = max(map(len, results))
    for name, us in results.items():
        print(f"  {name:<{width}}  {us:9.1f} µs/session  {us / len(shape):6.2f} µs/span")
    print(
        f"  mastrace counts: exported {flushed.exported}, dropped {flushed.dropped}, failed {flushed.failed}"
    )
    replayed = results["raw SDK, the mixins' spans replayed (no-op sink)"]
    target = 1.5 if speed else 2.0
    print_ratios(
        [
            (
                "mixins (default prices) / raw same shape",
                results["mixins, default table prices"],
                replayed,
                "<=",
                target,
            ),
            (
                "mixins (StaticPricing) / raw same shape",
                results["mixins, StaticPricing"],
                replayed,
                "<=",
                target,
            ),
            (
                "tracer.span + store + scrubbing / raw SDK no-op sink"
                if sink == "store"
                else "tracer.span, no-op sink / raw SDK no-op sink",
                results[next(k for k in results if k.startswith("tracer.span"))],
                results["raw SDK tracer spans (no-op sink)"],
                "<=",
                1.0,
            ),
        ]
    )


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:])
