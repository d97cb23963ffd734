"""An unmodified MassGen 0.1.97 run, started as `mastrace run -- massgen ...`, against a loopback
OpenAI-compatible server: the tree's parentage, the tokens against what the server handed out, the
config snapshot on the session, the records' agent ids, and `mastrace analyze`'s numbers."""

from __future__ import annotations

import json
import re

from .conftest import MODELS, Run, analyze, query

ROUND = re.compile(r"agent\.(?P<agent>[^.]+)\.(?:round_\d+|presentation)$")


def spans(run: Run) -> list[dict[str, object]]:
    rows = query(
        run.store,
        "SELECT trace_id, span_id, parent_span_id, span_name, attributes::VARCHAR AS attributes "
        "FROM records ORDER BY start_timestamp",
    )
    for row in rows:
        row["attributes"] = json.loads(str(row["attributes"]))
    return rows


def test_the_run_succeeds_and_lands_as_one_trace(massgen_run: Run) -> None:
    assert massgen_run.returncode == 0, massgen_run.stderr[-3000:]
    assert "WINNER: agent_a" in massgen_run.stdout
    rows = spans(massgen_run)
    traces = {r["trace_id"] for r in rows}
    roots = [r for r in rows if r["parent_span_id"] is None]
    assert len(traces) == 1, f"stray traces: {[r['span_name'] for r in roots]}"
    assert [r["span_name"] for r in roots] == ["coordination.session"]
    # Nothing from the SDK complains about spans used after they ended, or contexts it could not detach.
    assert "ended span" not in massgen_run.stderr
    assert "Failed to detach context" not in massgen_run.stderr


def test_every_llm_call_is_under_its_own_agents_round(massgen_run: Run) -> None:
    rows = spans(massgen_run)
    by_id = {r["span_id"]: r for r in rows}
    llm = [r for r in rows if str(r["span_name"]).startswith("llm.")]
    assert len(llm) == len(massgen_run.ledger.calls) >= 5
    placed = 0
    for span in llm:
        parent = by_id.get(span["parent_span_id"])
        match = ROUND.match(str(parent["span_name"])) if parent else None
        if match and match.group("agent") == span["attributes"]["massgen.agent_id"]:
            placed += 1
    assert placed == len(llm), f"{placed} of {len(llm)} LLM spans under their round"
    assert all(s["span_name"] == "llm.chatcompletion.stream" for s in llm)
    assert all(s["attributes"].get("mastrace.stream.completed") is True for s in llm)


def test_round_usage_is_each_rounds_own_and_sums_to_what_the_server_handed_out(massgen_run: Run) -> None:
    ledger = massgen_run.ledger
    rows = spans(massgen_run)
    rounds = [r for r in rows if ROUND.match(str(r["span_name"]))]
    llm = [r for r in rows if str(r["span_name"]).startswith("llm.")]
    assert sum(int(r["attributes"].get("massgen.usage.input", 0)) for r in rounds) == ledger.input_tokens
    assert sum(int(r["attributes"].get("massgen.usage.output", 0)) for r in rounds) == ledger.output_tokens
    assert sum(int(r["attributes"]["gen_ai.usage.input_tokens"]) for r in llm) == ledger.input_tokens
    # Each round carries exactly what its own calls used.
    children: dict[object, int] = {}
    for span in llm:
        children[span["parent_span_id"]] = children.get(span["parent_span_id"], 0) + int(
            span["attributes"]["gen_ai.usage.input_tokens"]
        )
    for rnd in rounds:
        assert int(rnd["attributes"].get("massgen.usage.input", 0)) == children.get(rnd["span_id"], 0)
    (session,) = [r for r in rows if r["span_name"] == "coordination.session"]
    assert session["attributes"]["massgen.usage.input"] == ledger.input_tokens


