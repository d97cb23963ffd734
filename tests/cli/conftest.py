"""Fixtures for the CLI tests: a store written by the demo, and the installed `mastrace` command.

The demo runs twice into one store (a different model the second time), once per test session;
every test drives the console script that the package installs, in a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

    from mastrace.serve import IntakeServer

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "coordination_demo.py"
BIN = Path(sys.executable).parent
MASTRACE = BIN / "mastrace"
_CLEARED_PREFIXES = ("MASTRACE_", "OTEL_", "LOGFIRE_")

Runner = Callable[..., subprocess.CompletedProcess[str]]


def clean_env() -> dict[str, str]:
    """The test process environment without mastrace, OpenTelemetry or Logfire settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith(_CLEARED_PREFIXES) and k != "TRACEPARENT"}


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding two demo runs: `previous` with model sim-large, `latest` with sim-small."""
    store = tmp_path_factory.mktemp("demo") / "store"
    for model, seed in (("sim-large", "1"), ("sim-small", "2")):
        subprocess.run(
            [sys.executable, str(DEMO), "--store", str(store), "--model", model, "--seed", seed],
            check=True,
            capture_output=True,
            text=True,
            env=clean_env(),
            timeout=600,
        )
    return store


def make_runner(cwd: Path) -> Runner:
    """A function running the installed `mastrace` console script in `cwd`."""
    assert MASTRACE.exists(), f"the console script is not installed at {MASTRACE}"

    def run(*args: str, store: Path | None = None) -> subprocess.CompletedProcess[str]:
        extra = ["--store", str(store)] if store is not None else []
        return subprocess.run(
            [str(MASTRACE), *args, *extra],
            capture_output=True,
            text=True,
            cwd=cwd,
            env=clean_env(),
            timeout=600,
        )

    return run


@pytest.fixture
def mastrace_cli(tmp_path: Path) -> Runner:
    """Run the installed `mastrace` console script (in `tmp_path`); returns the completed process."""
    return make_runner(tmp_path)


def local_and_source(run: Runner, store_and_source: tuple[Path, str], *args: str) -> tuple[str, str]:
    """The output of one command over a local store and over a `--source` holding the same spans."""
    store, source = store_and_source
    local = run(*args, "--store", str(store))
    remote = run(*args, "--source", source)
    assert local.returncode == 0, local.stderr
    assert remote.returncode == 0, remote.stderr
    assert remote.stderr == ""
    return local.stdout, remote.stdout


def without_generated(text: str) -> str:
    """A report without its `Generated:` line (the time it was written)."""
    return "\n".join(line for line in text.splitlines() if "Generated" not in line)


@pytest.fixture
def run(mastrace_cli: Runner) -> Runner:
    """`mastrace_cli` by a shorter name."""
    return mastrace_cli


@pytest.fixture(scope="module")
def module_cli(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    """Like `mastrace_cli`, shared by the tests of one module (for outputs several tests read)."""
    return make_runner(tmp_path_factory.mktemp("cli"))


# --- the browser tests' fixtures (`mastrace serve`'s UI in Debian's Chromium) ---------------------
@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless, driven by Playwright (one per test module)."""
    from playwright.sync_api import sync_playwright

    from .test_view import FLAGS, chromium

    executable = chromium()
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=executable, args=list(FLAGS), headless=True)
        yield launched
        launched.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[IntakeServer]:
    """`mastrace serve`'s HTTP side (intake and UI) on a free port over an empty store."""
    from mastrace.serve import start_intake

    running = start_intake(tmp_path / "store", http_port=0, grpc_port=None)
    yield running
    running.stop()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh browser page (its own context) of 1400×900."""
    # Playwright's `wait_for_function` evaluates its text, which the pages' Content-Security-Policy
    # forbids: these tests see past it (test_serve_hostile_browser checks the policy itself).
    context = browser.new_context(viewport={"width": 1400, "height": 900}, bypass_csp=True)
    opened = context.new_page()
    yield opened
    context.close()


# A command whose peak RSS a test reads runs under a small Python parent that reports it: a child forked
# straight from pytest (hundreds of MB late in the suite) inherits pytest's high-water mark in `ru_maxrss`.
_MEASURE = (
    "import resource, subprocess, sys\n"
    "code = subprocess.call(sys.argv[1:])\n"
    "sys.stderr.write('@@maxrss %d' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(code)\n"
)


def run_measured(argv: list[str], *, kill_after: float = 600) -> tuple[int, str, int, float]:
    """Exit status, stderr, peak RSS (bytes) and seconds of `argv` (killed, with its children, after
    `kill_after` seconds)."""
    import signal
    import threading
    import time

    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-c", _MEASURE, *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
        start_new_session=True,
    )
    killer = threading.Timer(kill_after, os.killpg, (process.pid, signal.SIGKILL))
    killer.start()
    try:
        _, stderr = process.communicate()
    finally:
        killer.cancel()
    stderr, _, peak = stderr.rpartition("@@maxrss ")
    return process.returncode, stderr, int(peak or 0) * 1024, time.monotonic() - started


def mcp_session(store: Path, body: Callable[[Any], Any], *extra: str, cwd: Path | None = None) -> Any:
    """Run the coroutine function `body` in an official `mcp` client session with `mastrace mcp --store
    store *extra` in a child process (its stderr in `<store>-mcp.log` beside the store)."""
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=str(MASTRACE), args=["mcp", "--store", str(store), *extra], env=clean_env(), cwd=cwd
    )

    async def main() -> Any:
        with (store.parent / f"{store.name}-mcp.log").open("a") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return await body(session)

    return anyio.run(main)
