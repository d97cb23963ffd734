"""Every Logfire SQL query of the MassGen log-analyzer guide runs unchanged on the local store.

A MassGen-shaped run is written through the real OpenTelemetry SDK into a store, with fixed
timestamps so that durations are exact; each query below is copied verbatim from the guide (Parts
3, 4 and 7) with only its trace-id placeholder filled in, and must return what that run implies.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from mastrace.store import LocalStoreExporter, query

# --- Part 3: Common Analysis Queries ------------------------------------------------------------
VIEW_TRACE_HIERARCHY = "SELECT span_name, span_id, parent_span_id, duration, start_timestamp FROM records WHERE trace_id = '[YOUR_TRACE_ID]' ORDER BY start_timestamp LIMIT 50"  # noqa: E501
FIND_RECENT_SESSIONS = "SELECT span_name, trace_id, duration, start_timestamp FROM records WHERE span_name = 'coordination.session' ORDER BY start_timestamp DESC LIMIT 10"  # noqa: E501
AGENT_ROUND_PERFORMANCE = "SELECT span_name, duration, attributes->>'massgen.agent_id' as agent_id, attributes->>'massgen.round' as round, attributes->>'massgen.round_type' as round_type FROM records WHERE span_name LIKE 'agent.%' ORDER BY start_timestamp DESC LIMIT 20"  # noqa: E501
TOOL_CALL_ANALYSIS = "SELECT span_name, duration, parent_span_id, start_timestamp FROM records WHERE span_name LIKE 'mcp.%' OR span_name LIKE 'Tool execution:%' ORDER BY start_timestamp DESC LIMIT 30"  # noqa: E501
FIND_ERRORS = "SELECT span_name, exception_type, exception_message, trace_id, start_timestamp FROM records WHERE is_exception = true ORDER BY start_timestamp DESC LIMIT 20"  # noqa: E501
LLM_CALL_PERFORMANCE = "SELECT span_name, duration, attributes->>'gen_ai.request.model' as model, start_timestamp FROM records WHERE span_name LIKE 'llm.%' ORDER BY start_timestamp DESC LIMIT 30"  # noqa: E501
FULL_TRACE_NESTED = "SELECT CASE WHEN parent_span_id IS NULL THEN span_name ELSE ' └─ ' || span_name END as hierarchy, duration, span_id, parent_span_id FROM records WHERE trace_id = '[YOUR_TRACE_ID]' ORDER BY start_timestamp"  # noqa: E501
COORDINATION_EVENTS_TIMELINE = "SELECT span_name, message, duration, start_timestamp FROM records WHERE span_name LIKE 'Coordination event:%' OR span_name LIKE 'Agent answer:%' OR span_name LIKE 'Agent vote:%' OR span_name LIKE 'Winner selected:%' ORDER BY start_timestamp DESC LIMIT 30"  # noqa: E501

# --- Part 4: Analysis Workflow ------------------------------------------------------------------
STEP2_FIND_THE_TRACE = "SELECT trace_id, duration, start_timestamp FROM records WHERE span_name = 'coordination.session' ORDER BY start_timestamp DESC LIMIT 5"  # noqa: E501
STEP3_HIERARCHY = "SELECT span_name, span_id, parent_span_id, duration FROM records WHERE trace_id = '[trace_id_from_step_2]' ORDER BY start_timestamp"  # noqa: E501
STEP4_SLOW_TOOL_CALLS = "SELECT span_name, duration, parent_span_id FROM records WHERE trace_id = '[trace_id]' AND span_name LIKE 'mcp.%' ORDER BY duration DESC"  # noqa: E501
STEP4_AGENT_COMPARISON = "SELECT attributes->>'massgen.agent_id' as agent, COUNT(*) as rounds, SUM(duration) as total_time, AVG(duration) as avg_round_time FROM records WHERE trace_id = '[trace_id]' AND span_name LIKE 'agent.%' GROUP BY attributes->>'massgen.agent_id'"  # noqa: E501

# --- Part 7: Quick Reference (each comment sits on its own line before its query) ----------------
CHECK_COORDINATION_FLOW = "-- Check coordination flow\nSELECT span_name, start_timestamp, duration FROM records WHERE trace_id = '[TRACE_ID]' AND (span_name LIKE 'Coordination event:%' OR span_name LIKE 'Agent answer:%' OR span_name LIKE 'Agent vote:%' OR span_name LIKE 'Winner selected:%' OR span_name LIKE 'Final answer%') ORDER BY start_timestamp"  # noqa: E501
PHASE_DURATION_BREAKDOWN = "-- Phase duration breakdown\nSELECT CASE WHEN span_name LIKE 'agent.%.round_0' THEN 'initial_answer' WHEN span_name LIKE 'agent.%.round_%' THEN 'voting' WHEN span_name LIKE 'agent.%.presentation' THEN 'presentation' ELSE 'other' END as phase, COUNT(*) as count, ROUND(AVG(duration)::numeric, 2) as avg_duration_sec, ROUND(MAX(duration)::numeric, 2) as max_duration_sec, ROUND(SUM(duration)::numeric, 2) as total_duration_sec FROM records WHERE trace_id = '[TRACE_ID]' AND span_name LIKE 'agent.%' GROUP BY 1 ORDER BY total_duration_sec DESC"  # noqa: E501
FIND_ALL_EXCEPTIONS = "-- Find all exceptions\nSELECT span_name, exception_type, exception_message, start_timestamp FROM records WHERE trace_id = '[TRACE_ID]' AND is_exception = true ORDER BY start_timestamp"  # noqa: E501
TOKEN_USAGE_BY_AGENT = "-- Token usage by agent\nSELECT attributes->>'massgen.agent_id' as agent, SUM((attributes->'massgen.usage.input')::int) as total_input_tokens, SUM((attributes->'massgen.usage.output')::int) as total_output_tokens, SUM((attributes->'massgen.usage.cost')::float) as total_cost_usd FROM records WHERE trace_id = '[TRACE_ID]' AND span_name LIKE 'agent.%' AND attributes->>'massgen.usage.input' IS NOT NULL GROUP BY attributes->>'massgen.agent_id'"  # noqa: E501

T0 = 1_700_000_000_000_000_000  # 2023-11-14 22:13:20 UTC, in nanoseconds
T0_DATETIME = datetime.datetime(2023, 11, 14, 22, 13, 20)
PERMISSION_MESSAGE = "[Errno 13] Permission denied: '/workspace/readonly/answer.md'"


def at(seconds: float) -> datetime.datetime:
    return T0_DATETIME + datetime.timedelta(seconds=seconds)


class MassGenRun:
    """Writes one MassGen-shaped coordination session with fixed timestamps (in seconds from T0)."""

    def __init__(self, provider: TracerProvider) -> None:
        self.tracer = provider.get_tracer("massgen", "0.1.30")
        self.ids: dict[str, str] = {}
        self._spans: dict[str, trace.Span] = {}

    def span(
        self,
        key: str,
        name: str,
        start: float,
        end: float | None = None,
        parent: str | None = None,
        **attributes: Any,
    ) -> trace.Span:
        ctx = trace.set_span_in_context(self._spans[parent]) if parent else Context()
        kind = SpanKind.CLIENT if name.startswith(("mcp.", "llm.")) else SpanKind.INTERNAL
        links = attributes.pop("_links", None)
        span = self.tracer.start_span(
            name,
            context=ctx,
            kind=kind,
            start_time=T0 + round(start * 1e9),
            attributes=attributes,
            links=links,
        )
        self._spans[key] = span
        self.ids[key] = f"{span.get_span_context().span_id:016x}"
        if end is not None:
            span.end(end_time=T0 + round(end * 1e9))
        return span

    def log(self, key: str, name: str, at_s: float, parent: str, msg: str, **attributes: Any) -> None:
        self.span(
            key, name, at_s, at_s, parent, **{"logfire.span_type": "log", "logfire.msg": msg}, **attributes
        )

    def end(self, key: str, at_s: float) -> None:
        self._spans[key].end(end_time=T0 + round(at_s * 1e9))

    def write(self, offset: float = 0.0) -> str:
        """Write the session; return its trace id."""
        o = offset
        session = self.span("session", "coordination.session", o + 0, None, None, **{"massgen.num_agents": 2})
        self.log(
            "started", "Coordination event: coordination_started", o + 0.1, "session", "Coordination started"
        )
        self._round("a_r0", "agent_a", 0, "initial_answer", o + 1.0, 1000, 200, 0.01)
        self._round("b_r0", "agent_b", 0, "initial_answer", o + 1.2, 1500, 300, 0.02)
        self._llm("a_llm0", "a_r0", o + 1.5, o + 20.5, "openai/gpt-4o-mini")
        self._llm("b_llm0", "b_r0", o + 2.0, o + 40.0, "anthropic/claude-sonnet-4")
        self.span("tool", "Tool execution: mcp__filesystem__write_file", o + 20.9, o + 23.6, "a_r0")
        self.span(
            "mcp_ok",
            "mcp.filesystem.write_file",
            o + 21.0,
            o + 23.5,
            "a_r0",
            **{"mcp.method.name": "tools/call"},
        )
        failing = self.span("mcp_err", "mcp.filesystem.write_file", o + 24.0, None, "a_r0")
        failing.record_exception(
            PermissionError(13, "Permission denied", "/workspace/readonly/answer.md"),
            timestamp=T0 + round((o + 24.7) * 1e9),
        )
        failing.set_status(Status(StatusCode.ERROR, PERMISSION_MESSAGE))
        self.end("mcp_err", o + 24.75)
        for key, agent in (("a_r0", "agent_a"), ("b_r0", "agent_b")):
            label = "agent1.1" if agent == "agent_a" else "agent2.1"
            self._spans[key].set_attributes({"massgen.outcome": "answer", "massgen.answer_label": label})
        self.end("a_r0", o + 31.0)
        self.log("ans1", "Agent answer: agent1.1", o + 31.0, "session", "agent_a answered agent1.1")
        self.end("b_r0", o + 41.2)
        self.log("ans2", "Agent answer: agent2.1", o + 41.2, "session", "agent_b answered agent2.1")
        self._round("a_r1", "agent_a", 1, "voting", o + 42.0, 2000, 100, 0.015)
        self._round("b_r1", "agent_b", 1, "voting", o + 42.5, 2500, 150, 0.03)
        for key in ("a_r1", "b_r1"):
            self._spans[key].set_attributes(
                {"massgen.outcome": "vote", "massgen.voted_for_label": "agent1.1"}
            )
        self.end("a_r1", o + 52.0)
        self.end("b_r1", o + 58.5)
        answer_link = [Link(self._spans["ans1"].get_span_context())]
        self.log(
            "vote_a",
            "Agent vote: agent_a -> agent1.1",
            o + 52.0,
            "session",
            "agent_a voted for agent1.1",
            _links=answer_link,
        )
        self.log(
            "vote_b",
            "Agent vote: agent_b -> agent1.1",
            o + 58.5,
            "session",
            "agent_b voted for agent1.1",
            _links=answer_link,
        )
        self.log("winner_ev", "Coordination event: winner_selected", o + 59.0, "session", "Winner: agent_a")
        self._round("pres", "agent_a", None, "presentation", o + 60.0, 3000, 500, 0.05)
        self.log("winner", "Winner selected: agent1.1", o + 60.1, "pres", "agent1.1 wins")
        self._llm("pres_llm", "pres", o + 61.0, o + 89.0, "openai/gpt-4o-mini")
        self.log("final", "Final answer from agent_a", o + 89.5, "pres", "final answer presented")
        self.end("pres", o + 90.0)
        session.end(end_time=T0 + round((o + 100.0) * 1e9))
        return f"{session.get_span_context().trace_id:032x}"

    def _round(
        self,
        key: str,
        agent: str,
        rnd: int | None,
        round_type: str,
        start: float,
        tokens_in: int,
        tokens_out: int,
        cost: float,
    ) -> None:
        """Open an agent round (or the presentation) with its own usage; the caller ends it."""
        name = f"agent.{agent}.presentation" if rnd is None else f"agent.{agent}.round_{rnd}"
        attrs: dict[str, Any] = {
            "massgen.agent_id": agent,
            "massgen.round_type": round_type,
            "massgen.usage.input": tokens_in,
            "massgen.usage.output": tokens_out,
            "massgen.usage.cost": cost,
        }
        if rnd is not None:
            attrs["massgen.round"] = rnd
        else:
            attrs["massgen.is_winner"] = True
        self.span(key, name, start, None, "session", **attrs)

    def _llm(self, key: str, parent: str, start: float, end: float, model: str) -> None:
        self.span(key, "llm.openrouter.stream", start, end, parent, **{"gen_ai.request.model": model})


class Store:
    def __init__(self, path: Path, trace_id: str, old_trace_id: str, ids: dict[str, str]) -> None:
        self.path, self.trace_id, self.old_trace_id, self.ids = path, trace_id, old_trace_id, ids

    def run(self, sql: str) -> list[dict[str, Any]]:
        for placeholder in ("[YOUR_TRACE_ID]", "[TRACE_ID]", "[trace_id]", "[trace_id_from_step_2]"):
            sql = sql.replace(placeholder, self.trace_id)
        return query(sql, self.path)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    path = tmp_path_factory.mktemp("massgen-store")
    provider = TracerProvider(resource=Resource.create({"service.name": "massgen"}))
    provider.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(path)))
    old = MassGenRun(provider)
    old_trace_id = old.write(offset=-3600.0)
    run = MassGenRun(provider)
    trace_id = run.write()
    provider.shutdown()
    yield Store(path, trace_id, old_trace_id, run.ids)


TRACE_ORDER = [
    ("coordination.session", None, 100.0),
    ("Coordination event: coordination_started", "session", 0.0),
    ("agent.agent_a.round_0", "session", 30.0),
    ("agent.agent_b.round_0", "session", 40.0),
    ("llm.openrouter.stream", "a_r0", 19.0),
    ("llm.openrouter.stream", "b_r0", 38.0),
    ("Tool execution: mcp__filesystem__write_file", "a_r0", 2.7),
    ("mcp.filesystem.write_file", "a_r0", 2.5),
    ("mcp.filesystem.write_file", "a_r0", 0.75),
    ("Agent answer: agent1.1", "session", 0.0),
    ("Agent answer: agent2.1", "session", 0.0),
    ("agent.agent_a.round_1", "session", 10.0),
    ("agent.agent_b.round_1", "session", 16.0),
    ("Agent vote: agent_a -> agent1.1", "session", 0.0),
    ("Agent vote: agent_b -> agent1.1", "session", 0.0),
    ("Coordination event: winner_selected", "session", 0.0),
    ("agent.agent_a.presentation", "session", 30.0),
    ("Winner selected: agent1.1", "pres", 0.0),
    ("llm.openrouter.stream", "pres", 28.0),
    ("Final answer from agent_a", "pres", 0.0),
]


def expected_tree(store: Store) -> list[tuple[str, str | None, float]]:
    return [(name, store.ids[parent] if parent else None, duration) for name, parent, duration in TRACE_ORDER]


def test_view_trace_hierarchy(store: Store) -> None:
    """Part 3 'View Trace Hierarchy' lists the 20 spans in start order, with parents and durations."""
    rows = store.run(VIEW_TRACE_HIERARCHY)
    assert [(r["span_name"], r["parent_span_id"], r["duration"]) for r in rows] == expected_tree(store)
    assert rows[0]["span_id"] == store.ids["session"] and rows[0]["start_timestamp"] == T0_DATETIME


def test_find_recent_sessions(store: Store) -> None:
    """Part 3 'Find Recent Sessions' returns both sessions, newest first, each 100 s long."""
    rows = store.run(FIND_RECENT_SESSIONS)
    assert [(r["trace_id"], r["duration"], r["start_timestamp"]) for r in rows] == [
        (store.trace_id, 100.0, T0_DATETIME),
        (store.old_trace_id, 100.0, at(-3600)),
    ]


def test_agent_round_performance(store: Store) -> None:
    """Part 3 'Agent Round Performance' gives each round's agent, round number and type, newest first."""
    rows = store.run(AGENT_ROUND_PERFORMANCE)
    got = [(r["span_name"], r["duration"], r["agent_id"], r["round"], r["round_type"]) for r in rows]
    assert got[:5] == [
        ("agent.agent_a.presentation", 30.0, "agent_a", None, "presentation"),
        ("agent.agent_b.round_1", 16.0, "agent_b", "1", "voting"),
        ("agent.agent_a.round_1", 10.0, "agent_a", "1", "voting"),
        ("agent.agent_b.round_0", 40.0, "agent_b", "0", "initial_answer"),
        ("agent.agent_a.round_0", 30.0, "agent_a", "0", "initial_answer"),
    ]
    assert len(got) == 10  # the older session's five rounds follow


