"""The MassGen log-analyzer guide's SQL queries, and a MassGen-shaped run that answers them.

A MassGen-shaped run is written through the real OpenTelemetry SDK into a store, with fixed
timestamps so that durations are exact; each query below is copied verbatim from the guide (Parts
3, 4 and 7) with only its trace-id placeholder filled in (`Store.sql`). Shared by the store's tests
and by the tests of everything that answers the guide's queries another way (the Query API, MCP).
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

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

SEED_QUERIES: dict[str, str] = {
    name: text for name, text in dict(globals()).items() if name.isupper() and "FROM records" in str(text)
}
"""Every SQL query of the guide (Parts 3, 4 and 7), by name."""

T0 = 1_700_000_000_000_000_000  # 2023-11-14 22:13:20 UTC, in nanoseconds
T0_DATETIME = datetime.datetime(2023, 11, 14, 22, 13, 20)
PERMISSION_MESSAGE = "[Errno 13] Permission denied: '/workspace/readonly/answer.md'"


def at(seconds: float) -> datetime.datetime:
    return T0_DATETIME + datetime.timedelta(seconds=seconds)


class MassGenRun:
    """Writes one MassGen-shaped coordination session with fixed timestamps (in seconds from T0)."""

    def __init__(self, provider: TracerProvider, base_ns: int = T0) -> None:
        self.base_ns = base_ns
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
            start_time=self.base_ns + round(start * 1e9),
            attributes=attributes,
            links=links,
        )
        self._spans[key] = span
        self.ids[key] = f"{span.get_span_context().span_id:016x}"
        if end is not None:
            span.end(end_time=self.base_ns + round(end * 1e9))
        return span

    def log(self, key: str, name: str, at_s: float, parent: str, msg: str, **attributes: Any) -> None:
        self.span(
            key, name, at_s, at_s, parent, **{"logfire.span_type": "log", "logfire.msg": msg}, **attributes
        )

    def end(self, key: str, at_s: float) -> None:
        self._spans[key].end(end_time=self.base_ns + round(at_s * 1e9))

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
            timestamp=self.base_ns + round((o + 24.7) * 1e9),
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
        session.end(end_time=self.base_ns + round((o + 100.0) * 1e9))
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
    """A store holding two MassGen-shaped sessions: the one at T0 and an older one an hour before."""

    def __init__(self, path: Path, trace_id: str, old_trace_id: str, ids: dict[str, str]) -> None:
        self.path, self.trace_id, self.old_trace_id, self.ids = path, trace_id, old_trace_id, ids

    def sql(self, text: str) -> str:
        """`text` with the guide's trace-id placeholders filled with the newer session's id."""
        for placeholder in ("[YOUR_TRACE_ID]", "[TRACE_ID]", "[trace_id]", "[trace_id_from_step_2]"):
            text = text.replace(placeholder, self.trace_id)
        return text

    def run(self, text: str) -> list[dict[str, Any]]:
        return query(self.sql(text), self.path)


def write_store(path: Path, base_ns: int = T0) -> Store:
    """Write the two sessions (the newer one starting at `base_ns`) into the store at `path`."""
    provider = TracerProvider(resource=Resource.create({"service.name": "massgen"}))
    provider.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(path)))
    old = MassGenRun(provider, base_ns)
    old_trace_id = old.write(offset=-3600.0)
    run = MassGenRun(provider, base_ns)
    trace_id = run.write()
    provider.shutdown()
    return Store(path, trace_id, old_trace_id, run.ids)
