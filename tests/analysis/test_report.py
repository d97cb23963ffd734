"""`build_report` figures match hand computations on the synthetic trace (see conftest.EXPECTED)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mastrace.analysis import Report, TraceStore, build_report
from mastrace.exceptions import StoreError

from .conftest import EXPECTED, TraceWriter

APPROX = pytest.approx


def rounded(table: dict[object, tuple[float, ...]]) -> dict[object, tuple[float, ...]]:
    """Floats rounded to the microsecond, so exact figures compare with ==."""
    return {key: tuple(round(v, 6) for v in values) for key, values in table.items()}


@pytest.fixture
def report(synthetic: tuple[Path, str, TraceWriter]) -> Report:
    path, trace_id, _ = synthetic
    with TraceStore(path) as store:
        return build_report(store, trace_id)


def test_overview_counts_agents_answers_votes_and_winner(report: Report) -> None:
    """The overview lists the session's agents, answers, votes and the selected winner."""
    o = report.overview
    assert (o.agents, o.answers, o.votes, o.winner, o.final_answer) == (
        ["agent_a", "agent_b"],
        2,
        2,
        "agent_b",
        True,
    )


def test_overview_duration_is_the_session_span(report: Report) -> None:
    """The run duration is the root session span's duration."""
    assert report.overview.duration == APPROX(EXPECTED["duration"])
    assert report.overview.root_name == "coordination.session"


def test_overview_totals_sum_round_usage(report: Report) -> None:
    """Token and cost totals are sums of the agent round spans' own usage."""
    o = report.overview
    assert (o.input_tokens, o.output_tokens) == (EXPECTED["input"], EXPECTED["output"])
    assert o.total_cost == APPROX(EXPECTED["cost"])


def test_phase_breakdown(report: Report) -> None:
    """Each phase has its count, average, maximum and total, and shares add up to 100%."""
    got = {p.phase: (p.count, p.avg, p.max, p.total) for p in report.phases}
    assert rounded(got) == EXPECTED["phases"]
    assert [p.phase for p in report.phases] == ["initial_answer", "voting", "presentation"]
    assert report.phases[0].percent == APPROX(100 * 8 / 14)


def test_tool_wall_time_is_the_union_of_overlapping_intervals(report: Report) -> None:
    """Nested, overlapping, grandchild and overhanging tool spans count once, clipped to the round."""
    got = {
        (r.agent, r.segment): (r.duration, r.tool_wall, r.non_tool, r.tool_spans, r.tool_errors)
        for r in report.rounds
    }
    assert rounded(got) == EXPECTED["rounds"]


def test_rounds_are_sorted_by_agent_then_start(report: Report) -> None:
    """The per-round table is ordered by agent, then by start time."""
    assert [(r.agent, r.round, r.round_type) for r in report.rounds] == [
        ("agent_a", 0, "initial_answer"),
        ("agent_a", 1, "voting"),
        ("agent_b", 0, "initial_answer"),
        ("agent_b", 1, "voting"),
        ("agent_b", 2, "presentation"),
    ]


def test_usage_by_agent_with_cache_hit_rate(report: Report) -> None:
    """Per-agent usage sums rounds; cache hit rate is cached over input tokens."""
    got = {u.agent: (u.spans, u.input, u.output, u.cached, u.reasoning) for u in report.usage}
    assert got == {"agent_a": (2, 1300, 250, 700, 50), "agent_b": (3, 1000, 530, 0, 0)}
    rates = {u.agent: u.cache_hit_rate for u in report.usage}
    assert rates == APPROX({"agent_a": 100 * 700 / 1300, "agent_b": 0.0})
    assert report.usage_source == "round spans"


def test_tool_table_counts_calls_and_errors(report: Report) -> None:
    """The tool table groups tool calls by name with call and error counts."""
    tools = {t.name: (t.calls, t.errors, t.total, t.max) for t in report.tools}
    assert tools["mcp.fs.write"] == APPROX((2, 1, 2.0, 1.0))
    # `Tool execution: t1` holds `mcp.fs.read`: one call, listed as the MCP call; t2 and t3 hold none.
    assert "Tool execution: t1" not in tools and tools["mcp.fs.read"][0] == 1
    assert tools["Tool execution: t2"][0] == tools["Tool execution: t3"][0] == 1
    assert len(tools) == 8


def test_errors_list_the_failed_tool_call(report: Report) -> None:
    """The errors section names the failed span, its agent and its exception."""
    assert [(e.name, e.agent, e.kind, e.type, e.message) for e in report.errors] == [
        ("mcp.fs.write", "agent_b", "exception", "PermissionError", "read-only mount")
    ]


def test_answers_and_votes_as_submitted(report: Report) -> None:
    """Answers and votes are listed in time order with their agents, targets and reasons."""
    assert [(a.label, a.agent, a.offset) for a in report.answers] == [
        ("agent2.1", "agent_b", 3.2),
        ("agent1.1", "agent_a", 5.1),
    ]
    assert [(v.voter, v.voted_for, v.label, v.reason) for v in report.votes] == [
        ("agent_b", "agent_b", "agent2.1", "shortest name"),
        ("agent_a", "agent_b", "agent2.1", None),
    ]