def test_tool_call_analysis(store: Store) -> None:
    """Part 3 'Tool Call Analysis' finds the MCP calls and the tool wrapper, their durations and parent."""
    rows = [r for r in store.run(TOOL_CALL_ANALYSIS) if r["start_timestamp"] >= T0_DATETIME]
    assert [(r["span_name"], r["duration"], r["parent_span_id"]) for r in rows] == [
        ("mcp.filesystem.write_file", 0.75, store.ids["a_r0"]),
        ("mcp.filesystem.write_file", 2.5, store.ids["a_r0"]),
        ("Tool execution: mcp__filesystem__write_file", 2.7, store.ids["a_r0"]),
    ]


def test_find_errors(store: Store) -> None:
    """Part 3 'Find Errors' returns the failed write_file call of each session, newest first."""
    rows = store.run(FIND_ERRORS)
    assert [(r["span_name"], r["exception_type"], r["exception_message"], r["trace_id"]) for r in rows] == [
        ("mcp.filesystem.write_file", "PermissionError", PERMISSION_MESSAGE, store.trace_id),
        ("mcp.filesystem.write_file", "PermissionError", PERMISSION_MESSAGE, store.old_trace_id),
    ]


def test_llm_call_performance(store: Store) -> None:
    """Part 3 'LLM Call Performance' gives each stream's duration and requested model."""
    rows = [r for r in store.run(LLM_CALL_PERFORMANCE) if r["start_timestamp"] >= T0_DATETIME]
    assert [(r["span_name"], r["duration"], r["model"]) for r in rows] == [
        ("llm.openrouter.stream", 28.0, "openai/gpt-4o-mini"),
        ("llm.openrouter.stream", 38.0, "anthropic/claude-sonnet-4"),
        ("llm.openrouter.stream", 19.0, "openai/gpt-4o-mini"),
    ]


