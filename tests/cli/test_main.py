"""The installed `mastrace` entry point: help, usage errors and error exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import MASTRACE, Runner, clean_env

COMMANDS = ("runs", "tree", "query", "analyze", "view", "graph", "diff", "export")


def test_help_lists_every_subcommand(mastrace_cli: Runner) -> None:
    """`mastrace --help` exits 0 and names each subcommand."""
    result = mastrace_cli("--help")
    assert result.returncode == 0
    assert all(f"    {name}" in result.stdout for name in COMMANDS)


def test_missing_subcommand_is_a_usage_error(mastrace_cli: Runner) -> None:
    """Running `mastrace` alone names the commands in one line and exits 2."""
    result = mastrace_cli()
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "mastrace: error: give a command: runs, tree, query, analyze, view, graph, diff, compare, "
        "experiments, export, push, prune, compact, serve, mcp, run (see 'mastrace --help')"
    ]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("bogus",), "invalid choice: 'bogus'"),
        (("tree", "--max-spans", "many"), "invalid int value: 'many'"),
        (("runs", "--format", "table|json|csv"), "invalid choice: 'table|json|csv'"),
        (("runs", "--no-such-flag"), "unrecognized arguments: --no-such-flag"),
        (("diff", "latest"), "required: RUN_B"),
        (("export", "latest"), "required: --format"),
        (("push",), "required: --to"),
        (("serve", "--store", "a", "--store", "b"), "--store takes one value, given twice"),
        (("run", "--store", "a", "--store", "b", "--", "x.py"), "--store takes one value, given twice"),
        (("run", "--otlp", "http://a", "--otlp", "http://b"), "--otlp takes one value, given twice"),
        (("runs", "\x1b]0;pwned\x07"), "unrecognized arguments: \\u001b]0;pwned\\u0007"),
    ],
)
def test_argument_errors_are_one_line_with_exit_2(
    mastrace_cli: Runner, args: tuple[str, ...], says: str
) -> None:
    """Every argument error is one escaped line on stderr naming the problem, and exit status 2."""
    result = mastrace_cli(*args)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and says in lines[0] and "--help" in lines[0], result.stderr
    assert "\x1b" not in result.stderr


LOADED = """
import sys
from mastrace.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = ("duckdb", "opentelemetry.sdk", "opentelemetry.trace", "wrapt", "asyncio")
print(",".join(sorted(m for m in heavy if m in sys.modules)))
"""


@pytest.mark.parametrize(
    "args", [("--help",), ("runs", "--help"), ("run", "--help"), ("tree", "--max-spans", "x"), ("bogus",)]
)
def test_help_and_argument_errors_load_neither_duckdb_nor_the_sdk(args: tuple[str, ...]) -> None:
    """`--help` and argument errors answer without importing DuckDB, the OpenTelemetry SDK or asyncio."""
    done = subprocess.run(
        [sys.executable, "-c", LOADED, *args], capture_output=True, text=True, env=clean_env(), timeout=60
    )
    assert done.stdout.splitlines()[-1] == "", done.stdout


def test_python_dash_m_mastrace_is_the_command(demo_store: Path) -> None:
    """`python -m mastrace` runs the same command as the `mastrace` script."""
    done = subprocess.run(
        [sys.executable, "-m", "mastrace", "runs", "--store", str(demo_store), "--format", "json"],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count('"coordination.session"') == 2
    usage = subprocess.run(
        [sys.executable, "-m", "mastrace"], capture_output=True, text=True, env=clean_env(), timeout=60
    )
    assert usage.returncode == 2 and "give a command" in usage.stderr


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: p.write_text("root:x:0:0\n"), "is a file, not a mastrace store"),
        (lambda p: (p.mkdir(), (p / "notes.txt").write_text("x")), "is not a mastrace store"),
        (lambda p: None, "no local store at"),
        (lambda p: p.mkdir(), "has no spans yet"),
    ],
)
def test_a_path_that_is_not_a_store_says_what_it_is(
    mastrace_cli: Runner, tmp_path: Path, make: object, says: str
) -> None:
    """A file, a folder of something else, a missing path and an empty store each get their own message."""
    path = tmp_path / "given"
    make(path)  # type: ignore[operator]
    for args in (("runs",), ("tree",), ("analyze",), ("query", "SELECT 1")):
        result = mastrace_cli(*args, store=path)
        assert result.returncode == 2, (args, result.stderr)
        assert says in result.stderr and len(result.stderr.splitlines()) == 1, (args, result.stderr)


def test_empty_store_fails_with_a_message(mastrace_cli: Runner, tmp_path: Path) -> None:
    """Every command on an empty store exits 2 with one clear line on stderr."""
    empty = tmp_path / "empty"
    (empty / "segments").mkdir(parents=True)
    for args in (("runs",), ("query", "SELECT 1"), ("analyze",), ("diff", "previous", "latest")):
        result = mastrace_cli(*args, store=empty)
        assert result.returncode == 2, args
        assert result.stderr.strip().endswith("has no spans yet"), (args, result.stderr)
        assert "Traceback" not in result.stderr


def test_default_store_comes_from_the_environment(
    mastrace_cli: Runner, demo_store: Path, tmp_path: Path
) -> None:
    """Without --store, the MASTRACE_DIR store is read (and ./.mastrace when unset)."""
    env = {**clean_env(), "MASTRACE_DIR": str(demo_store)}
    result = subprocess.run(
        [str(MASTRACE), "runs"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600
    )
    assert result.returncode == 0 and result.stdout.count("coordination.session") == 2
    missing = mastrace_cli("runs")
    assert missing.returncode == 2 and str(tmp_path / ".mastrace") in missing.stderr