def test_the_session_carries_the_resolved_config_and_its_hash(massgen_run: Run) -> None:
    (session,) = [r for r in spans(massgen_run) if r["span_name"] == "coordination.session"]
    attrs = session["attributes"]
    config = attrs["mastrace.config"]
    config = json.loads(config) if isinstance(config, str) else config
    agents = config["massgen"]["config"]["agents"]
    assert [a["id"] for a in agents] == ["agent_a", "agent_b", "agent_c"]
    assert [a["backend"]["model"] for a in agents] == list(MODELS.values())
    # The YAML as loaded: no ids MassGen adds while it runs.
    assert "instance_id" not in agents[0]["backend"]
    assert re.fullmatch(r"[0-9a-f]{16}", str(attrs["mastrace.config.hash"]))
    rounds = [r for r in spans(massgen_run) if ROUND.match(str(r["span_name"]))]
    assert {r["attributes"].get("mastrace.config.hash") for r in rounds} == {attrs["mastrace.config.hash"]}


def test_answer_and_vote_records_name_their_agents(massgen_run: Run) -> None:
    rows = spans(massgen_run)
    answers = [r for r in rows if str(r["span_name"]).startswith("Agent answer:")]
    votes = [
        r
        for r in rows
        if str(r["span_name"]).startswith("Agent vote:") and not r["attributes"].get("massgen.vote.discarded")
    ]
    assert {a["attributes"]["massgen.agent_id"] for a in answers} == {"agent_a", "agent_b", "agent_c"}
    assert {a["attributes"]["massgen.answer_label"] for a in answers} == {"agent1.1", "agent2.1", "agent3.1"}
    owner = {a["attributes"]["massgen.answer_label"]: a["attributes"]["massgen.agent_id"] for a in answers}
    assert votes  # how many depends on timing: a new answer restarts the agents that voted
    for vote in votes:
        assert vote["attributes"]["massgen.agent_id"] in ("agent_a", "agent_b", "agent_c")
        label = vote["attributes"]["massgen.voted_for_label"]
        assert vote["attributes"]["massgen.voted_for"] == owner[label]


def test_mcp_and_tool_spans_are_under_the_round_that_called_them(massgen_run: Run) -> None:
    rows = spans(massgen_run)
    by_id = {r["span_id"]: r for r in rows}
    (mcp,) = [r for r in rows if r["span_name"] == "mcp.calc.multiply"]
    tools = [r for r in rows if str(r["span_name"]).startswith(("mcp_tool.", "Tool execution:"))]
    assert tools
    for span in [mcp, *tools]:
        node = by_id.get(span["parent_span_id"])
        while node is not None and not ROUND.match(str(node["span_name"])):
            node = by_id.get(node["parent_span_id"])
        assert node is not None and node["span_name"].startswith("agent.agent_a.round_"), span["span_name"]


def test_analyze_reports_the_tokens_the_calls_used(massgen_run: Run, tmp_path) -> None:  # type: ignore[no-untyped-def]
    text = analyze(massgen_run.store, tmp_path / "report.md")
    ledger = massgen_run.ledger
    assert f"| Input / Output Tokens | {ledger.input_tokens:,} / {ledger.output_tokens:,} |" in text
    assert "| Winner | agent_" in text
    rows = spans(massgen_run)
    answers = sum(1 for r in rows if str(r["span_name"]).startswith("Agent answer:"))
    votes = [r for r in rows if str(r["span_name"]).startswith("Agent vote:")]
    counted = sum(1 for v in votes if not v["attributes"].get("massgen.vote.discarded"))
    assert f"| Total Answers | {answers} |" in text and f"| Total Votes | {counted} |" in text
    assert "| Total Cost | $0." in text  # priced with MassGen's own prices, never $0


def test_the_service_is_named_after_the_program(massgen_run: Run) -> None:
    """`mastrace run -- massgen ...` records `service.name` = `massgen`, as the Python route does."""
    rows = query(massgen_run.store, "SELECT DISTINCT service_name FROM records")
    assert rows == [{"service_name": "massgen"}]
