"""Records Logfire wrote look as Logfire shows them: `tree`, `view` and `analyze` show the formatted
message where the span name is a template; SQL keeps both columns."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mastrace.store import query

from .conftest import Runner, clean_env

WRITE = textwrap.dedent(
    """
    import sys, time, logfire, mastrace
    mastrace.configure(logfire=True, local=sys.argv[1], service_name="lf-messages")
    tracer = mastrace.get_tracer("lf")
    with tracer.span("coordination.session", attributes={"massgen.task": "t"}):
        template = "Agent restart: {agent_id} (reason: {reason})"
        with logfire.span(template, agent_id="agent_a", reason="new answer"):
            time.sleep(0.01)
        logfire.info("Chat Completion with {model!r}", model="gpt-x")
    mastrace.force_flush(timeout=10)
    logfire.force_flush()
    """
)


@pytest.fixture(scope="module")
def lf_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("lf") / "store"
    subprocess.run([sys.executable, "-c", WRITE, str(store)], check=True, env=clean_env(), timeout=600)
    return store


def test_sql_keeps_the_template_and_the_message(lf_store: Path) -> None:
    rows = {r["span_name"]: r["message"] for r in query("SELECT span_name, message FROM records", lf_store)}
    assert (
        rows["Agent restart: {agent_id} (reason: {reason})"] == "Agent restart: agent_a (reason: new answer)"
    )
    assert rows["Chat Completion with {model!r}"] == "Chat Completion with 'gpt-x'"


def test_tree_view_and_analyze_show_the_message(lf_store: Path, module_cli: Runner, tmp_path: Path) -> None:
    tree = module_cli("tree", "latest", store=lf_store)
    assert "Agent restart: agent_a (reason: new answer)" in tree.stdout
    assert "{agent_id}" not in tree.stdout
    view = tmp_path / "view.html"
    assert module_cli("view", "latest", "-o", str(view), store=lf_store).returncode == 0
    html = view.read_text()
    assert "Agent restart: agent_a (reason: new answer)" in html
    report = module_cli("analyze", "latest", "-o", "-", store=lf_store)
    assert report.returncode == 0, report.stderr
    assert "Agent restart: agent_a (reason: new answer)" in report.stdout
    assert "{agent_id}" not in report.stdout
