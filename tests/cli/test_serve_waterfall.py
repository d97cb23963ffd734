"""`mastrace serve`'s pages as a Jaeger or Logfire user reads them, in Debian's Chromium: the run's
time axis, colours by kind and legend, inline model/tokens/cost/outcome, collapsible subtrees, the
run summary, number formatting, wrapping details, the true root of a run in progress, incremental
polls that never overlap, the report as HTML, the diff's 404, and screenshots of each page."""

from __future__ import annotations

import itertools
import json
import re
import time

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from playwright.sync_api import Page, Route

import mastrace
from mastrace.serve import IntakeServer
from mastrace.store import LocalStoreExporter

from .test_serve_browser import ARTIFACTS, url, write_here

ROUND_USAGE = {
    "massgen.agent_id": "agent_a",
    "massgen.outcome": "answer",
    "massgen.usage.input": 1234,
    "massgen.usage.output": 56,
    "massgen.usage.cost": 0.00018,
}
CONFIG = {"agents": {"agent_a": {"prompt": "x" * 400, "nested": {"deeper": {"deepest": ["y" * 300]}}}}}


def build_run(tracer: mastrace.Tracer) -> None:
    """A session with two rounds (one priced, one of unknown cost), LLM and tool calls, an event."""
    with tracer.span("agent.agent_a.round_0", attributes=ROUND_USAGE):
        with tracer.span(
            "llm.openai.stream",
            attributes={
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 1234,
                "gen_ai.usage.output_tokens": 56,
                "ratio": 0.026272499999999997,
                "mastrace.config": CONFIG,
            },
        ):
            time.sleep(0.02)
        with tracer.span("Tool execution: mcp__search__q"), tracer.span("mcp.search.q"):
            time.sleep(0.01)
    tracer.event("Coordination event: voting_started")
    with tracer.span(
        "agent.agent_b.round_0",
        attributes={"massgen.agent_id": "agent_b", "massgen.usage.input": 10, "massgen.usage.output": 2,
                    "massgen.usage.cost": 0.0, "mastrace.cost.unknown": True,
                    "mastrace.cost.unknown_models": ["house-model"]},
    ):  # fmt: skip
        time.sleep(0.01)


def open_run(server: IntakeServer, page: Page) -> str:
    trace_id = write_here(server.intake.store, build_run)
    page.goto(url(server, f"/runs/{trace_id}"))
    page.wait_for_selector("#status:has-text('7 span(s), live')")
    return trace_id


def test_time_axis_has_round_ticks_and_gridlines(server: IntakeServer, page: Page) -> None:
    """The axis starts at 0 and labels evenly spaced durations; each tick has a gridline."""
    open_run(server, page)
    labels = page.locator("#ticks .tick").all_text_contents()
    assert labels[0] == "0" and len(labels) >= 3
    assert all(re.fullmatch(r"[\d.]+ (µs|ms|s)", label) for label in labels[1:]), labels
    assert page.locator("#spacer .gridline").count() == len(labels)
    lefts = page.eval_on_selector_all("#ticks .tick", "ts => ts.map(t => parseFloat(t.style.left))")
    steps = [b - a for a, b in itertools.pairwise(lefts)]
    # evenly spaced (positions are rounded in the style text, so steps differ in their last digit)
    assert steps[0] > 0 and max(steps) - min(steps) <= 0.01 * steps[0], steps


def test_rows_are_coloured_by_kind_with_a_legend(server: IntakeServer, page: Page) -> None:
    """Session, agent round, LLM, tool/MCP and event rows each get their own colour, named in the legend."""
    open_run(server, page)
    kinds = dict(
        page.eval_on_selector_all(
            ".row", "rows => rows.map(r => [r.querySelector('.label').textContent, r.dataset.kind])"
        )
    )
    assert kinds["coordination.session"] == "session" and kinds["agent.agent_a.round_0"] == "agent"
    assert kinds["llm.openai.stream"] == "llm" and kinds["mcp.search.q"] == "tool"
    assert kinds["Coordination event: voting_started"] == "event"
    colours = {
        kind: page.eval_on_selector(
            f".row[data-kind='{kind}'] .bar", "b => getComputedStyle(b).backgroundColor"
        )
        for kind in ("session", "agent", "llm", "tool", "event")
    }
    assert len(set(colours.values())) == 5, colours
    legend = page.locator("#legend").text_content() or ""
    assert all(word in legend for word in ("session", "agent round", "LLM", "tool / MCP", "event", "error"))


