"""The ANALYSIS_REPORT.md rendering of a report."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mastrace.analysis import TraceStore, build_report, render_markdown

from .conftest import TraceWriter

SECTIONS = [
    "# Trace Analysis Report",
    "## Summary",
    "## Session Overview",
    "## Phase Duration Breakdown",
    "## Per-Round Timing (Sorted by Agent)",
    "## Coordination Flow",
    "## Slowest Operations",
    "## Tool Calls",
    "## Errors & Issues",
    "## Cost & Token Analysis",
    "## Appendix: Configuration Snapshot",
]


@pytest.fixture
def markdown(synthetic: tuple[Path, str, TraceWriter]) -> str:
    path, trace_id, _ = synthetic
    with TraceStore(path) as store:
        return render_markdown(build_report(store, trace_id))


def test_sections_appear_in_order(markdown: str) -> None:
    """Every report section is present, in the documented order."""
    positions = [markdown.index(f"\n{s}\n") if i else markdown.index(s) for i, s in enumerate(SECTIONS)]
    assert positions == sorted(positions)


def test_overview_table_rows(markdown: str) -> None:
    """The overview table has duration, agents, winner, cost, answers and votes."""
    for row in (
        "| Duration | 10.000 s (0.17 min) |",
        "| Agents | agent_a, agent_b |",
        "| Winner | agent_b |",
        "| Total Cost | $0.024 |",
        "| Total Answers | 2 |",
        "| Total Votes | 2 |",
    ):
        assert row in markdown


def test_per_round_row_has_tool_wall_and_non_tool_time(markdown: str) -> None:
    """A round row shows its UTC span, total, tool wall and non-tool seconds."""
    assert (
        "| agent_a | 1 | r0 | initial_answer | answer | 22:13:20.100-22:13:25.100 "
        "| 5.000 | 2.400 | 2.600 | 6 |" in markdown
    )


def test_usage_table_has_a_total_row_with_cache_hit_rate(markdown: str) -> None:
    """The cost table ends with totals and the overall cache hit rate."""
    assert "| **Total** | 5 | 2,300 | 780 | 50 | 700 | 30.4% | $0.024 |" in markdown


def test_report_does_not_judge_correctness(markdown: str) -> None:
    """The report states what agents produced without calling anything correct."""
    assert not re.search(r"\bcorrect(ly)?\b|right answer", markdown, flags=re.IGNORECASE)
    assert "| agent_b | agent_b | agent2.1 | shortest name | counted | +5.300 |" in markdown


def test_pipes_in_values_are_escaped(writer: TraceWriter, tmp_path: Path) -> None:
    """A `|` inside a value does not break the markdown table."""
    writer.span("session", "coordination.session", 0, 100)
    writer.span("t", "mcp.a|b.tool", 0, 50, "session")
    with TraceStore(tmp_path / "store") as store:
        text = render_markdown(build_report(store, writer.trace_id()))
    assert "| mcp.a\\|b.tool | 1 | 0 |" in text
