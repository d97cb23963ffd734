"""`mastrace tree` on the demo store."""

from __future__ import annotations

from pathlib import Path

from .conftest import Runner


def test_tree_shows_the_massgen_hierarchy(mastrace_cli: Runner, demo_store: Path) -> None:
    """Rounds nest under the session, LLM and tool spans under rounds, MCP calls under tool executions."""
    result = mastrace_cli("tree", "latest", store=demo_store)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("trace ") and lines[1].startswith("coordination.session")
    assert sum(line.startswith("├── agent.agent_") for line in lines) == 7  # 6 rounds + presentation
    assert any(line.startswith("│   ├── llm.simulated.stream") for line in lines)
    assert any(line.startswith("│   │   └── mcp.search.web_search") for line in lines)
    assert any(line.startswith("└── Coordination event: coordination_completed") for line in lines)


def test_tree_marks_the_failed_tool_call(mastrace_cli: Runner, demo_store: Path) -> None:
    """The failing MCP call and its tool execution carry ✗ and the exception."""
    out = mastrace_cli("tree", store=demo_store).stdout
    failed = [line for line in out.splitlines() if "✗ " in line]
    assert len(failed) == 2
    assert all("PermissionError: /mnt/shared/agent3.1.md" in line for line in failed)


def test_tree_of_unknown_trace_fails(mastrace_cli: Runner, demo_store: Path) -> None:
    """An unknown trace id exits 2 and says which id was not found."""
    result = mastrace_cli("tree", "0123456789abcdef0123456789abcdef", store=demo_store)
    assert result.returncode == 2
    assert "no trace '0123456789abcdef0123456789abcdef'" in result.stderr