def test_rows_show_model_tokens_cost_and_outcome_inline(server: IntakeServer, page: Page) -> None:
    """An LLM row shows its model and tokens; a round its tokens, cost (significant digits) and outcome;
    a round whose cost is unknown shows "—" with the model, never $0."""
    open_run(server, page)

    def keys(label: str) -> str:
        return page.locator(f".row:has(.label:text-is('{label}')) .keys").text_content() or ""

    assert keys("llm.openai.stream") == "gpt-4o · 1,234 in / 56 out"
    assert keys("agent.agent_a.round_0") == "1,234 in / 56 out · $0.00018 · answer"
    assert keys("agent.agent_b.round_0") == "10 in / 2 out · — (no price for house-model)"


def test_summary_header_states_start_duration_agents_tokens_cost_and_errors(
    server: IntakeServer, page: Page
) -> None:
    """The header adds up the run: its start, duration, agents, tokens of its rounds, cost and errors."""
    open_run(server, page)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", page.text_content("#s-start") or "")
    assert re.fullmatch(r"[\d.]+ ms", page.text_content("#s-duration") or "")
    assert page.text_content("#s-spans") == "7"
    assert page.text_content("#s-agents") == "2 (agent_a, agent_b)"
    assert page.text_content("#s-tokens") == "1,244 / 58"
    # one round has no known price: the known part and the unpriced model
    assert page.text_content("#s-cost") == "$0.00018 + unpriced: house-model"
    assert page.text_content("#s-errors") == "0"


def _priced_call(tracer: mastrace.Tracer, cost: float) -> None:
    """An instrumented SDK call: its price is in its usage record, not under `massgen.*`."""
    usage = {"input_tokens": 100, "output_tokens": 10, "cost": cost}
    attributes = {"gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 10, "mastrace.usage": usage}
    with tracer.span("llm.openai.chat", attributes=attributes):
        pass


def test_sdk_calls_show_their_price_and_a_run_of_them_adds_up_once(server: IntakeServer, page: Page) -> None:
    """A priced SDK call shows its cost on its row. A run of such calls alone totals them; a run whose
    rounds carry the cost totals the rounds, so a call inside a round is not counted twice."""

    def calls_only(tracer: mastrace.Tracer) -> None:
        _priced_call(tracer, 0.001)
        _priced_call(tracer, 0.0005)

    def calls_in_a_round(tracer: mastrace.Tracer) -> None:
        with tracer.span("agent.agent_a.round_0", attributes=ROUND_USAGE):
            _priced_call(tracer, 0.00018)

    for build, spans, total, tokens in (
        (calls_only, 3, "$0.0015", "200 / 20"),
        (calls_in_a_round, 3, "$0.00018", "1,234 / 56"),
    ):
        trace_id = write_here(server.intake.store, build)
        page.goto(url(server, f"/runs/{trace_id}"))
        page.wait_for_selector(f"#status:has-text('{spans} span(s), live')")
        rows = page.locator(".row:has(.label:text-is('llm.openai.chat')) .keys").all_text_contents()
        assert rows and all(re.search(r" · \$0\.\d+", text) for text in rows), rows
        assert (page.text_content("#s-cost"), page.text_content("#s-tokens")) == (total, tokens)


def test_subtrees_collapse_and_expand(server: IntakeServer, page: Page) -> None:
    """The toggle of a round hides its calls and shows them again; collapse all keeps the top level."""
    open_run(server, page)
    toggle = ".row:has(.label:text-is('agent.agent_a.round_0')) .tog"
    page.click(toggle)
    labels = page.locator(".row .label").all_text_contents()
    assert "llm.openai.stream" not in labels and "agent.agent_a.round_0" in labels
    assert page.text_content(toggle) == "▸"
    page.click(toggle)
    assert "mcp.search.q" in page.locator(".row .label").all_text_contents()
    page.click("#collapse-all")
    assert page.locator(".row").count() == 4  # the session, two rounds and the event
    page.click("#expand-all")
    assert page.locator(".row").count() == 7


def test_details_format_numbers_and_wrap_nested_json(server: IntakeServer, page: Page) -> None:
    """A float shows without binary noise (exact on hover) and nested config wraps inside the panel."""
    open_run(server, page)
    page.click(".row:has(.label:text-is('llm.openai.stream'))")
    page.wait_for_selector("#details tr[data-key='ratio']")
    ratio = page.locator("#details tr[data-key='ratio'] td").nth(1)
    assert ratio.text_content() == "0.0262725"
    assert ratio.locator("span").get_attribute("title") == "0.026272499999999997"
    assert page.eval_on_selector("#details", "d => d.scrollWidth <= d.clientWidth + 1")
    assert "gpt-4o" in (page.text_content("#details tr[data-key='gen_ai.request.model']") or "")


def test_a_run_in_progress_shows_its_true_root(server: IntakeServer, page: Page) -> None:
    """Children of a root that has not ended hang under a placeholder, not as roots; the root replaces it."""
    provider = TracerProvider(resource=Resource.create({"service.name": "in-progress"}))
    provider.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(server.intake.store)))
    tracer = provider.get_tracer("test")
    root = tracer.start_span("coordination.session")
    ctx = trace.set_span_in_context(root)
    for name in ("agent.a.round_0", "agent.b.round_0"):
        tracer.start_span(name, context=ctx).end()
    trace_id = f"{root.get_span_context().trace_id:032x}"
    page.goto(url(server, f"/runs/{trace_id}"))
    page.wait_for_selector(".row.pending")
    depths = page.eval_on_selector_all(
        ".row",
        "rows => rows.map(r => [r.classList.contains('pending'),"
        " r.querySelector('.name').style.paddingLeft])",
    )
    assert depths[0][0] is True and all(not pending for pending, _ in depths[1:])
    assert {left for _, left in depths[1:]} == {"1.35rem"}  # one level below the placeholder
    assert "so far" in (page.text_content("#s-duration") or "")
    root.end()
    provider.shutdown()
    page.wait_for_selector(".row:has(.label:text-is('coordination.session'))", timeout=60_000)
    assert page.locator(".row.pending").count() == 0


