"""`mastrace run -- PROGRAM`: a Python program traced with no change to its code, its exit status
passed through, and a clear error for what cannot run in-process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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
        timeout=600,
        env=clean_env(),
        cwd=tmp_path,
    )


def _stored(tmp_path: Path) -> list[dict[str, object]]:
    done = subprocess.run(
        [str(MASTRACE), "query", "--store", str(tmp_path / "store"), "--format", "json",
         "SELECT span_name, attributes->>'argv' AS argv FROM records"],
        capture_output=True, text=True, timeout=600, env=clean_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_script_runs_traced_and_its_exit_status_is_kept(tmp_path: Path) -> None:
    """A .py file runs in-process with its arguments; its spans land in --store, its exit status kept."""
    (tmp_path / "app.py").write_text(SCRIPT)
    done = _run(tmp_path, "--", "app.py", "--flag", "3")
    assert done.returncode == 3, done.stderr
    assert _stored(tmp_path) == [{"span_name": "user.work", "argv": "--flag 3"}]


def test_python_dash_m_and_python_file_run_in_process(tmp_path: Path) -> None:
    """`python -m MODULE` and `python FILE` run like the interpreter would run them."""
    (tmp_path / "appmod.py").write_text(SCRIPT)
    assert _run(tmp_path, "--", "python", "-m", "appmod", "0").returncode == 0
    assert _run(tmp_path, "--", "python", "appmod.py", "x", "0").returncode == 0
    assert sorted(str(r["argv"]) for r in _stored(tmp_path)) == ["0", "x 0"]


def test_a_console_script_runs_by_name(tmp_path: Path) -> None:
    """A console script of this environment runs by name, its own errors and status passed through."""
    # `mastrace` itself is a console script of this environment: run `mastrace --version`-like help.
    done = _run(tmp_path, "--", "mastrace", "runs", "--store", str(tmp_path / "empty"))
    assert done.returncode == 2 and "no local store" in done.stderr  # the inner command's own error


def test_what_cannot_run_in_process_is_a_clear_error(tmp_path: Path) -> None:
    """A program that is not Python, no program and an unknown integration are one-line errors."""
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


CONFIGURING_APP = """\
import subprocess, sys
import mastrace

mastrace.configure(local=".mastrace", service_name="app-own-name")  # the program's own choice
with mastrace.get_tracer("app").span("app.work"):
    pass
mastrace.shutdown()
# A child process that configures itself too obeys the command line of `mastrace run`.
subprocess.run([sys.executable, "-c", '''
import mastrace
mastrace.configure(local="child-store", service_name="child-own-name")
with mastrace.get_tracer("child").span("child.work"):
    pass
'''], check=True)
"""


def test_the_command_line_wins_over_the_programs_own_configure(tmp_path: Path) -> None:
    """`--store` and `--service-name` hold in a program that calls configure() itself, and in its children."""
    (tmp_path / "app.py").write_text(CONFIGURING_APP)
    done = subprocess.run(
        [str(MASTRACE), "run", "--store", "other", "--service-name", "from-cli", "--instrument", "none",
         "--", "app.py"],
        capture_output=True, text=True, timeout=600, env=clean_env(), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = subprocess.run(
        [str(MASTRACE), "query", "--store", str(tmp_path / "other"), "--format", "json",
         "SELECT span_name, service_name FROM records ORDER BY span_name"],
        capture_output=True, text=True, timeout=600, env=clean_env(),
    )  # fmt: skip
    assert json.loads(rows.stdout) == [
        {"span_name": "app.work", "service_name": "from-cli"},
        {"span_name": "child.work", "service_name": "from-cli"},
    ]
    assert not (tmp_path / ".mastrace").exists() and not (tmp_path / "child-store").exists()


def test_without_options_the_programs_own_configure_holds(tmp_path: Path) -> None:
    """What the command line does not say is the program's: its store and service name are kept."""
    (tmp_path / "app.py").write_text(CONFIGURING_APP)
    done = subprocess.run(
        [str(MASTRACE), "run", "--instrument", "none", "--", "app.py"],
        capture_output=True, text=True, timeout=600, env=clean_env(), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / ".mastrace" / "segments").is_dir() and (tmp_path / "child-store" / "segments").is_dir()


