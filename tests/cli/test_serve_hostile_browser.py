"""The UI never fetches or runs what a span says: a run whose every text is hostile (Markdown images
and links, raw HTML, scripts, control characters) opened in Debian's Chromium on every page, and no
request leaves for another origin; every answer carries the headers that keep it so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page

from hostile_run import ELSEWHERE, write_hostile_store
from mastrace.serve import IntakeServer, start_intake


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[tuple[IntakeServer, str]]:
    store = tmp_path / "store"
    trace_id = write_hostile_store(store)
    running = start_intake(store, http_port=0, grpc_port=None)
    yield running, trace_id
    running.stop()


def _headers_hold(headers: dict[str, str], where: str) -> None:
    assert headers.get("x-content-type-options") == "nosniff", where
    assert headers.get("x-frame-options") == "DENY", where
    policy = headers.get("content-security-policy", "")
    assert "frame-ancestors 'none'" in policy and "default-src 'none'" in policy, (where, policy)
    assert "unsafe-inline" not in policy.split("script-src")[-1].split(";")[0], (where, policy)


def test_no_page_fetches_from_another_origin(hostile: tuple[IntakeServer, str], browser: Browser) -> None:
    """The runs list, the waterfall with a span's details, the report, the static view and the diff load
    nothing but this server's answers, and every page answer carries a strict policy."""
    server, trace_id = hostile
    origin = f"http://127.0.0.1:{server.http_port}"
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    requested: list[str] = []
    context.on("request", lambda request: requested.append(request.url))
    page: Page = context.new_page()
    answers: dict[str, dict[str, str]] = {}
    page.on("response", lambda response: answers.__setitem__(response.url, response.headers))
    page.on("dialog", lambda dialog: pytest.fail(f"a span opened a dialog: {dialog.message}"))
    try:
        page.goto(origin + "/")
        page.wait_for_selector(f"tr.run[data-trace-id='{trace_id}']")
        page.goto(f"{origin}/runs/{trace_id}")
        page.wait_for_selector(".row:has-text('round_0')")
        for row in range(page.locator(".row").count()):  # every span's details
            page.locator(".row").nth(row).click()
            page.wait_for_selector("#details tr")
        for path in (
            f"/runs/{trace_id}/report",
            f"/runs/{trace_id}/view",
            f"/diff?a={trace_id}&b={trace_id}",
        ):
            page.goto(origin + path)
            page.wait_for_load_state("networkidle")
        report_text = ""
        page.goto(f"{origin}/runs/{trace_id}/report")
        report_text = page.inner_text("#report")
        images = page.eval_on_selector_all("#report img, #report a[href*='evil']", "els => els.length")
    finally:
        context.close()
    elsewhere = [url for url in requested if not url.startswith(origin + "/") and not url.startswith("data:")]
    assert elsewhere == [], elsewhere
    assert ELSEWHERE in report_text and images == 0  # the Markdown shows as text
    assert len(answers) >= 8
    for url, headers in answers.items():
        _headers_hold(headers, url)


def test_every_answer_carries_the_safety_headers(hostile: tuple[IntakeServer, str]) -> None:
    """API, static files, not-found, refused and OTLP answers all say nosniff, DENY and a policy."""
    server, trace_id = hostile
    origin = f"http://127.0.0.1:{server.http_port}"
    with httpx.Client(base_url=origin, timeout=60) as client:
        answers = {
            "api": client.get("/api/runs"),
            "spans": client.get(f"/api/runs/{trace_id}/spans"),
            "static": client.get("/static/ui.js"),
            "missing": client.get("/no/such/page"),
            "refused": client.get("/api/runs", headers={"Host": "evil.invalid"}),
            "intake": client.post(
                "/v1/traces", content=b"", headers={"Content-Type": "application/x-protobuf"}
            ),
            "health": client.get("/health"),
            "query": client.post("/v2/query", json={"sql": "SELECT 1"}),
        }
    for name, answer in answers.items():
        _headers_hold(dict(answer.headers), name)
    assert answers["refused"].status_code == 403 and answers["static"].status_code == 200
