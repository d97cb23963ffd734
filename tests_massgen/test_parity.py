"""mastrace's store against MassGen's own log folder and the loopback server's ledger, for real
MassGen 0.1.97 runs under `mastrace run`: tokens and cost per agent, LLM calls, rounds, answers,
votes, winner, errors, retries, one trace per turn. Where MassGen's files are wrong (stale
`status.json`, cumulative turn-2 files, a round lost when a vote is ignored, `tool.success` for a
failed MCP call), mastrace's figure is checked against the ledger instead (see README, "Tracing
MassGen"). Run with `-s` to see the side-by-side tables."""

from __future__ import annotations

import re

import pytest

from . import parity
from .conftest import FAILING_MODELS, MODELS, TWO_QUESTIONS, Run, analyze

CENT = 0.005
# MassGen rounds each agent's cost to 6 decimals in its files.
MASSGEN_ROUNDING = 1e-6


def _sources(run: Run, models: dict[str, str]) -> tuple[list[parity.Figures], ...]:
    rows = parity.spans(run.store)
    sources = (parity.ledger_figures(run, models), parity.massgen_figures(run), parity.mastrace_figures(rows))
    print(parity.table(run.folder.name, dict(zip(("ledger", "MassGen", "mastrace"), sources, strict=True))))
    return sources


def _votes_massgen_printed(stdout: str) -> int:
    """The votes MassGen's automation summary lists (its final tally)."""
    return len(re.findall(r"^\s+\[VOTE\] ", stdout, flags=re.MULTILINE))


def _assert_agreement(ledger: parity.Figures, massgen: parity.Figures, ours: parity.Figures) -> None:
    """The figures every finished turn must agree on (MassGen's files where they are right)."""
    for key in ("input tokens", "output tokens", "answers"):
        assert ours.values[key] == ledger.values[key] == massgen.values[key], key
    assert ours.by_agent.keys() >= ledger.by_agent.keys()
    for agent, served in ledger.by_agent.items():
        assert (ours.by_agent[agent]["input"], ours.by_agent[agent]["output"]) == (
            served["input"],
            served["output"],
        )
    # Cost: MassGen's own per-call prices, summed the same way, to the cent (to its rounding, in fact).
    assert ours.values["cost ($)"] == pytest.approx(massgen.values["cost ($)"], abs=MASSGEN_ROUNDING * 3)
    for agent, theirs in massgen.by_agent.items():
        assert ours.by_agent[agent]["cost"] == pytest.approx(theirs["cost"], abs=MASSGEN_ROUNDING), agent
    # Every request the server saw is an LLM call or a retry of one; MassGen counts a retried call once.
    assert ours.values["LLM calls"] == ledger.values["LLM calls"]
    assert massgen.values["LLM calls"] == ledger.values["LLM calls"] - ours.values["HTTP retries"]
    assert ours.values["HTTP errors"] == ledger.values["HTTP errors"]
    # MassGen's round history loses the round whose vote it ignored; mastrace keeps it (discarded).
    ignored = massgen.values["votes discarded"]
    assert ours.values["rounds"] == massgen.values["rounds"] + ignored
    assert ours.values["votes discarded"] >= ignored
    assert ours.values["winner"] == massgen.values["winner"]
    assert ours.values["enforcement retries"] == massgen.values["enforcement retries"]
    assert ours.values["turn failed"] is False


def test_three_agents_with_mcp_and_a_late_answer(massgen_run: Run) -> None:
    """Tokens, cost, calls, rounds, answers, votes (MassGen's final tally) and winner all agree."""
    assert massgen_run.returncode == 0, massgen_run.stderr[-3000:]
    (ledger,), (massgen,), (ours,) = _sources(massgen_run, MODELS)
    _assert_agreement(ledger, massgen, ours)
    assert ours.values["votes counted"] == _votes_massgen_printed(massgen_run.stdout)
    assert f"WINNER: {ours.values['winner']}" in massgen_run.stdout
    assert ours.values["cost unknown for"] == "-" and ours.values["cost ($)"] > 0