def test_full_trace_with_hierarchy(store: Store) -> None:
    """Part 3 'Full Trace with Hierarchy' marks every span but the root as nested."""
    rows = store.run(FULL_TRACE_NESTED)
    assert [r["hierarchy"] for r in rows] == ["coordination.session"] + [
        f" └─ {name}" for name, _, _ in TRACE_ORDER[1:]
    ]
    assert rows[0]["parent_span_id"] is None and rows[0]["duration"] == 100.0


def test_coordination_events_timeline(store: Store) -> None:
    """Part 3 'Coordination Events Timeline' lists answers, votes, winner and events with their messages."""
    rows = [r for r in store.run(COORDINATION_EVENTS_TIMELINE) if r["start_timestamp"] >= T0_DATETIME]
    assert [(r["span_name"], r["message"], r["duration"]) for r in rows] == [
        ("Winner selected: agent1.1", "agent1.1 wins", 0.0),
        ("Coordination event: winner_selected", "Winner: agent_a", 0.0),
        ("Agent vote: agent_b -> agent1.1", "agent_b voted for agent1.1", 0.0),
        ("Agent vote: agent_a -> agent1.1", "agent_a voted for agent1.1", 0.0),
        ("Agent answer: agent2.1", "agent_b answered agent2.1", 0.0),
        ("Agent answer: agent1.1", "agent_a answered agent1.1", 0.0),
        ("Coordination event: coordination_started", "Coordination started", 0.0),
    ]


