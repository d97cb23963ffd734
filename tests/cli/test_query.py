"""`mastrace query` in its three output formats, and its errors."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from .conftest import Runner

# Part 7 of the MassGen log-analyzer guide, verbatim apart from the trace filter.
TOKEN_USAGE_BY_AGENT = (
    "SELECT attributes->>'massgen.agent_id' as agent, SUM((attributes->'massgen.usage.input')::int) as "
    "total_input_tokens, SUM((attributes->'massgen.usage.output')::int) as total_output_tokens, "
    "SUM((attributes->'massgen.usage.cost')::float) as total_cost_usd FROM records WHERE span_name LIKE "
    "'agent.%' AND attributes->>'massgen.usage.input' IS NOT NULL GROUP BY attributes->>'massgen.agent_id' "
    "ORDER BY agent"
)


def test_table_format(mastrace_cli: Runner, demo_store: Path) -> None:
    """The table has a header, a rule, the rows and a row count."""
    out = mastrace_cli(
        "query",
        "SELECT span_name, count(*) AS n FROM records WHERE span_name LIKE 'llm.%' GROUP BY 1",
        store=demo_store,
    ).stdout.splitlines()
    assert out[0].split("│")[0].strip() == "span_name" and "┼" in out[1]
    assert out[2].split("│")[1].strip() == "20"  # 10 LLM calls per demo run
    assert out[-1] == "(1 row)"


def test_json_format_runs_the_seed_cost_query(mastrace_cli: Runner, demo_store: Path) -> None:
    """The guide's token-usage query runs unchanged and `--format json` returns objects."""
    rows = json.loads(
        mastrace_cli("query", TOKEN_USAGE_BY_AGENT, "--format", "json", store=demo_store).stdout
    )
    assert [r["agent"] for r in rows] == ["agent_a", "agent_b", "agent_c"]
    assert all(r["total_input_tokens"] > 0 and r["total_cost_usd"] > 0 for r in rows)


def test_csv_format_with_timestamps(mastrace_cli: Runner, demo_store: Path) -> None:
    """CSV output has a header row and one line per result row."""
    text = mastrace_cli(
        "query",
        "SELECT span_name, start_timestamp FROM records ORDER BY start_timestamp LIMIT 3",
        "--format",
        "csv",
        store=demo_store,
    ).stdout
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["span_name", "start_timestamp"]
    assert rows[1][0] == "coordination.session" and len(rows) == 4


def test_bad_sql_fails_cleanly(mastrace_cli: Runner, demo_store: Path) -> None:
    """A syntax error exits 2 with DuckDB's message and no traceback."""
    result = mastrace_cli("query", "SELEC span_name FROM records", store=demo_store)
    assert result.returncode == 2
    assert "query failed" in result.stderr and "syntax error" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_query_that_runs_too_long_is_stopped(mastrace_cli: Runner, demo_store: Path) -> None:
    """`--timeout` stops a statement that would run for hours: exit 2, one line saying how to raise it."""
    proc = mastrace_cli(
        "query", "--timeout", "1", "SELECT count(*) FROM range(10000000000000) a", store=demo_store
    )
    assert proc.returncode == 2
    assert "ran longer than 1 s" in proc.stderr and "--timeout" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_query_that_needs_too_much_memory_fails_cleanly(mastrace_cli: Runner, demo_store: Path) -> None:
    """A recursive CTE doubling its rows hits `--memory` and fails in one line, with no spill to disk."""
    sql = (
        "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r, range(2) WHERE i < 40) "
        "SELECT count(*) FROM r"
    )
    proc = mastrace_cli("query", "--memory", "200MB", sql, store=demo_store)
    assert proc.returncode == 2
    assert "more memory than its limit" in proc.stderr and "--memory" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_only_max_rows_are_printed_and_the_rest_is_said(mastrace_cli: Runner, demo_store: Path) -> None:
    """A result longer than `--max-rows` is cut, and stderr says so; `--max-rows 0` prints all."""
    cut = mastrace_cli(
        "query", "--format", "json", "--max-rows", "5", "SELECT * FROM range(50)", store=demo_store
    )
    assert cut.returncode == 0 and len(json.loads(cut.stdout)) == 5
    assert "only the first 5 rows" in cut.stderr
    full = mastrace_cli(
        "query", "--format", "json", "--max-rows", "0", "SELECT * FROM range(50)", store=demo_store
    )
    assert len(json.loads(full.stdout)) == 50 and not full.stderr
    assert mastrace_cli("query", "--memory", "lots", "SELECT 1", store=demo_store).returncode == 2