@pytest.mark.parametrize(
    ("command", "says"),
    [
        (("--", "missing.py"), "no such Python file: missing.py"),
        (("--", "python", "missing.py"), "no such Python file: missing.py"),
        (("--", "python", "-m", "no_such_module_xyz"), "no module named 'no_such_module_xyz'"),
        (("--", "python", "-c", "pass"), "give python a script or -m MODULE"),
        (("--", "no-such-program-xyz"), "not a console script of this Python environment"),
        (("--instrument", "crewai", "--", "app.py"), "unknown integration(s) crewai"),
        (("--instrument", "openai", "--instrument", "bogus", "--", "app.py"), "unknown integration(s) bogus"),
        (("--store", "afile", "--", "app.py"), "--store afile: is a file, not a folder"),
        (("--otlp", "ftp://collector", "--", "app.py"), "--otlp 'ftp://collector': expected an http"),
        (("--service-name", "", "--", "app.py"), "--service-name '': expected a non-empty string"),
        ((), "nothing to run"),
    ],
)
def test_every_bad_input_is_one_line_and_exit_2(tmp_path: Path, command: tuple[str, ...], says: str) -> None:
    """Missing files or modules, unknown integrations, bad option values: one line, exit 2."""
    (tmp_path / "app.py").write_text("raise SystemExit('the program must not run')\n")
    (tmp_path / "afile").write_text("")
    done = subprocess.run(
        [str(MASTRACE), "run", *command], capture_output=True, text=True, timeout=600, env=clean_env(),
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and says in lines[0], done.stderr


def test_instrument_is_repeatable_and_comma_separated(tmp_path: Path) -> None:
    """`--instrument openai --instrument anthropic,none` turns on both SDKs' integrations."""
    (tmp_path / "app.py").write_text(
        "import wrapt\n"
        "from anthropic.resources.messages import Messages\n"
        "from openai.resources.chat.completions import Completions\n"
        "print([isinstance(c.__dict__['create'], wrapt.FunctionWrapper) for c in (Completions, Messages)])\n"
    )
    command = [
        str(MASTRACE),
        "run",
        "--instrument",
        "openai",
        "--instrument",
        "anthropic,none",
        "--",
        "app.py",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=clean_env(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[True, True]"
    plain = subprocess.run(
        [str(MASTRACE), "run", "--instrument", "none", "--", "app.py"],
        capture_output=True, text=True, timeout=600, env=clean_env(), cwd=tmp_path,
    )  # fmt: skip
    assert plain.stdout.strip() == "[False, False]"


def test_the_program_starts_without_the_reader_side_loaded(tmp_path: Path) -> None:
    """`mastrace run` loads neither DuckDB nor the analysis before the program runs (start-up cost)."""
    (tmp_path / "probe.py").write_text(
        "import sys\n"
        "print(','.join(m for m in ('duckdb', 'mastrace.analysis') if m in sys.modules) or 'none')\n"
    )
    done = _run(tmp_path, "--", "probe.py")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "none"


def test_integrations_load_only_when_the_program_imports_their_package(tmp_path: Path) -> None:
    """A program that imports no LLM SDK loads neither the SDKs nor their integrations; one that
    imports `openai` late (inside a function) gets it instrumented at that import."""
    (tmp_path / "plain.py").write_text(
        "import sys\n"
        "names = ('openai', 'anthropic', 'massgen', 'mastrace.integrations.openai',\n"
        "         'mastrace.integrations.anthropic', 'mastrace.integrations.massgen')\n"
        "print(','.join(m for m in names if m in sys.modules) or 'none')\n"
    )
    (tmp_path / "late.py").write_text(
        "import sys\n"
        "def main():\n"
        "    import wrapt\n"
        "    from openai.resources.chat.completions import Completions\n"
        "    print(isinstance(Completions.__dict__['create'], wrapt.FunctionWrapper),\n"
        "          'anthropic' in sys.modules)\n"
        "main()\n"
    )
    plain = subprocess.run(
        [str(MASTRACE), "run", "--store", str(tmp_path / "store"), "--", "plain.py"],
        capture_output=True, text=True, timeout=120, env=clean_env(), cwd=tmp_path,
    )  # fmt: skip
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.strip() == "none"
    late = subprocess.run(
        [str(MASTRACE), "run", "--store", str(tmp_path / "store"), "--", "late.py"],
        capture_output=True, text=True, timeout=120, env=clean_env(), cwd=tmp_path,
    )  # fmt: skip
    assert late.returncode == 0, late.stderr
    assert late.stdout.strip() == "True False"


def test_the_service_name_is_the_programs(tmp_path: Path) -> None:
    """Without --service-name the spans carry the program's name (the script's, the module's, the
    console script's), not `mastrace`; --service-name still wins."""
    (tmp_path / "app.py").write_text(SCRIPT)
    (tmp_path / "appmod.py").write_text(SCRIPT)
    for command in (("app.py", "0"), ("python", "-m", "appmod", "0")):
        done = subprocess.run(
            [str(MASTRACE), "run", "--store", str(tmp_path / "store"), "--instrument", "none",
             "--", *command],
            capture_output=True, text=True, timeout=120, env=clean_env(), cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    named = subprocess.run(
        [str(MASTRACE), "run", "--store", str(tmp_path / "store"), "--service-name", "chosen",
         "--instrument", "none", "--", "app.py", "0"],
        capture_output=True, text=True, timeout=120, env=clean_env(), cwd=tmp_path,
    )  # fmt: skip
    assert named.returncode == 0, named.stderr
    done = subprocess.run(
        [str(MASTRACE), "query", "--store", str(tmp_path / "store"), "--format", "json",
         "SELECT service_name FROM records ORDER BY start_timestamp"],
        capture_output=True, text=True, timeout=120, env=clean_env(),
    )  # fmt: skip
    assert [r["service_name"] for r in json.loads(done.stdout)] == ["app", "appmod", "chosen"]