def test_step2_find_the_trace(store: Store) -> None:
    """Part 4 step 2 finds the latest session's trace id first."""
    rows = store.run(STEP2_FIND_THE_TRACE)
    assert [r["trace_id"] for r in rows] == [store.trace_id, store.old_trace_id]
    assert rows[0]["duration"] == 100.0


def test_step3_hierarchy(store: Store) -> None:
    """Part 4 step 3 returns the trace's structure in start order."""
    rows = store.run(STEP3_HIERARCHY)
    assert [(r["span_name"], r["parent_span_id"], r["duration"]) for r in rows] == expected_tree(store)


def test_step4_slow_tool_calls(store: Store) -> None:
    """Part 4 step 4 'Slow tool calls' orders the trace's MCP calls by duration."""
    rows = store.run(STEP4_SLOW_TOOL_CALLS)
    assert [(r["span_name"], r["duration"], r["parent_span_id"]) for r in rows] == [
        ("mcp.filesystem.write_file", 2.5, store.ids["a_r0"]),
        ("mcp.filesystem.write_file", 0.75, store.ids["a_r0"]),
    ]


def test_step4_agent_comparison(store: Store) -> None:
    """Part 4 step 4 'Agent comparison' counts each agent's rounds and sums and averages their time."""
    rows = sorted(store.run(STEP4_AGENT_COMPARISON), key=lambda r: r["agent"])
    assert [(r["agent"], r["rounds"], r["total_time"]) for r in rows] == [
        ("agent_a", 3, 70.0),
        ("agent_b", 2, 56.0),
    ]
    assert [r["avg_round_time"] for r in rows] == [pytest.approx(70.0 / 3), 28.0]


