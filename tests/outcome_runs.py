"""Two runs of one task with different outcomes, for the tests of `diff`'s "what happened" part.

Run A: agent_a wins (agent_b and agent_c vote for it). Run B: agent_b wins (agent_a and agent_c
vote for it), one of agent_b's votes is discarded, agent_a's LLM call takes twice as long and its
round costs three times as much, agent_b's round calls an extra tool and agent_c's round no longer
calls MCP. Times are exact (milliseconds from T0), through the real SDK into a real store.
"""

from __future__ import annotations

from pathlib import Path

from analysis.conftest import TraceWriter


def _run(w: TraceWriter, winner: str, votes: dict[str, str], llm_ms: int, cost_a: float, b: bool) -> str:
    w.span("session", "coordination.session", 0, 10_000)
    answer_a = {"massgen.agent_id": "agent_a", "massgen.outcome": "answer", "massgen.usage.cost": cost_a}
    w.span("a0", "agent.agent_a.round_0", 100, 3_000, "session", **answer_a)
    w.span("a0_llm", "llm.openai.stream", 100, 100 + llm_ms, "a0")
    w.span("b0", "agent.agent_b.round_0", 100, 3_000, "session",
           **{"massgen.agent_id": "agent_b", "massgen.outcome": "answer"})  # fmt: skip
    if b:
        w.span("b0_tool", "Tool execution: calculator", 500, 600, "b0")
    w.span("c0", "agent.agent_c.round_0", 100, 3_000, "session",
           **{"massgen.agent_id": "agent_c", "massgen.outcome": "answer"})  # fmt: skip
    if not b:
        w.span("c0_mcp", "mcp.search.query", 200, 400, "c0")
        w.span("c0_mcp_inner", "http.request", 210, 390, "c0_mcp")
    for agent in ("agent_a", "agent_b", "agent_c"):
        w.log(f"ans_{agent}", f"Agent answer: {agent}.1", 3_000, "session", **{"massgen.agent_id": agent})
    if b:
        ignored = {
            "massgen.agent_id": "agent_b",
            "massgen.voted_for": "agent_a",
            "massgen.vote.discarded": True,
        }
        w.log("ignored", "Agent vote: agent_b -> agent_a", 3_100, "session", **ignored)
    for i, (voter, target) in enumerate(sorted(votes.items())):
        voting = {"massgen.agent_id": voter, "massgen.outcome": "vote", "massgen.voted_for": target}
        w.span(f"vote_round_{voter}", f"agent.{voter}.round_1", 3_200, 4_000, "session", **voting)
        w.log(f"vote_{voter}", f"Agent vote: {voter} -> {target}.1", 4_000 + i, "session",
              **{"massgen.agent_id": voter, "massgen.voted_for": target})  # fmt: skip
    w.log("winner", f"Winner selected: {winner}.1", 4_500, "session", **{"massgen.winner": winner})
    return w.trace_id()


def write_two_runs(store: Path) -> tuple[str, str]:
    """Write runs A and B into `store`; returns their trace ids."""
    w = TraceWriter(store)
    try:
        a = _run(w, "agent_a", {"agent_b": "agent_a", "agent_c": "agent_a"}, 1_000, 0.01, False)
        w.offset_ms = 60_000
        b = _run(w, "agent_b", {"agent_a": "agent_b", "agent_c": "agent_b"}, 2_000, 0.03, True)
    finally:
        w.close()
    return a, b
