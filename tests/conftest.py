"""Shared fixtures: every test starts with mastrace unconfigured and a clean environment."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from opentelemetry import context as otel_context
from opentelemetry import propagate

from genai_peer import serve
from mastrace.integrations.anthropic import instrument_anthropic, uninstrument_anthropic
from mastrace.integrations.openai import instrument_openai, uninstrument_openai
from mastrace.setup import _config
from mastrace.tracing import _context
from mastrace.tracing._errors import reset_reported
from phoenix_server import Phoenix, run_phoenix
from version_sensitive import SELECTED

_ENV_PREFIXES = ("MASTRACE_", "OTEL_", "LOGFIRE_")
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--version-sensitive",
        action="store_true",
        help="run only the tests whose behaviour depends on the Python or DuckDB version "
        "(tests/version_sensitive.py): the suite on the other supported Pythons",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--version-sensitive"):
        return
    keep, drop = [], []
    for item in items:
        path = os.path.relpath(str(item.path), _ROOT).replace(os.sep, "/")
        (keep if path in SELECTED else drop).append(item)
    config.hook.pytest_deselected(items=drop)
    items[:] = keep


_ENV_NAMES = ("TRACEPARENT", "TRACESTATE")


@pytest.fixture(autouse=True)
def _reset_mastrace(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Reset global configuration, patched threads, env vars, the current span and the working directory
    around each test."""
    for name in list(os.environ):
        if name.startswith(_ENV_PREFIXES) or name in _ENV_NAMES:
            monkeypatch.delenv(name, raising=False)
    # mastrace's own suite asks for its internal errors to be raised; users' suites never see them.
    monkeypatch.setenv("MASTRACE_RAISE_INTERNAL", "1")
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
    _config.reset_for_tests()
    reset_reported()
    # logfire.configure() installs a global propagator of its own; later tests must not inherit it.
    textmap = propagate.get_global_textmap()
    # A span a test entered and ended elsewhere (a session opened on this thread and closed inside
    # asyncio.run(), as MassGen does) stays current on this thread: the next test starts without it.
    context_token = otel_context.attach(otel_context.get_current())
    yield
    otel_context.detach(context_token)
    propagate.set_global_textmap(textmap)
    _config.reset_for_tests()
    _context.unpatch_threads()
    reset_reported()


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    """A real Phoenix server on 127.0.0.1, shared by every test of the session that uses it."""
    yield from run_phoenix(tmp_path_factory.mktemp("phoenix"))


@pytest.fixture(scope="session")
def peer() -> Iterator[str]:
    """The loopback OpenAI- and Anthropic-compatible server of `genai_peer` (its base URL)."""
    with serve() as url:
        yield url


@pytest.fixture
def instrumented_llms() -> Iterator[None]:
    """`instrument_openai()` and `instrument_anthropic()` for the test."""
    assert instrument_openai() and instrument_anthropic()
    yield
    uninstrument_openai()
    uninstrument_anthropic()