def test_polls_ask_only_for_what_changed_and_never_overlap(server: IntakeServer, page: Page) -> None:
    """With a slow server, the page never has two span requests in flight, and later polls carry
    `since_us` (only what ended since its newest span)."""
    trace_id = write_here(server.intake.store, build_run)
    seen: list[str] = []
    in_flight = {"now": 0, "max": 0}

    def slow(route: Route) -> None:
        in_flight["now"] += 1
        in_flight["max"] = max(in_flight["max"], in_flight["now"])
        seen.append(route.request.url)
        page.wait_for_timeout(2500)  # longer than the polling interval
        route.continue_()
        in_flight["now"] -= 1

    page.route(re.compile(r".*/api/runs/[^/]+/spans(\?.*)?$"), slow)
    page.goto(url(server, f"/runs/{trace_id}"))
    page.wait_for_function("() => document.querySelectorAll('.row').length === 7", timeout=60_000)
    deadline = time.monotonic() + 60
    while len(seen) < 3 and time.monotonic() < deadline:
        page.wait_for_timeout(500)
    page.unroute_all(behavior="ignoreErrors")
    assert len(seen) >= 3 and in_flight["max"] == 1
    assert "since_us=" not in seen[0] and all("since_us=" in u for u in seen[1:])


def test_the_report_is_an_html_page(server: IntakeServer, page: Page) -> None:
    """`/runs/<id>/report` answers HTML: headings, tables, and links back to the run and the runs."""
    trace_id = write_here(server.intake.store, build_run)
    reply = page.goto(url(server, f"/runs/{trace_id}/report"))
    assert reply is not None and reply.headers["content-type"].startswith("text/html")
    assert page.text_content("#report h1") == "Trace Analysis Report"
    assert page.locator("#report table").count() >= 3
    page.click("text=waterfall")
    page.wait_for_selector("#status:has-text('live')")
    assert page.url.endswith(f"/runs/{trace_id}")


def test_a_diff_of_a_run_that_is_not_there_is_a_404(server: IntakeServer, page: Page) -> None:
    """A diff link naming an unknown run answers 404 with the reason, not a page with an error title."""
    trace_id = write_here(server.intake.store, build_run)
    for query in (
        f"a={trace_id}&b=ffffffffffffffffffffffffffffffff",
        "a=zzz&b=latest",
        "a=previous&b=latest",
    ):
        reply = page.goto(url(server, f"/diff?{query}"))
        assert reply is not None and reply.status == 404, query
        assert (page.text_content("body") or "").startswith("no diff: ")


def test_screenshots_of_the_pages(server: IntakeServer, page: Page) -> None:
    """The runs list, a waterfall with a span selected, the report and a diff are drawn (PNG kept)."""
    ids = [write_here(server.intake.store, build_run) for _ in range(2)]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shots = {
        "serve-runs.png": "/",
        "serve-run.png": f"/runs/{ids[1]}",
        "serve-report.png": f"/runs/{ids[1]}/report",
        "serve-diff.png": f"/diff?a={ids[0]}&b={ids[1]}",
    }
    for name, path in shots.items():
        page.goto(url(server, path))
        page.wait_for_load_state("networkidle")
        if name == "serve-run.png":
            page.click(".row:has(.label:text-is('llm.openai.stream'))")
            page.wait_for_selector("#details tr[data-key='gen_ai.request.model']")
        shot = ARTIFACTS / name
        page.screenshot(path=str(shot))
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    assert json.loads(page.evaluate("JSON.stringify(document.title)")) == "mastrace diff"
