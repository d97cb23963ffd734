"""`mastrace analyze` on the demo store."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .conftest import Runner


def test_writes_analysis_report_md(mastrace_cli: Runner, demo_store: Path, tmp_path: Path) -> None:
    """By default ANALYSIS_REPORT.md is written in the current directory and its path printed."""
    result = mastrace_cli("analyze", store=demo_store)
    assert result.returncode == 0, result.stderr
    report = (tmp_path / "ANALYSIS_REPORT.md").read_text()
    assert "ANALYSIS_REPORT.md" in result.stdout
    assert "| Agents | agent_a, agent_b, agent_c |" in report
    assert "| Total Answers | 3 |" in report and "| Total Votes | 3 |" in report
    assert re.search(r"\| Winner \| agent_[abc] \|", report)


def test_report_contents_from_the_demo(mastrace_cli: Runner, demo_store: Path) -> None:
    """The report has three phases, seven rounds, the failed call and per-agent costs."""
    report = mastrace_cli("analyze", "latest", "-o", "-", store=demo_store).stdout
    phases = re.findall(r"^\| (initial_answer|voting|presentation) \| (\d) \|", report, flags=re.MULTILINE)
    assert phases == [("initial_answer", "3"), ("voting", "3"), ("presentation", "1")]
    rounds = re.findall(r"^\| agent_[abc] \| \d \| r\d \|", report, flags=re.MULTILINE)
    assert len(rounds) == 7
    assert "| exception | mcp.filesystem.write_file | agent_c | PermissionError |" in report
    # The failed call is one error and one call, though its wrapper failed with it.
    assert report.count("PermissionError") == 1
    assert "Tool execution: mcp__filesystem__write_file" not in report.split("## Tool Calls")[1]
    assert "| mcp.filesystem.write_file | 3 | 1 |" in report
    assert not re.search(r"\bcorrect", report, flags=re.IGNORECASE)


def test_tool_wall_never_exceeds_the_round(mastrace_cli: Runner, demo_store: Path) -> None:
    """Per round, tool wall plus non-tool time equals the round's total (union, not sum)."""
    data = json.loads(mastrace_cli("analyze", "--format", "json", store=demo_store).stdout)
    for row in data["rounds"]:
        assert 0 <= row["tool_wall"] <= row["duration"]
        assert abs(row["tool_wall"] + row["non_tool"] - row["duration"]) < 1e-6
    first_rounds = [r for r in data["rounds"] if r["round"] == 0]
    # Three calls each, a `Tool execution:` wrapper and the MCP span it holds counted as one.
    assert all(r["tool_spans"] == 3 and r["tool_wall"] > 0 for r in first_rounds)


def test_analyze_previous_writes_to_a_given_file(
    mastrace_cli: Runner, demo_store: Path, tmp_path: Path
) -> None:
    """`-o FILE` writes there; `previous` picks the earlier run (the sim-large model)."""
    target = tmp_path / "reports" / "prev.md"
    target.parent.mkdir()
    assert mastrace_cli("analyze", "previous", "-o", str(target), store=demo_store).returncode == 0
    assert "| `models.main.model` | sim-large |" in target.read_text()


def test_output_into_a_missing_folder_is_an_error(
    mastrace_cli: Runner, demo_store: Path, tmp_path: Path
) -> None:
    """`-o` into a folder that does not exist is a one-line error; no folder is created."""
    for command in (("analyze",), ("view",), ("export", "--format", "otlp-json")):
        target = tmp_path / "no" / "such" / "dir" / "out.file"
        result = mastrace_cli(*command, "-o", str(target), store=demo_store)
        assert result.returncode == 2, command
        assert result.stderr.splitlines() == [
            f"mastrace {command[0]}: error: cannot write {target}: the folder {target.parent} does not exist"
        ]
        assert not (tmp_path / "no").exists()