def test_check_coordination_flow(store: Store) -> None:
    """Part 7 'Check coordination flow' lists the flow from start to final answer in order."""
    rows = store.run(CHECK_COORDINATION_FLOW)
    assert [(r["span_name"], r["start_timestamp"]) for r in rows] == [
        ("Coordination event: coordination_started", at(0.1)),
        ("Agent answer: agent1.1", at(31.0)),
        ("Agent answer: agent2.1", at(41.2)),
        ("Agent vote: agent_a -> agent1.1", at(52.0)),
        ("Agent vote: agent_b -> agent1.1", at(58.5)),
        ("Coordination event: winner_selected", at(59.0)),
        ("Winner selected: agent1.1", at(60.1)),
        ("Final answer from agent_a", at(89.5)),
    ]


def test_phase_duration_breakdown(store: Store) -> None:
    """Part 7 'Phase duration breakdown' groups rounds by phase with rounded numeric statistics."""
    rows = store.run(PHASE_DURATION_BREAKDOWN)
    got = [
        (
            r["phase"],
            r["count"],
            float(r["avg_duration_sec"]),
            float(r["max_duration_sec"]),
            float(r["total_duration_sec"]),
        )
        for r in rows
    ]
    assert got == [
        ("initial_answer", 2, 35.0, 40.0, 70.0),
        ("presentation", 1, 30.0, 30.0, 30.0),
        ("voting", 2, 13.0, 16.0, 26.0),
    ]


def test_find_all_exceptions(store: Store) -> None:
    """Part 7 'Find all exceptions' returns the trace's one failed tool call."""
    rows = store.run(FIND_ALL_EXCEPTIONS)
    assert [
        (r["span_name"], r["exception_type"], r["exception_message"], r["start_timestamp"]) for r in rows
    ] == [("mcp.filesystem.write_file", "PermissionError", PERMISSION_MESSAGE, at(24.0))]


def test_token_usage_by_agent(store: Store) -> None:
    """Part 7 'Token usage by agent' sums each agent's per-round usage over its rounds."""
    rows = sorted(store.run(TOKEN_USAGE_BY_AGENT), key=lambda r: r["agent"])
    assert [(r["agent"], r["total_input_tokens"], r["total_output_tokens"]) for r in rows] == [
        ("agent_a", 6000, 800),
        ("agent_b", 4000, 450),
    ]
    assert [r["total_cost_usd"] for r in rows] == [
        pytest.approx(0.075, rel=1e-6),
        pytest.approx(0.05, rel=1e-6),
    ]
