"""Every Logfire SQL query of the MassGen log-analyzer guide runs unchanged on the local store.

A MassGen-shaped run is written through the real OpenTelemetry SDK into a store, with fixed
timestamps so that durations are exact; each query below is copied verbatim from the guide (Parts
3, 4 and 7) with only its trace-id placeholder filled in, and must return what that run implies.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from seed_run import (
    AGENT_ROUND_PERFORMANCE,
    CHECK_COORDINATION_FLOW,
    COORDINATION_EVENTS_TIMELINE,
    FIND_ALL_EXCEPTIONS,
    FIND_ERRORS,
    FIND_RECENT_SESSIONS,
    FULL_TRACE_NESTED,
    LLM_CALL_PERFORMANCE,
    PERMISSION_MESSAGE,
    PHASE_DURATION_BREAKDOWN,
    SEED_QUERIES,
    STEP2_FIND_THE_TRACE,
    STEP3_HIERARCHY,
    STEP4_AGENT_COMPARISON,
    STEP4_SLOW_TOOL_CALLS,
    T0_DATETIME,
    TOKEN_USAGE_BY_AGENT,
    TOOL_CALL_ANALYSIS,
    VIEW_TRACE_HIERARCHY,
    Store,
    at,
    write_store,
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    yield write_store(tmp_path_factory.mktemp("massgen-store"))


def test_every_query_of_the_guide_is_tested() -> None:
    """The guide's 16 queries (8 in Part 3, 4 in Part 4, 4 in Part 7) are all in `SEED_QUERIES`."""
    assert len(SEED_QUERIES) == 16


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
