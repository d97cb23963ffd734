"""Rounds cut short, on real MassGen 0.1.97 runs under `mastrace run`: an agent MassGen's orchestrator
times out (the loopback server never answers its request, MassGen is given 10 s) and a run interrupted
by SIGINT in the middle of an LLM call. The session, the rounds and `analyze` are checked against
MassGen's own files (`status.json`, `coordination_events.json`). Run with `-s` for the tables."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from mastrace.mcp_server._tools import Tools
from mastrace.serve._ui_pages import report_page

from . import parity
from .conftest import MODELS, Run, analyze, query

CUT_SHORT = ("timeout", "interrupted", "cancelled")


def _sources(run: Run) -> tuple[list[parity.Figures], ...]:
    rows = parity.spans(run.store)
    sources = (parity.ledger_figures(run, MODELS), parity.massgen_figures(run), parity.mastrace_figures(rows))
    print(parity.table(run.folder.name, dict(zip(("ledger", "MassGen", "mastrace"), sources, strict=True))))
    return sources


def _turn_files(run: Run) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    (turn,) = run.massgen_turns()
    status = json.loads((turn / "status.json").read_text())
    events = json.loads((turn / "coordination_events.json").read_text()).get("events", [])
    return status, events


def _spans(run: Run) -> list[dict[str, Any]]:
    rows = query(
        run.store,
        "SELECT span_name, span_id, parent_span_id, attributes::VARCHAR AS attributes, "
        "otel_status_code AS status, otel_status_message AS message, otel_events::VARCHAR AS events, "
        "is_exception, epoch_us(start_timestamp) AS start_us, epoch_us(end_timestamp) AS end_us "
        "FROM records ORDER BY start_timestamp",
    )
    for row in rows:
        row["attributes"] = json.loads(str(row["attributes"]))
        row["events"] = [e["name"] for e in json.loads(str(row["events"]))] if row["events"] else []
    return rows


def _rounds(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if str(r["span_name"]).startswith("agent.")]


def _recovery(report: str) -> dict[str, list[str]]:
    text = report.split("## Retries, Restarts & Timeouts", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split("|") for line in text.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in rows[1:]}


def test_a_timeout_marks_the_session_ends_the_agents_round_and_is_counted(
    timeout_run: Run, tmp_path: Path
) -> None:
    """MassGen's `finish_reason: timeout` and reason are the session's; each `agent_timeout` event
    is a record for its agent; the stalled agent's round ends with outcome `timeout` (not an
    exception), inside the session; `analyze` counts the timeouts MassGen recorded."""
    assert timeout_run.returncode == 0, timeout_run.stderr[-3000:]
    (ledger,), (massgen,), (ours,) = _sources(timeout_run)
    status, events = _turn_files(timeout_run)
    assert status["finish_reason"] == "timeout"
    timed_out = Counter(e["agent_id"] for e in events if e["event_type"] == "agent_timeout")
    assert timed_out["agent_b"] == 1  # its request was never answered
    rows = _spans(timeout_run)
    (session,) = [r for r in rows if r["span_name"] == "coordination.session"]
    assert session["attributes"]["massgen.finish_reason"] == "timeout"
    assert session["attributes"]["massgen.timeout.reason"] == status["finish_reason_details"]
    assert session["status"] == "ERROR" and status["finish_reason_details"] in session["message"]
    records = [r for r in rows if r["span_name"] == "Coordination event: agent_timeout"]
    assert Counter(r["attributes"]["massgen.agent_id"] for r in records) == timed_out
    rounds = _rounds(rows)
    stalled = [r for r in rounds if r["span_name"] == "agent.agent_b.round_0"]
    assert stalled and stalled[-1]["attributes"]["massgen.outcome"] == "timeout"
    assert "massgen.timeout" in stalled[-1]["events"] and stalled[-1]["status"] == "ERROR"
    cut = [r for r in rounds if r["attributes"].get("massgen.outcome") == "timeout"]
    assert {r["attributes"]["massgen.agent_id"] for r in cut} <= set(timed_out)
    assert not any(r["is_exception"] for r in cut)  # the cancellation after the timeout is not an error
    assert all(r["end_us"] <= session["end_us"] for r in rounds)
    assert ours.values["timeouts"] == massgen.values["timeouts"] == sum(timed_out.values())
    assert ours.values["finish reason"] == massgen.values["finish reason"] == "timeout"
    for key in ("input tokens", "output tokens"):
        assert ours.values[key] == ledger.values[key], key
    # `analyze` counts them per agent: in Markdown, in the UI's HTML page, and through `mastrace mcp`.
    markdown = analyze(timeout_run.store, tmp_path / "report.md")
    for text in (markdown, Tools(timeout_run.store).analyze("latest")):
        table = {k: v for k, v in _recovery(text).items() if k != "**Total**"}
        assert {k: int(v[3]) for k, v in table.items() if int(v[3])} == dict(timed_out)
    page = report_page(markdown, "t")
    section = page.split("Retries, Restarts &amp; Timeouts", 1)[1].split("<h2", 1)[0]
    cells = {
        row[0]: row[1:]
        for row in (re.findall(r"<td[^>]*>([^<]*)</td>", tr) for tr in section.split("<tr>"))
        if row
    }
    assert {k: int(v[3]) for k, v in cells.items() if k in timed_out} == dict(timed_out)


def test_sigint_ends_every_open_round_with_an_outcome_inside_its_session(interrupted_run: Run) -> None:
    """SIGINT while agent_b waits for its LLM call: the session ends failed with the interrupt as its
    reason, and every round that was still running ends before it, with outcome `interrupted` (not
    `cancelled`: `asyncio.run()` turns the SIGINT into a cancellation of its main task) and the reason."""
    (ledger,), (massgen,), (ours,) = _sources(interrupted_run)
    rows = _spans(interrupted_run)
    (session,) = [r for r in rows if r["span_name"] == "coordination.session"]
    assert session["status"] == "ERROR"
    rounds = _rounds(rows)
    assert rounds and all(r["attributes"].get("massgen.outcome") for r in rounds), [
        (r["span_name"], r["attributes"].get("massgen.outcome")) for r in rounds
    ]
    assert all(r["end_us"] <= session["end_us"] for r in rounds)
    (stalled,) = [r for r in rounds if r["span_name"] == "agent.agent_b.round_0"]
    assert stalled["attributes"]["massgen.outcome"] == "interrupted"
    assert stalled["status"] == "ERROR"
    assert stalled["attributes"]["massgen.error_message"].startswith("KeyboardInterrupt (SIGINT)")
    cut = [r for r in rounds if r["attributes"]["massgen.outcome"] in CUT_SHORT]
    assert {r["attributes"]["massgen.outcome"] for r in cut} == {"interrupted"}
    assert session["attributes"]["massgen.failure_reason"].startswith("KeyboardInterrupt (SIGINT)")
    assert ours.values["rounds without outcome"] == 0 and ours.values["rounds cut short"] >= 1
    assert ours.values["turn failed"] is True
    # Tokens: only what a call read before the interrupt (the server may have sent more to a call cut short).
    for key in ("input tokens", "output tokens"):
        assert (ours.values[key] or 0) <= ledger.values[key], key
    # A call the interrupt cut off before its usage came (agent_b's, never answered; any other still
    # streaming) ends inside its round, says it was cut off and that its usage is unknown, not 0; so do
    # its round and the session. Every other call has the usage the server sent.
    llm = [r for r in rows if str(r["span_name"]).startswith("llm.")]
    unknown = [r for r in llm if r["attributes"].get("mastrace.usage.unknown") is True]
    assert unknown and all("cut off: interrupted" in str(r["message"]) for r in unknown)
    assert all("gen_ai.usage.input_tokens" in r["attributes"] for r in llm if r not in unknown)
    assert stalled["attributes"]["mastrace.usage.unknown"] is True
    assert session["attributes"]["mastrace.usage.unknown"] is True
    assert all(r["end_us"] <= session["end_us"] for r in llm)
    assert ours.values["LLM calls, usage unknown"] == len(unknown)
    # MassGen's own file never learns of the interrupt.
    assert massgen.values["finish reason"] in ("in_progress", None)
