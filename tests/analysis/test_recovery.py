"""The report's "Retries, Restarts & Timeouts" section: HTTP retries on LLM calls counted for the
round's agent, enforcement retries on rounds, restart records and timeout events per agent."""

from __future__ import annotations

from pathlib import Path

from mastrace.analysis import TraceStore, build_report, render_markdown

from .conftest import TraceWriter, agent


def test_retries_restarts_and_timeouts_are_counted_per_agent(writer: TraceWriter, tmp_path: Path) -> None:
    writer.span("session", "coordination.session", 0, 10_000, **{"massgen.task": "t"})
    writer.span("a0", "agent.agent_a.round_0", 100, 2_000, "session", **agent("agent_a", 0, "initial_answer"))
    writer.span("a0_llm", "llm.openai.stream", 200, 1_000, "a0", events=["mastrace.http.retry"] * 2)
    writer.span("a0_llm2", "llm.openai.stream", 1_100, 1_900, "a0", events=["mastrace.http.retry"])
    writer.span(
        "b0",
        "agent.agent_b.round_0",
        100,
        3_000,
        "session",
        events=["massgen.enforcement", "massgen.enforcement", "other"],
        **agent("agent_b", 0, "voting"),
    )
    writer.log(
        "r1", "Agent restart: agent_b (reason: new_answer_available)", 2_100, "session", agent_id="agent_b"
    )
    writer.log(
        "r2", "Agent restart: agent_b (reason: new_answer_available)", 2_200, "session", agent_id="agent_b"
    )
    writer.log(
        "t1",
        "Coordination event: agent_timeout",
        2_900,
        "session",
        **{"massgen.agent_id": "agent_b", "massgen.event_type": "agent_timeout"},
    )
    trace_id = writer.trace_id()
    with TraceStore(tmp_path / "store") as store:
        report = build_report(store, trace_id)
    got = {
        r.agent: (r.http_retries, r.enforcement_retries, r.restarts, r.timeouts, r.tool_retries)
        for r in report.recovery
    }
    assert got == {"agent_a": (3, 0, 0, 0, 0), "agent_b": (0, 2, 2, 1, 0)}
    text = render_markdown(report)
    assert "## Retries, Restarts & Timeouts" in text
    assert "| **Total** | 3 | 2 | 2 | 1 | 0 |" in text


def test_a_run_without_any_says_so(writer: TraceWriter, tmp_path: Path) -> None:
    writer.span("session", "coordination.session", 0, 1_000, **{"massgen.task": "t"})
    writer.span("a0", "agent.agent_a.round_0", 100, 900, "session", **agent("agent_a", 0, "initial_answer"))
    with TraceStore(tmp_path / "store") as store:
        text = render_markdown(build_report(store, writer.trace_id()))
    assert "No HTTP retries, enforcement retries, restarts, timeouts or tool retries were recorded." in text


def test_a_retried_tool_call_is_one_call_one_error_one_retry(writer: TraceWriter, tmp_path: Path) -> None:
    """Two failed `mcp.*` spans, the second marked as the framework's retry of the first (attempt 2):
    the tool table says 1 call, 1 error, 1 retry, and so do the round and the recovery section."""
    writer.span("session", "coordination.session", 0, 10_000, **{"massgen.task": "t"})
    writer.span("a0", "agent.agent_a.round_0", 100, 5_000, "session", **agent("agent_a", 0, "initial_answer"))
    writer.span("tool", "mcp_tool.mcp__calc__multiply", 200, 2_000, "a0")
    crash = ConnectionError("Connection closed")
    writer.span("m1", "mcp.calc.multiply", 300, 900, "tool", error=crash, **{"mastrace.tool.attempt": 1})
    writer.span("m2", "mcp.calc.multiply", 1_000, 1_900, "tool", error=crash, **{"mastrace.tool.attempt": 2})
    writer.span("m3", "mcp.calc.multiply", 2_100, 2_500, "a0", **{"mastrace.tool.attempt": 1})
    with TraceStore(tmp_path / "store") as store:
        report = build_report(store, writer.trace_id())
    (tool,) = report.tools
    assert (tool.name, tool.calls, tool.errors, tool.retries) == ("mcp.calc.multiply", 2, 1, 1)
    (round_,) = report.rounds
    assert (round_.tool_spans, round_.tool_errors) == (2, 1)
    assert [(r.agent, r.tool_retries) for r in report.recovery] == [("agent_a", 1)]
    text = render_markdown(report)
    assert "| mcp.calc.multiply | 2 | 1 | 1 |" in text
