"""`mastrace diff` between the two demo runs."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import Runner


def test_diff_shows_the_model_change_and_deltas(mastrace_cli: Runner, demo_store: Path) -> None:
    """The config change sim-large → sim-small is listed, then totals and one row per agent."""
    result = mastrace_cli("diff", "previous", "latest", store=demo_store)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert '  ~ models.main.model: "sim-large" → "sim-small"' in lines
    assert '  ~ agents.agent_a.model: "sim-large" → "sim-small"' in lines
    first_cells = [line.split("│")[0].strip() for line in lines if "│" in line]
    assert first_cells == ["", "total", "agent_a", "agent_b", "agent_c"]


def test_diff_json_has_cost_going_down(mastrace_cli: Runner, demo_store: Path) -> None:
    """In JSON, the cheaper model gives a lower total cost in run B."""
    diff = json.loads(mastrace_cli("diff", "previous", "latest", "--format", "json", store=demo_store).stdout)
    assert diff["hash_a"] != diff["hash_b"]
    assert diff["total"]["cost_b"] < diff["total"]["cost_a"]
    assert {a["agent"] for a in diff["agents"]} == {"agent_a", "agent_b", "agent_c"}


def test_diff_of_a_run_with_itself_is_empty(mastrace_cli: Runner, demo_store: Path) -> None:
    """Comparing a run with itself reports the same hash and no differences."""
    out = mastrace_cli("diff", "latest", "latest", store=demo_store).stdout
    assert "  no differences" in out and "  same hash " in out


def test_diff_shows_the_outcome_winner_votes_and_scores(
    mastrace_cli: Runner, demo_store: Path, tmp_path: Path
) -> None:
    """The outcome of each run: winner, answers and votes from the trace, scores from evaluation events."""
    import shutil
    import subprocess
    import sys

    from mastrace.analysis import TraceStore, build_report

    store = tmp_path / "store"
    shutil.copytree(demo_store, store)
    with TraceStore(str(store)) as ts:
        ids = [ts.resolve("previous"), ts.resolve("latest")]
        reports = [build_report(ts, t) for t in ids]
    judge = (
        "import sys, mastrace\n"
        f"mastrace.configure(local={str(store)!r})\n"
        "mastrace.record_evaluation('correct', score=True, trace_id=sys.argv[1])\n"
        "mastrace.record_evaluation('correct', score=False, trace_id=sys.argv[2])\n"
        "mastrace.record_evaluation('quality', score=0.5, trace_id=sys.argv[2])\n"
    )
    done = subprocess.run([sys.executable, "-c", judge, *ids], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    text = mastrace_cli("diff", ids[0], ids[1], store=store).stdout
    a, b = (r.overview for r in reports)
    assert f"  winner: {a.winner or '-'} → {b.winner or '-'}" in text
    assert f"  answers: {a.answers} → {b.answers}" in text
    assert "  score correct: 1 → 0 (-1)" in text and "  score quality: - → 0.5" in text
    diff = json.loads(mastrace_cli("diff", ids[0], ids[1], "--format", "json", store=store).stdout)
    assert diff["outcome"]["scores_a"] == {"correct": 1.0}
    assert diff["outcome"]["scores_b"] == {"correct": 0.0, "quality": 0.5}
    votes = [sum(1 for v in r.votes if not v.discarded) for r in reports]
    assert [sum(diff["outcome"][k].values()) for k in ("votes_a", "votes_b")] == votes


def test_diff_says_what_happened_differently(mastrace_cli: Runner, tmp_path: Path) -> None:
    """Two runs with different winners: the winner, the votes, the rounds and the span trees."""
    from outcome_runs import write_two_runs

    a, b = write_two_runs(tmp_path / "outcomes")
    result = mastrace_cli("diff", a, b, store=tmp_path / "outcomes")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "  winner: agent_a → agent_b  (changed)" in lines
    assert "  votes A: agent_b → agent_a, agent_c → agent_a" in lines
    assert "  votes B: agent_a → agent_b, agent_c → agent_b" in lines
    assert "    agent_c round 1: vote agent_a → vote agent_b" in lines
    assert "  - coordination.session / agent.agent_c.round_0 / mcp.search.query  (2 span(s))" in lines
    document = json.loads(mastrace_cli("diff", a, b, "--format", "json", store=tmp_path / "outcomes").stdout)
    assert document["outcomes"]["winner_a"] == "agent_a" and document["outcomes"]["winner_b"] == "agent_b"
    assert document["total"]["agent"] == "total"  # today's deltas are still there
