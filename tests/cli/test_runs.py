"""`mastrace runs` on a store written by the demo."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import Runner


def test_runs_table_lists_both_demo_sessions(mastrace_cli: Runner, demo_store: Path) -> None:
    """The table has a header and one row per session with spans, errors, tokens and cost."""
    result = mastrace_cli("runs", store=demo_store)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split("│")[0].strip() == "trace id" and "cost" in lines[0]
    rows = [line for line in lines[2:] if "coordination.session" in line]
    assert len(rows) == 2
    assert all(
        row.split("│")[5].strip() == "2" for row in rows
    )  # the failed tool call, twice (mcp + wrapper)
    assert all(row.rstrip().split("│")[-1].strip().startswith("$") for row in rows)


def test_runs_json_is_newest_first(mastrace_cli: Runner, demo_store: Path) -> None:
    """`--format json` gives one object per run, newest first, with totals."""
    runs = json.loads(mastrace_cli("runs", "--format", "json", store=demo_store).stdout)
    assert [r["name"] for r in runs] == ["coordination.session"] * 2
    assert runs[0]["start_us"] > runs[1]["start_us"]
    assert all(r["spans"] == 48 and r["input_tokens"] > 0 and r["cost"] > 0 for r in runs)


def test_runs_limit(mastrace_cli: Runner, demo_store: Path) -> None:
    """`--limit 1` shows only the newest run."""
    runs = json.loads(mastrace_cli("runs", "--limit", "1", "--format", "json", store=demo_store).stdout)
    assert len(runs) == 1
