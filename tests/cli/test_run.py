"""`mastrace run -- PROGRAM`: a Python program traced with no change to its code, its exit status
passed through, and a clear error for what cannot run in-process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .conftest import MASTRACE, clean_env

SCRIPT = """\
import sys
from opentelemetry import trace

with trace.get_tracer("user.app").start_as_current_span("user.work") as span:
    span.set_attribute("argv", " ".join(sys.argv[1:]))
sys.exit(int(sys.argv[-1]))
"""


def _run(tmp_path: Path, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MASTRACE), "run", "--store", str(tmp_path / "store"), "--instrument", "none", *command],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(),
        cwd=tmp_path,
    )


def _stored(tmp_path: Path) -> list[dict[str, object]]:
    done = subprocess.run(
        [str(MASTRACE), "query", "--store", str(tmp_path / "store"), "--format", "json",
         "SELECT span_name, attributes->>'argv' AS argv FROM records"],
        capture_output=True, text=True, timeout=120, env=clean_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_script_runs_traced_and_its_exit_status_is_kept(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(SCRIPT)
    done = _run(tmp_path, "--", "app.py", "--flag", "3")
    assert done.returncode == 3, done.stderr
    assert _stored(tmp_path) == [{"span_name": "user.work", "argv": "--flag 3"}]


def test_python_dash_m_and_python_file_run_in_process(tmp_path: Path) -> None:
    (tmp_path / "appmod.py").write_text(SCRIPT)
    assert _run(tmp_path, "--", "python", "-m", "appmod", "0").returncode == 0
    assert _run(tmp_path, "--", "python", "appmod.py", "x", "0").returncode == 0
    assert sorted(str(r["argv"]) for r in _stored(tmp_path)) == ["0", "x 0"]


def test_a_console_script_runs_by_name(tmp_path: Path) -> None:
    # `mastrace` itself is a console script of this environment: run `mastrace --version`-like help.
    done = _run(tmp_path, "--", "mastrace", "runs", "--store", str(tmp_path / "empty"))
    assert done.returncode == 2 and "no local store" in done.stderr  # the inner command's own error


def test_what_cannot_run_in_process_is_a_clear_error(tmp_path: Path) -> None:
    done = _run(tmp_path, "--", "no-such-program-xyz")
    assert done.returncode == 2
    assert "not a console script of this Python environment" in done.stderr
    assert "Traceback" not in done.stderr
    done = _run(tmp_path)
    assert done.returncode == 2 and "nothing to run" in done.stderr
    unknown = subprocess.run(
        [str(MASTRACE), "run", "--instrument", "crewai", "--", sys.executable],
        capture_output=True, text=True, timeout=60, env=clean_env(), cwd=tmp_path,
    )  # fmt: skip
    assert unknown.returncode == 2 and "unknown integration" in unknown.stderr


def test_the_program_starts_without_the_reader_side_loaded(tmp_path: Path) -> None:
    """`mastrace run` loads neither DuckDB nor the analysis before the program runs (start-up cost)."""
    (tmp_path / "probe.py").write_text(
        "import sys\n"
        "print(','.join(m for m in ('duckdb', 'mastrace.analysis') if m in sys.modules) or 'none')\n"
    )
    done = _run(tmp_path, "--", "probe.py")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "none"
