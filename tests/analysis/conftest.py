"""A synthetic MassGen-shaped trace with exact timestamps and known, overlapping tool intervals.

Spans go through the real OpenTelemetry SDK into a real `LocalStoreExporter`; times are given in
milliseconds from T0, so every duration the analysis reports can be computed by hand (see the
comments next to each span).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Link, Status, StatusCode

from mastrace.store import LocalStoreExporter

T0_NS = 1_700_000_000_000_000_000  # 2023-11-14 22:13:20 UTC


class TraceWriter:
    """Writes spans with explicit start and end times (milliseconds from T0 plus `offset_ms`)."""

    def __init__(self, path: Path, service: str = "synthetic") -> None:
        self.provider = TracerProvider(resource=Resource.create({"service.name": service}))
        self.provider.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(path)))
        self.tracer = self.provider.get_tracer("tests.analysis")
        self.spans: dict[str, trace.Span] = {}
        self.ids: dict[str, str] = {}
        self.offset_ms = 0

    def _ns(self, ms: float) -> int:
        return T0_NS + round((ms + self.offset_ms) * 1_000_000)

    def span(
        self,
        key: str,
        name: str,
        start_ms: float,
        end_ms: float,
        parent: str | None = None,
        *,
        error: BaseException | None = None,
        links: list[str] | None = None,
        events: list[str] | None = None,
        **attrs: Any,
    ) -> str:
        """Write one finished span; returns its span id (hex)."""
        ctx = trace.set_span_in_context(self.spans[parent]) if parent else Context()
        span = self.tracer.start_span(
            name,
            context=ctx,
            start_time=self._ns(start_ms),
            attributes=attrs,
            links=[Link(self.spans[k].get_span_context()) for k in links or ()],
        )
        for event in events or ():
            span.add_event(event, timestamp=self._ns(start_ms))
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        span.end(end_time=self._ns(end_ms))
        self.spans[key] = span
        self.ids[key] = f"{span.get_span_context().span_id:016x}"
        return self.ids[key]

    def log(self, key: str, name: str, at_ms: float, parent: str, **attrs: Any) -> str:
        """A zero-duration log record, shaped like `tracer.event()`."""
        return self.span(
            key, name, at_ms, at_ms, parent, **{"logfire.span_type": "log", "logfire.msg": name}, **attrs
        )

    def trace_id(self, key: str = "session") -> str:
        return f"{self.spans[key].get_span_context().trace_id:032x}"

    def close(self) -> None:
        self.provider.shutdown()


def usage(inp: int, out: int, cached: int, cost: float, reasoning: int = 0) -> dict[str, Any]:
    return {
        "massgen.usage.input": inp,
        "massgen.usage.output": out,
        "massgen.usage.cached_input": cached,
        "massgen.usage.cost": cost,
        "massgen.usage.reasoning": reasoning,
    }


def agent(agent_id: str, round_no: int | None, round_type: str, **extra: Any) -> dict[str, Any]:
    attrs = {"massgen.agent_id": agent_id, "massgen.round_type": round_type, **extra}
    if round_no is not None:
        attrs["massgen.round"] = round_no
    return attrs


CONFIG = {
    "agents": {"agent_a": {"model": "gpt-4o", "temperature": 0.2}, "agent_b": {"model": "gpt-4o"}},
    "benchmark": {"python": {"version": "3.11.7"}},
}


def write_session(w: TraceWriter, config: dict[str, Any] | None = None) -> str:
    """The reference session (10 s). Expected figures are listed in `EXPECTED`."""
    w.span(
        "session",
        "coordination.session",
        0,
        10_000,
        None,
        **{
            "massgen.task": "Name the coffee shop",
            "massgen.agent_ids": ("agent_a", "agent_b"),
            "mastrace.config": json.dumps(config or CONFIG),
            "mastrace.config.hash": "hash-a",
        },
    )
    w.log(
        "started",
        "Coordination event: coordination_started",
        50,
        "session",
        **{"massgen.event_type": "coordination_started"},
    )
    # agent_a round 0: 100 → 5100 ms (5.0 s)
    w.span(
        "a0",
        "agent.agent_a.round_0",
        100,
        5_100,
        "session",
        **agent(
            "agent_a",
            0,
            "initial_answer",
            **{"massgen.outcome": "answer", "massgen.answer_label": "agent1.1"},
            **usage(1000, 200, 400, 0.01, reasoning=50),
        ),
    )
    w.span("a0_llm", "llm.openai.stream", 100, 1_100, "a0", **{"gen_ai.request.model": "gpt-4o"})
    w.span("a0_t1", "Tool execution: t1", 1_200, 2_200, "a0")  # ┐ union 1200 → 2600 = 1.4 s
    w.span("a0_read", "mcp.fs.read", 1_300, 2_000, "a0_t1")  # │ (nested inside t1)
    w.span("a0_q", "mcp.search.q", 1_800, 2_600, "a0")  # ┘ (overlaps t1)
    w.span("a0_q2", "mcp.search.q2", 3_000, 3_500, "a0")  # ┐ union 3000 → 3600 = 0.6 s
    w.span("a0_t2", "Tool execution: t2", 3_400, 3_600, "a0")  # ┘
    w.span("a0_step", "plan.step", 4_000, 4_800, "a0")  # not a tool
    w.span("a0_t3", "Tool execution: t3", 4_100, 4_400, "a0_step")  # grandchild: 0.3 s
    w.span("a0_late", "mcp.late.x", 5_000, 5_300, "a0")  # clipped to the round: 0.1 s
    # → agent_a round 0: tool wall 2.4 s, non-tool 2.6 s, 6 tool calls (t1 and the read it holds are one)
    # agent_b round 0: 200 → 3200 ms (3.0 s); its tools overlap agent_a's in time, not in the round
    w.span(
        "b0",
        "agent.agent_b.round_0",
        200,
        3_200,
        "session",
        **agent(
            "agent_b",
            0,
            "initial_answer",
            **{"massgen.outcome": "answer", "massgen.answer_label": "agent2.1"},
            **usage(500, 100, 0, 0.005),
        ),
    )
    w.span("b0_w1", "mcp.fs.write", 500, 1_500, "b0", error=PermissionError("read-only mount"))
    w.span("b0_w2", "mcp.fs.write", 1_000, 2_000, "b0")  # union 500 → 2000 = 1.5 s
    w.log(
        "ans2",
        "Agent answer: agent2.1",
        3_200,
        "session",
        **{"massgen.agent_id": "agent_b", "massgen.answer_label": "agent2.1"},
    )
    # agent_b round 1 (voting): 3300 → 5300 ms (2.0 s), one tool of 0.1 s
    w.span(
        "b1",
        "agent.agent_b.round_1",
        3_300,
        5_300,
        "session",
        **agent(
            "agent_b",
            1,
            "voting",
            **{"massgen.outcome": "vote", "massgen.voted_for": "agent_b"},
            **usage(300, 30, 0, 0.003),
        ),
    )
    w.span("b1_t", "mcp.x.y", 3_300, 3_400, "b1")
    w.log(
        "ans1",
        "Agent answer: agent1.1",
        5_100,
        "session",
        **{"massgen.agent_id": "agent_a", "massgen.answer_label": "agent1.1"},
    )
    w.log(
        "vote_b",
        "Agent vote: agent_b -> agent2.1",
        5_300,
        "session",
        links=["ans2"],
        **{
            "massgen.agent_id": "agent_b",
            "massgen.voted_for": "agent_b",
            "massgen.voted_for_label": "agent2.1",
            "massgen.vote.reason": "shortest name",
        },
    )
    # agent_a round 1 (voting): 5200 → 6200 ms (1.0 s)
    w.span(
        "a1",
        "agent.agent_a.round_1",
        5_200,
        6_200,
        "session",
        **agent(
            "agent_a",
            1,
            "voting",
            **{"massgen.outcome": "vote", "massgen.voted_for": "agent_b"},
            **usage(300, 50, 300, 0.002),
        ),
    )
    w.log(
        "vote_a",
        "Agent vote: agent_a -> agent2.1",
        6_200,
        "session",
        links=["ans2"],
        **{
            "massgen.agent_id": "agent_a",
            "massgen.voted_for": "agent_b",
            "massgen.voted_for_label": "agent2.1",
        },
    )
    w.log(
        "winner",
        "Winner selected: agent2.1",
        6_300,
        "session",
        **{"massgen.winner": "agent_b", "massgen.agent_id": "agent_b", "massgen.answer_label": "agent2.1"},
    )
    # agent_b presentation: 6500 → 9500 ms (3.0 s)
    w.span(
        "b2",
        "agent.agent_b.presentation",
        6_500,
        9_500,
        "session",
        **agent("agent_b", 2, "presentation", **{"massgen.is_winner": True}, **usage(200, 400, 0, 0.004)),
    )
    w.log("final", "Final answer from agent_b", 9_400, "b2", **{"massgen.agent_id": "agent_b"})
    return w.trace_id()


EXPECTED = {
    "duration": 10.0,
    "input": 2300,
    "output": 780,
    "cost": 0.024,
    "phases": {
        "initial_answer": (2, 4.0, 5.0, 8.0),
        "voting": (2, 1.5, 2.0, 3.0),
        "presentation": (1, 3.0, 3.0, 3.0),
    },
    # (agent, segment): (duration, tool wall, non-tool, tool spans, tool errors)
    "rounds": {
        ("agent_a", 1): (5.0, 2.4, 2.6, 6, 0),
        ("agent_a", 2): (1.0, 0.0, 1.0, 0, 0),
        ("agent_b", 1): (3.0, 1.5, 1.5, 2, 1),
        ("agent_b", 2): (2.0, 0.1, 1.9, 1, 0),
        ("agent_b", 3): (3.0, 0.0, 3.0, 0, 0),
    },
}


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[TraceWriter]:
    """A `TraceWriter` on an empty store in `tmp_path / "store"`."""
    w = TraceWriter(tmp_path / "store")
    yield w
    w.close()


@pytest.fixture
def synthetic(writer: TraceWriter, tmp_path: Path) -> tuple[Path, str, TraceWriter]:
    """A store holding the reference session: (store path, trace id, writer with span ids)."""
    trace_id = write_session(writer)
    return tmp_path / "store", trace_id, writer
