"""`mastrace analyze` on a real MassGen run that retries: the SDK's HTTP retry of a 500, MassGen's
enforcement retries of an agent that votes for an id that does not exist, its restart signals.
Each count is checked against the loopback server's ledger or MassGen's own log."""

from __future__ import annotations

import re
from pathlib import Path

from .conftest import FAILING_MODELS, Run, analyze, query


def _section(report: str) -> dict[str, list[str]]:
    text = report.split("## Retries, Restarts & Timeouts", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split("|") for line in text.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in rows[1:]}


def test_analyze_counts_http_and_enforcement_retries_and_restarts(failing_run: Run, tmp_path: Path) -> None:
    assert failing_run.returncode == 0, failing_run.stderr[-3000:]
    rows = _section(analyze(failing_run.store, tmp_path / "report.md"))
    agent_of = {model: f"agent_{x}" for x, model in FAILING_MODELS.items()}
    # HTTP retries: one per HTTP error the server answered (the SDK retried each), on that model's agent.
    errors = {agent_of[m]: row["errors"] for m, row in failing_run.ledger.by_model().items()}
    assert sum(errors.values()) >= 1
    for agent, count in errors.items():
        assert (rows[agent][0] if agent in rows else "0") == str(count), (agent, rows)
    # Enforcement retries: MassGen logs "Retry (n/3): ..." once per retry.
    (turn,) = failing_run.massgen_turns()
    logged = len(re.findall(r"Retry \(\d+/\d+\)", (turn / "massgen.log").read_text()))
    assert logged >= 2
    assert rows["**Total**"][1] == str(logged)
    # Restart signals: MassGen's `Agent restart` records, counted from the raw records.
    signals = query(
        failing_run.store,
        "SELECT attributes->>'agent_id' AS agent, count(*) AS n FROM records "
        "WHERE span_name LIKE 'Agent restart%' GROUP BY 1",
    )
    assert signals
    for row in signals:
        assert rows[str(row["agent"])][2] == str(row["n"])
    assert rows["**Total**"][3] == "0"  # no timeout in this run
