"""`mastrace runs` on a store written by the demo."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from .conftest import Runner, clean_env


def test_runs_table_lists_both_demo_sessions(mastrace_cli: Runner, demo_store: Path) -> None:
    """The table has a header and one row per session with spans, errors, tokens and cost."""
    result = mastrace_cli("runs", store=demo_store)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split("│")[0].strip() == "trace id" and "cost" in lines[0]
    rows = [line for line in lines[2:] if "coordination.session" in line]
    assert len(rows) == 2
    assert all(
        row.split("│")[6].strip() == "2" for row in rows
    )  # spans with errors: the failed tool call's wrapper and its MCP span
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


def test_runs_marks_the_runs_latest_and_previous_pick(mastrace_cli: Runner, demo_store: Path) -> None:
    """The `ref` column names the run `latest` resolves to and the one `previous` resolves to."""
    table = mastrace_cli("runs", store=demo_store).stdout.splitlines()
    assert [c.strip() for c in table[0].split("│")][:2] == ["trace id", "ref"]
    refs = {row.split("│")[1].strip(): row.split("│")[0].strip() for row in table[2:]}
    for alias in ("latest", "previous"):
        tree = mastrace_cli("tree", alias, "--max-spans", "1", store=demo_store).stdout
        assert tree.splitlines()[0] == f"trace {refs[alias]}"
    runs = json.loads(mastrace_cli("runs", "--format", "json", store=demo_store).stdout)
    assert [r["ref"] for r in runs] == ["latest", "previous"]


def test_latest_is_the_newest_run_of_any_kind(mastrace_cli: Runner, demo_store: Path, tmp_path: Path) -> None:
    """A newer trace that is not a coordination session (a helper's, a plain SDK call's) is `latest`."""
    store = tmp_path / "store"
    shutil.copytree(demo_store, store)
    code = (
        f"import mastrace\nmastrace.configure(local={str(store)!r})\n"
        "with mastrace.get_tracer().span('helper.job'):\n    pass\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=clean_env(), timeout=600)
    rows = json.loads(mastrace_cli("runs", "--format", "json", store=store).stdout)
    assert [(r["name"], r["ref"]) for r in rows] == [
        ("helper.job", "latest"),
        ("coordination.session", "previous"),
        ("coordination.session", None),
    ]


def test_tables_use_thousands_separators(mastrace_cli: Runner, demo_store: Path) -> None:
    """Counts of a thousand or more print with separators in `runs` and `query`'s tables; JSON stays raw."""
    table = mastrace_cli("runs", store=demo_store).stdout
    assert re.search(r"│\s+\d{1,3},\d{3} │ \$", table)  # tokens, over ten thousand in each run
    query = mastrace_cli(
        "query", "SELECT 1234567 AS n, 0.026272499999999997 AS f, 0.00018 AS c", store=demo_store
    ).stdout
    assert query.splitlines()[2].split("│") == ["1,234,567 ", " 0.026272 ", " 0.00018"]
    raw = json.loads(
        mastrace_cli("query", "SELECT 1234567 AS n", "--format", "json", store=demo_store).stdout
    )
    assert raw == [{"n": 1234567}]
