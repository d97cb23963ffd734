"""Pending spans in `mastrace serve`'s pages, in Debian's Chromium: a live run's rounds show by name
while they run (no "still running" placeholder), the runs list marks runs in progress, and a run
killed midway shows its open spans as unfinished."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult
from playwright.sync_api import Page

from live_agents import live_run, wait_for
from mastrace.analysis import TraceStore
from mastrace.serve import IntakeServer
from mastrace.store import LocalStoreExporter
from seed_run import write_store

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


_READS_RECORDS = re.compile(r"\b(?:FROM|JOIN)\s+records\b", re.IGNORECASE)


def test_a_run_page_poll_reads_records_no_more_often_with_open_spans(
    server: IntakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The waterfall's poll finds which start records ended in the pass over `records` it makes anyway:
    with open spans in the run it runs as many statements over `records` as without."""
    store = server.intake.store
    seed = write_store(store)
    statements: list[str] = []
    for name in ("table", "execute", "relation"):
        original = getattr(TraceStore, name)

        def counted(self: TraceStore, sql: str, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            if _READS_RECORDS.search(sql):
                statements.append(sql)
            return _original(self, sql, *args, **kwargs)

        monkeypatch.setattr(TraceStore, name, counted)

    def poll() -> tuple[dict[str, Any], list[str]]:
        statements.clear()
        with urllib.request.urlopen(url(server, f"/api/runs/{seed.trace_id}/spans")) as reply:
            return json.loads(reply.read()), list(statements)

    before, plain = poll()
    assert before["open"] == [] and plain
    # Two spans of the run open now (one of them a round whose start record outlived its end) and a
    # new run's session, written as a live writer writes them.
    writer = LocalStoreExporter(store)
    tracer = TracerProvider().get_tracer("open")
    in_seed = trace.set_span_in_context(
        trace.NonRecordingSpan(
            trace.SpanContext(int(seed.trace_id, 16), 0x1234, is_remote=True, trace_flags=trace.TraceFlags(1))
        )
    )
    spans = [tracer.start_span(f"agent.agent_z.round_{i}", context=in_seed) for i in range(2)]
    assert writer.export_pending([*spans, tracer.start_span("coordination.session")]) == 3  # type: ignore[list-item]
    spans[1].end()
    assert writer.export([spans[1]]) == SpanExportResult.SUCCESS  # type: ignore[list-item]
    try:
        after, with_open = poll()
        assert [row["name"] for row in after["open"]] == ["agent.agent_z.round_0"]
        assert after["count"] == before["count"] + 1
        assert len(with_open) == len(plain), with_open
    finally:
        writer.shutdown()


def test_a_running_spans_bar_grows_between_answers_and_stops_when_it_ends(
    server: IntakeServer, page: Page, tmp_path: Path
) -> None:
    """While a round runs and the store does not change (the page's polls are answered 304), its bar
    still grows, to "now" on the page's clock set by the server's; once the round ends it stops."""
    fresh: list[str] = []  # answers of the spans API that brought data (not a 304)
    page.on("response", lambda r: fresh.append(r.url) if "/spans" in r.url and r.status == 200 else None)
    round_b = _row("agent.agent_b.round_0", "running")

    def width() -> float:
        return float(page.locator(round_b).locator(".bar").evaluate("b => b.getBoundingClientRect().width"))

    # The rounds start a second after the session: their bars are about half the run's width at first.
    with live_run(server.intake.store, tmp_path / "run", gap=1.0) as run:
        page.goto(url(server, f"/runs/{run.trace_id}"))
        page.wait_for_selector(round_b, timeout=WAIT_MS)
        deadline = time.monotonic() + WAIT_MS / 1000
        while True:  # until the bar grew while no answer brought data (the store's last flushes land first)
            answers, before = len(fresh), width()
            wait_for(lambda before=before: width() != before, "the running bar to change")
            after = width()
            if len(fresh) == answers:
                break
            assert time.monotonic() < deadline, "the store kept changing"
        assert after > before
        assert "so far" in (page.text_content("#s-duration") or "")
        run.release()
    page.wait_for_function("() => !document.querySelector('.row.open')", timeout=WAIT_MS)
    ended = _row("agent.agent_b.round_0")
    first = page.locator(ended).locator(".bar").evaluate("b => b.getBoundingClientRect().width")
    page.wait_for_timeout(1000)  # four growth ticks' time: an ended span's bar stays
    assert page.locator(ended).locator(".bar").evaluate("b => b.getBoundingClientRect().width") == first
