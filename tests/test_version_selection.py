"""The selection of tests that run again on the other Pythons (`tests/version_sensitive.py`) keeps up with
the code: a module that branches on a version, leans on an interpreter internal or runs DuckDB SQL is
covered, and a test that looks at a version runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import version_sensitive as vs

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "mastrace"


def _version_dependent_sources() -> set[str]:
    found = set()
    for path in SOURCE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if vs.VERSION_MARKERS.search(text) or vs.DUCKDB_IMPORT.search(text):
            found.add(path.relative_to(SOURCE).as_posix())
    return found


def test_every_version_dependent_module_is_covered() -> None:
    missing = sorted(_version_dependent_sources() - set(vs.COVERAGE))
    assert missing == [], (
        f"add these modules and their tests to COVERAGE in tests/version_sensitive.py: {missing}"
    )


def test_every_test_that_looks_at_a_version_runs_on_every_python() -> None:
    looking = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "tests").rglob("test_*.py")
        if vs.TEST_MARKERS.search(path.read_text(encoding="utf-8"))
    }
    assert sorted(looking - vs.SELECTED) == []


def test_the_selection_names_files_that_exist() -> None:
    assert sorted(p for p in vs.SELECTED if not (ROOT / p).is_file()) == []
    assert sorted(p for p in vs.COVERAGE if not (SOURCE / p).is_file()) == []


def test_the_option_runs_exactly_the_selection() -> None:
    """`pytest --version-sensitive` collects the selected files' tests and nothing else."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "--version-sensitive", "-p", "no:randomly"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    files = {line.split("::", 1)[0] for line in done.stdout.splitlines() if "::" in line}
    assert files == set(vs.SELECTED)
