"""The installed `mastrace` entry point: help, usage errors and error exit codes."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .conftest import MASTRACE, Runner, clean_env

COMMANDS = ("runs", "tree", "query", "analyze", "view", "diff", "export")


def test_help_lists_every_subcommand(mastrace_cli: Runner) -> None:
    """`mastrace --help` exits 0 and names each subcommand."""
    result = mastrace_cli("--help")
    assert result.returncode == 0
    assert all(f"    {name}" in result.stdout for name in COMMANDS)


def test_missing_subcommand_is_a_usage_error(mastrace_cli: Runner) -> None:
    """Running `mastrace` alone prints usage and exits 2."""
    result = mastrace_cli()
    assert result.returncode == 2
    assert "usage: mastrace" in result.stderr


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
        [str(MASTRACE), "runs"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    assert result.returncode == 0 and result.stdout.count("coordination.session") == 2
    missing = mastrace_cli("runs")
    assert missing.returncode == 2 and str(tmp_path / ".mastrace") in missing.stderr
