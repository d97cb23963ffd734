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