def test_the_failing_path_http_500_unknown_vote_mcp_error_and_an_unpriced_model(failing_run: Run) -> None:
    """The 500 is one retry event, the bad voter a failed agent with enforcement events, the MCP
    error an error span (MassGen says success), and the unpriced model an unknown cost, not $0."""
    assert failing_run.returncode == 0, failing_run.stderr[-3000:]
    (ledger,), (massgen,), (ours,) = _sources(failing_run, FAILING_MODELS)
    _assert_agreement(ledger, massgen, ours)
    assert ours.values["HTTP retries"] == ledger.values["HTTP errors"] == 1
    assert ours.values["MCP errors"] == 1 and massgen.values["MCP errors"] == 0  # MassGen: "success"
    assert ours.values["agent errors"] >= 1 and ours.values["enforcement retries"] >= 2
    assert ours.values["cost unknown for"] == "house-model-c"
    rows = parity.spans(failing_run.store)
    (mcp,) = [r for r in rows if r["span_name"] == "mcp.calc.multiply"]
    assert mcp["status"] == "ERROR" and "negative numbers" in str(mcp["status_message"])
    assert mcp["attributes"]["tool.success"] is False
    voter = [r for r in rows if r["span_name"].startswith("agent.agent_c.") and r["is_exception"]]
    assert voter and voter[0]["exception_type"] == "massgen.AgentError"
    events = [e for e in voter[0]["events"] if e["name"] == "massgen.enforcement"]
    assert {e["attributes"]["massgen.enforcement.reason"] for e in events} == {"invalid_vote_id"}
    assert all(e["attributes"]["massgen.enforcement.max_attempts"] == 3 for e in events)


def test_a_turn_where_every_agent_fails_is_a_failed_session(failed_turn_run: Run) -> None:
    """MassGen's own failure ("no successful agents") ends the session in error, as the root of its
    trace; every agent failed (the ledger says so, MassGen's stale status.json names only some)."""
    (ledger,), (massgen,), (ours,) = _sources(failed_turn_run, MODELS)
    assert ours.values["turn failed"] is True and massgen.values["turn failed"] is True
    assert ours.values["agent errors"] == 3 >= massgen.values["agent errors"]
    assert ours.values["HTTP errors"] == ledger.values["HTTP errors"] == ledger.values["LLM calls"]
    assert ours.values["answers"] == ledger.values["answers"] == 0
    rows = parity.spans(failed_turn_run.store)
    assert len({r["trace_id"] for r in rows}) == 1
    (root,) = [r for r in rows if r["parent_span_id"] is None]
    assert root["span_name"] == "coordination.session"
    assert "no successful agents" in root["attributes"]["massgen.failure_reason"]
    # The seed's errors query finds the agent failures MassGen only reports as values.
    failures = parity.query(
        failed_turn_run.store,
        "SELECT DISTINCT attributes->>'massgen.agent_id' AS agent FROM records "
        "WHERE is_exception = true AND span_name LIKE 'agent.%' ORDER BY agent",
    )
    assert [f["agent"] for f in failures] == ["agent_a", "agent_b", "agent_c"]
    report = analyze(failed_turn_run.store, failed_turn_run.folder / "report.md")
    assert root["trace_id"] in report and "took 0.000 s" not in report


def test_two_turns_on_standard_input_are_two_traces_with_each_turns_own_figures(two_turns_run: Run) -> None:
    """Each turn is one trace with its own tokens and cost; MassGen's turn-2 files are cumulative,
    so turn 2 is checked against the ledger and against MassGen's difference of the two turns."""
    assert two_turns_run.returncode == 0, two_turns_run.stderr[-3000:]
    ledgers, massgens, ours = _sources(two_turns_run, MODELS)
    assert len(ledgers) == len(massgens) == len(ours) == len(TWO_QUESTIONS)
    _assert_agreement(ledgers[0], massgens[0], ours[0])
    first, second = ours
    for key in ("input tokens", "output tokens", "answers", "LLM calls"):
        assert second.values[key] == ledgers[1].values[key], key
    for key in ("input tokens", "output tokens"):  # MassGen's turn 2: both turns added up
        assert massgens[1].values[key] == ledgers[0].values[key] + ledgers[1].values[key]
    expected = massgens[1].values["cost ($)"] - massgens[0].values["cost ($)"]
    assert second.values["cost ($)"] == pytest.approx(expected, abs=MASSGEN_ROUNDING * 3)
    for agent, served in ledgers[1].by_agent.items():
        assert second.by_agent[agent]["input"] == served["input"]
    rows = parity.spans(two_turns_run.store)
    sessions = [r for r in rows if r["span_name"] == "coordination.session"]
    assert [s["attributes"]["massgen.task"] for s in sessions] == list(TWO_QUESTIONS)
    assert len({r["trace_id"] for r in rows}) == 2 and all(s["parent_span_id"] is None for s in sessions)
    assert abs(first.values["cost ($)"] - massgens[0].values["cost ($)"]) < CENT
