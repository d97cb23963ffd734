"""The exit hint: a process that made spans but never called `configure()` says so once on stderr,
and stays quiet when configured, disabled, silenced, under a test runner, or interactive."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SPANS = """
import mastrace
tracer = mastrace.get_tracer("app")
for i in range(3):
    with tracer.span("work"):
        tracer.event("Coordination event: tick")

@mastrace.instrument("agent.{name}.step")
def step(name):
    return name

step("a")
"""
HINT = (
    "mastrace: 7 span(s) were not recorded because mastrace.configure() was never called in this "
    "process; call it once at start (or run the program with `mastrace run -- ...`). "
    "Set MASTRACE_HINTS=0 to silence this."
)


def _env(**extra: str) -> dict[str, str]:
    """This environment without mastrace's variables nor pytest's marker (a plain user's shell)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MASTRACE_", "OTEL_", "LOGFIRE_")) and k != "PYTEST_CURRENT_TEST"
    }
    return {**env, **extra}


def _run(code: str, tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args, "-c", code] if args != ("-i",) else [sys.executable, "-i"],
        input=code if args == ("-i",) else None,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(**env),
        timeout=600,
    )


def test_spans_without_configure_give_one_hint_at_exit(tmp_path: Path) -> None:
    """Three spans, three events and an instrumented call without configure(): one line naming all seven."""
    done = _run(SPANS, tmp_path)
    assert done.returncode == 0
    assert done.stderr.splitlines() == [HINT]
    assert not (tmp_path / ".mastrace").exists()


@pytest.mark.parametrize(
    ("code", "env"),
    [
        (SPANS, {"MASTRACE_HINTS": "0"}),
        (SPANS, {"MASTRACE_DISABLED": "1"}),
        ("import mastrace\nmastrace.configure(local=False, console=False, exporters=[])\n" + SPANS, {}),
        (SPANS.replace("mastrace.get_tracer", "(mastrace.configure(), mastrace.get_tracer)[1]", 1), {}),
        ("import mastrace\nmastrace.get_tracer()\n", {}),
        ("import sys, types\nsys.modules['ipykernel'] = types.ModuleType('ipykernel')\n" + SPANS, {}),
    ],
    ids=[
        "silenced",
        "disabled",
        "configured-nowhere",
        "configured",
        "no-spans",
        "notebook",
    ],
)
def test_no_hint_when_configured_silenced_disabled_or_in_a_notebook(
    tmp_path: Path, code: str, env: dict[str, str]
) -> None:
    """Configured (even with no destination), silenced, disabled, spanless or in a kernel: no hint."""
    done = _run(code, tmp_path, **env)
    assert done.returncode == 0, done.stderr
    assert "was never called" not in done.stderr, done.stderr


def test_no_hint_in_an_interactive_interpreter(tmp_path: Path) -> None:
    """`python -i` (a REPL) gets no hint at exit."""
    done = _run(SPANS, tmp_path, "-i")
    assert "was never called" not in done.stderr


def test_no_hint_in_a_users_test_suite(tmp_path: Path) -> None:
    """A user's pytest run and `python -m unittest` run of code that never configures print no hint."""
    (tmp_path / "test_app.py").write_text(
        "import unittest\n"
        "def run():\n" + "".join(f"    {line}\n" for line in SPANS.strip().splitlines()) + "\n"
        "def test_app():\n    run()\n\n"
        "class AppTest(unittest.TestCase):\n    def test_app(self):\n        run()\n"
    )
    for args in (
        ("-m", "pytest", "-q", "-p", "no:cacheprovider", "test_app.py"),
        ("-m", "unittest", "test_app"),
    ):
        done = subprocess.run(
            [sys.executable, *args], capture_output=True, text=True, cwd=tmp_path, env=_env(), timeout=600
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "was never called" not in done.stdout + done.stderr, args


def test_spans_before_a_late_configure_are_counted_in_the_hint(tmp_path: Path) -> None:
    """Seven spans made before `configure()` are lost: one line says so and how many; spans after
    it (recorded) and after `shutdown()` are not counted."""
    code = "import mastrace\n" + SPANS + "\nmastrace.configure(local='store')\n" + SPANS.split("\n@")[0]
    code += "\nmastrace.shutdown()\n" + SPANS.split("\n@")[0]
    done = _run(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "mastrace: 7 span(s) were not recorded because they were created before mastrace.configure() was "
        "called; call it once at start, before any span (or run the program with `mastrace run -- ...`). "
        "Set MASTRACE_HINTS=0 to silence this."
    ]
    assert (tmp_path / "store").is_dir()