def test_slowest_operations_skip_rounds_and_root(report: Report) -> None:
    """Slowest operations exclude the session and agent rounds and are sorted by duration."""
    names = [op.name for op in report.slowest]
    assert not any(n.startswith(("agent.", "coordination.")) for n in names)
    durations = [op.duration for op in report.slowest]
    assert durations == sorted(durations, reverse=True)
    assert durations[0] == APPROX(1.0)
    assert report.slowest[0].percent == APPROX(10.0)


def test_config_snapshot_is_decoded(report: Report) -> None:
    """The session's `mastrace.config` JSON string comes back as a dict, with its hash."""
    assert report.config["agents"]["agent_a"]["model"] == "gpt-4o"
    assert report.overview.config_hash == "hash-a"


def test_unknown_trace_raises_store_error(synthetic: tuple[Path, str, TraceWriter]) -> None:
    """Asking for a trace id that is not in the store raises StoreError."""
    path, _, _ = synthetic
    with TraceStore(path) as store, pytest.raises(StoreError, match="no trace"):
        build_report(store, "f" * 32)


def test_llm_usage_is_the_fallback_when_rounds_have_none(writer: TraceWriter, tmp_path: Path) -> None:
    """Without usage on round spans, usage comes from LLM spans, attributed to their round's agent."""
    writer.span("session", "coordination.session", 0, 1000)
    writer.span("r", "agent.agent_z.round_0", 0, 900, "session")
    writer.span(
        "l", "llm.x.stream", 0, 500, "r", **{"gen_ai.usage.input_tokens": 40, "gen_ai.usage.output_tokens": 2}
    )
    with TraceStore(tmp_path / "store") as store:
        report = build_report(store, writer.trace_id())
    assert [(u.agent, u.input, u.output) for u in report.usage] == [("agent_z", 40, 2)]
    assert report.usage_source == "llm spans"


def test_a_failure_passed_up_through_nested_spans_is_listed_once(writer: TraceWriter, tmp_path: Path) -> None:
    """The same exception on a call, its wrapper, its round and the session is one error (the call);
    a parent that failed differently from its child is listed too."""
    boom = RuntimeError("tool crashed")
    writer.span("session", "coordination.session", 0, 1_000, None, error=boom)
    writer.span("r", "agent.a.round_0", 10, 900, "session", error=boom, **{"massgen.agent_id": "a"})
    writer.span("w", "Tool execution: mcp__fs__read", 20, 500, "r", error=boom)
    writer.span("c", "mcp.fs.read", 30, 490, "w", error=boom)
    writer.span("r2", "agent.b.round_0", 10, 900, "session", error=ValueError("gave up"))
    writer.span("c2", "mcp.fs.write", 30, 490, "r2", error=OSError("disk full"))
    with TraceStore(tmp_path / "store") as store:
        report = build_report(store, writer.trace_id())
    errors = [(e.name, e.type, e.message) for e in report.errors]
    assert errors[0] == ("agent.b.round_0", "ValueError", "gave up")  # the earliest start comes first
    assert sorted(errors[1:]) == [
        ("mcp.fs.read", "RuntimeError", "tool crashed"),
        ("mcp.fs.write", "OSError", "disk full"),
    ]
    assert report.totals["errors"] == 3
    assert [(t.name, t.calls, t.errors) for t in report.tools] == [
        ("mcp.fs.read", 1, 1),
        ("mcp.fs.write", 1, 1),
    ]
    (round_a,) = [r for r in report.rounds if r.agent == "a"]
    assert (round_a.tool_spans, round_a.tool_errors) == (1, 1)
    assert [op.name for op in report.slowest].count("mcp.fs.read") == 1
    assert "Tool execution: mcp__fs__read" not in [op.name for op in report.slowest]


def test_massgens_tool_execution_record_and_its_mcp_call_are_one_call(
    writer: TraceWriter, tmp_path: Path
) -> None:
    """MassGen's zero-length `Tool execution: mcp__calc__multiply` beside `mcp_tool.*` > `mcp.calc.multiply`
    in the same round is one call; a record with no MCP span (a custom tool) stays a call."""
    writer.span("session", "coordination.session", 0, 1_000, None)
    writer.span("r", "agent.agent_a.round_0", 10, 900, "session", **{"massgen.agent_id": "agent_a"})
    writer.span("wrap", "mcp_tool.mcp__calc__multiply", 100, 200, "r")
    writer.span("call", "mcp.calc.multiply", 110, 190, "wrap")
    writer.log("rec", "Tool execution: mcp__calc__multiply", 200, "r")
    writer.log("custom", "Tool execution: custom_tool__lookup", 300, "r")
    with TraceStore(tmp_path / "store") as store:
        report = build_report(store, writer.trace_id())
    assert sorted((t.name, t.calls) for t in report.tools) == [
        ("Tool execution: custom_tool__lookup", 1),
        ("mcp.calc.multiply", 1),
    ]
    assert [r.tool_spans for r in report.rounds] == [2]
