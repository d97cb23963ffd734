"""An MCP server that exits in the middle of a tool call, on a real MassGen 0.1.97 run under `mastrace
run`: MassGen calls the server again once and then gives up. MassGen counts 1 call and 1 failure; so
do the spans (the second `mcp.*` span is attempt 2, a retry) and `analyze`. Run with `-s` for the table."""

from __future__ import annotations

from pathlib import Path

from . import parity
from .conftest import MODELS, Run, analyze


def test_a_crashed_mcp_call_is_one_call_one_error_one_retry(mcp_crash_run: Run, tmp_path: Path) -> None:
    assert mcp_crash_run.returncode == 0, mcp_crash_run.stderr[-3000:]
    rows = parity.spans(mcp_crash_run.store)
    sources = (
        parity.ledger_figures(mcp_crash_run, MODELS),
        parity.massgen_figures(mcp_crash_run),
        parity.mastrace_figures(rows),
    )
    print(
        parity.table(
            mcp_crash_run.folder.name, dict(zip(("ledger", "MassGen", "mastrace"), sources, strict=True))
        )
    )
    (ledger,), (massgen,), (ours,) = sources
    assert ledger.values["MCP calls"] == massgen.values["MCP calls"] == ours.values["MCP calls"] == 1
    assert massgen.values["MCP errors"] == ours.values["MCP errors"] == 1
    assert ours.values["MCP retries"] == 1
    attempts = [r for r in rows if r["span_name"] == "mcp.calc.multiply"]
    assert [r["attributes"]["mastrace.tool.attempt"] for r in attempts] == [1, 2]
    assert all(r["status"] == "ERROR" for r in attempts)
    (wrapper,) = [r for r in rows if r["span_name"] == "mcp_tool.mcp__calc__multiply"]
    assert wrapper["status"] == "ERROR" and wrapper["attributes"]["mastrace.tool.success"] is False
    assert {r["parent_span_id"] for r in attempts} == {wrapper["span_id"]}
    report = analyze(mcp_crash_run.store, tmp_path / "report.md")
    assert "| mcp.calc.multiply | 1 | 1 | 1 |" in report
    recovery = report.split("## Retries, Restarts & Timeouts", 1)[1].split("\n## ", 1)[0]
    (agent_a,) = [line for line in recovery.splitlines() if line.startswith("| agent_a ")]
    assert agent_a.strip("|").split("|")[5].strip() == "1"
    # The errors table lists the failure at the attempts, not again at the wrapper.
    errors = report.split("## Errors & Issues", 1)[1].split("\n## ", 1)[0]
    assert "mcp.calc.multiply" in errors and "mcp_tool." not in errors
