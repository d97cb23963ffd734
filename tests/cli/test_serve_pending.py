"""Pending spans in `mastrace serve`'s pages, in Debian's Chromium: a live run's rounds show by name
while they run (no "still running" placeholder), the runs list marks runs in progress, and a run
killed midway shows its open spans as unfinished."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page

from live_agents import live_run
from mastrace.serve import IntakeServer

from .test_serve_browser import url

ROUNDS = ("agent.agent_a.round_0", "agent.agent_b.round_0", "agent.agent_c.round_0")
WAIT_MS = 120_000  # generous: a loaded machine, never a speed requirement


def _row(name: str, state: str = "") -> str:
    return f".row{'.' + state if state else ''}:has(.label:text-is('{name}'))"


def test_a_live_runs_started_rounds_show_by_name_then_end(
    server: IntakeServer, page: Page, tmp_path: Path
) -> None:
    """Three agents' open rounds are rows named after them, marked running, nested under the open
    session; once they end the same rows are plain spans."""
    with live_run(server.intake.store, tmp_path / "run") as run:
        page.goto(url(server, f"/runs/{run.trace_id}"))
        for name in ROUNDS:
            page.wait_for_selector(_row(name, "running"), timeout=WAIT_MS)
        assert page.locator(".row.pending").count() == 0  # no anonymous placeholder
        session = page.locator(_row("coordination.session", "running"))
        assert session.locator(".state").text_content() == "running"
        depth = (
            page.locator(_row("agent.agent_b.round_0")).locator(".name").evaluate("n => n.style.paddingLeft")
        )
        assert depth == "1.35rem"  # one level below the session
        assert "so far" in (page.text_content("#s-duration") or "")
        page.click(_row("agent.agent_b.round_0"))
        page.wait_for_selector("#details tr[data-key='massgen.agent_id']", timeout=WAIT_MS)
        assert "agent_b" in (page.text_content("#details tr[data-key='massgen.agent_id']") or "")
        run.release()
    page.wait_for_function("() => !document.querySelector('.row.open')", timeout=WAIT_MS)
    for name in ROUNDS:
        assert page.locator(_row(name)).count() == 1


def test_the_runs_list_marks_runs_in_progress_and_unfinished(
    server: IntakeServer, page: Page, tmp_path: Path
) -> None:
    """The runs list marks a live run as in progress, and as unfinished once its process was killed;
    its run page then shows the open spans as unfinished."""
    with live_run(server.intake.store, tmp_path / "run") as run:
        page.goto(url(server, "/"))
        row = f"tr.run[data-trace-id='{run.trace_id}']"
        page.wait_for_selector(f"{row} .state.running", timeout=WAIT_MS)
        assert page.text_content(f"{row} .state") == "in progress"
        assert page.text_content(f"{row} td.name") == "coordination.sessionin progress"
        run.kill()
    page.wait_for_selector(f"{row} .state.unfinished", timeout=WAIT_MS)
    page.goto(url(server, f"/runs/{run.trace_id}"))
    for name in ("coordination.session", *ROUNDS):
        page.wait_for_selector(_row(name, "unfinished"), timeout=WAIT_MS)
    assert page.locator(".row.pending").count() == 0
