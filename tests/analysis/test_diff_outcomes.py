"""`diff`'s "what happened": winner, votes, answers, per-round outcomes and the aligned span trees
of two runs with different winners (tests/outcome_runs.py)."""

from __future__ import annotations

from pathlib import Path

from mastrace.analysis import TraceStore
from mastrace.analysis._diff_outcomes import OutcomeDiff, read_outcome_diff, render_outcome_diff
from outcome_runs import write_two_runs


def outcome_diff(tmp_path: Path) -> OutcomeDiff:
    a, b = write_two_runs(tmp_path / "store")
    with TraceStore(tmp_path / "store") as traces:
        return read_outcome_diff(traces, a, b)


def test_winner_votes_answers_and_rounds(tmp_path: Path) -> None:
    d = outcome_diff(tmp_path)
    assert (d.winner_a, d.winner_b) == ("agent_a", "agent_b") and d.to_dict()["winner_changed"]
    assert d.votes_a == {"agent_b → agent_a": 1, "agent_c → agent_a": 1}
    assert d.votes_b == {"agent_a → agent_b": 1, "agent_c → agent_b": 1}
    assert (d.discarded_a, d.discarded_b) == (0, 1)
    assert d.answers_a == d.answers_b == {"agent_a": 1, "agent_b": 1, "agent_c": 1}
    rounds = [(r.agent, r.round, r.outcome_a, r.voted_for_a, r.outcome_b, r.voted_for_b) for r in d.rounds]
    assert rounds == [
        ("agent_a", "0", "answer", None, "answer", None),
        ("agent_a", "1", None, None, "vote", "agent_b"),
        ("agent_b", "0", "answer", None, "answer", None),
        ("agent_b", "1", "vote", "agent_a", None, None),
        ("agent_c", "0", "answer", None, "answer", None),
        ("agent_c", "1", "vote", "agent_a", "vote", "agent_b"),
    ]
    assert [r.changed for r in d.rounds] == [False, True, False, True, False, True]


def test_the_span_trees_aligned(tmp_path: Path) -> None:
    d = outcome_diff(tmp_path)
    session = "coordination.session / "
    changes = {(c.change, c.path.removeprefix(session)) for c in d.tree}
    assert changes == {
        ("added", "agent.agent_b.round_0 / Tool execution: calculator"),
        ("removed", "agent.agent_c.round_0 / mcp.search.query"),
        ("slower", "agent.agent_a.round_0 / llm.openai.stream"),
        ("costlier", "agent.agent_a.round_0"),
        # agent_a votes only in B, agent_b only in A; agent_c's voting round is in both
        ("added", "agent.agent_a.round_1"),
        ("removed", "agent.agent_b.round_1"),
        # votes and winners for other agents have other names: other spans
        ("removed", "Agent vote: agent_b -> agent_a.1"),
        ("removed", "Agent vote: agent_c -> agent_a.1"),
        ("removed", "Winner selected: agent_a.1"),
        ("added", "Agent vote: agent_b -> agent_a"),
        ("added", "Agent vote: agent_a -> agent_b.1"),
        ("added", "Agent vote: agent_c -> agent_b.1"),
        ("added", "Winner selected: agent_b.1"),
    }
    # Whole subtrees first (largest first), then the changes of matched spans.
    kinds = [c.change for c in d.tree]
    assert kinds[0] == "removed" and d.tree[0].spans == 2  # the MCP call and the request in it
    assert sorted(kinds[-2:]) == ["costlier", "slower"]
    removed = next(c for c in d.tree if c.path.endswith("mcp.search.query"))
    assert removed.spans == 2  # the MCP call and the request inside it
    slower = next(c for c in d.tree if c.change == "slower")
    assert (slower.duration_a, slower.duration_b) == (1.0, 2.0)
    costlier = next(c for c in d.tree if c.change == "costlier")
    assert (costlier.cost_a, costlier.cost_b) == (0.01, 0.03)
    # Spans in both trees: the session, 3 answering rounds, the LLM call, 3 answers, agent_c's
    # voting round = 9; two of them changed.
    assert d.matched == 9 and d.unchanged == 7


def test_rendered_text(tmp_path: Path) -> None:
    text = render_outcome_diff(outcome_diff(tmp_path))
    assert "  winner: agent_a → agent_b  (changed)" in text
    assert "  discarded votes: 0 → 1" in text
    assert "    agent_c round 1: vote agent_a → vote agent_b" in text
    assert "    agent_a round 1: (no round) → vote agent_b" in text
    assert (
        "  + coordination.session / agent.agent_b.round_0 / Tool execution: calculator  (1 span(s))" in text
    )
    assert (
        "  ~ coordination.session / agent.agent_a.round_0 / llm.openai.stream  slower: 1.000s → 2.000s"
        in text
    )
