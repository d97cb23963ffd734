"""`mastrace serve`'s UI driven in Debian's Chromium through Playwright: runs written by another
process appear while the page is open, a span's attributes show on click (JSON as objects),
filters and deep links work, 10k-span traces render few rows, and span content never runs script.
A screenshot of the waterfall is kept in `.artifacts/` (or `$MASTRACE_TEST_ARTIFACTS`)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from playwright.sync_api import Page

import mastrace
from mastrace.serve import IntakeServer

from .conftest import ROOT, clean_env

XSS_NAME = '<img src=x onerror="window.__pwned=1">'
XSS_VALUE = "</script><script>window.__pwned=2</script>"
ARTIFACTS = Path(os.environ.get("MASTRACE_TEST_ARTIFACTS", ROOT / ".artifacts"))


def url(server: IntakeServer, path: str = "/") -> str:
    return f"http://127.0.0.1:{server.http_port}{path}"


WRITER = textwrap.dedent(
    """
    import sys
    import mastrace
    store, name = sys.argv[1], sys.argv[2]
    mastrace.configure(local=store, service_name="other-process")  # continues $TRACEPARENT if set
    tracer = mastrace.get_tracer("writer")
    with tracer.span(name, attributes={"massgen.agent_id": "agent_x"}) as span:
        pass
    mastrace.shutdown()
    print(format(span.span_context.trace_id, "032x"))
    """
)


def write_elsewhere(store: Path, name: str, traceparent: str | None = None) -> str:
    """Write a span from another process (continuing `traceparent` if given); returns its trace id."""
    env = clean_env()
    if traceparent is not None:
        env["TRACEPARENT"] = traceparent
    done = subprocess.run(
        [sys.executable, "-c", WRITER, str(store), name], capture_output=True, text=True, timeout=600, env=env
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def write_here(store: Path, build: object) -> str:
    mastrace.configure(local=store, service_name="ui-test")
    tracer = mastrace.get_tracer("ui-test")
    with tracer.span("coordination.session", attributes={"massgen.task": "browser"}) as root:
        build(tracer)  # type: ignore[operator]
    mastrace.shutdown()
    assert root.span_context is not None
    return f"{root.span_context.trace_id:032x}"


def test_a_run_written_by_another_process_appears_while_the_page_is_open(
    server: IntakeServer, page: Page
) -> None:
    """The runs list picks up a run another process writes, without a reload, and links to it."""
    page.goto(url(server))
    page.wait_for_selector("#status:has-text('0 run(s), live')")
    assert "No runs yet" in (page.text_content("#empty") or "")
    trace_id = write_elsewhere(server.intake.store, "coordination.session")
    page.wait_for_selector(f"tr.run[data-trace-id='{trace_id}']", timeout=60_000)
    # The link opens the run's live waterfall.
    page.click(f"tr.run[data-trace-id='{trace_id}'] a")
    page.wait_for_selector(".row:has-text('coordination.session')")


def test_spans_that_end_while_the_waterfall_is_open_appear_without_reload(
    server: IntakeServer, page: Page
) -> None:
    """A span another process ends in the open run appears in its waterfall without a reload."""
    carrier: dict[str, str] = {}

    def build(tracer: mastrace.Tracer) -> None:
        with tracer.span("agent.agent_a.round_0"):
            carrier.update(mastrace.inject_env())

    trace_id = write_here(server.intake.store, build)
    page.goto(url(server, f"/runs/{trace_id}"))
    page.wait_for_selector(".row:has-text('agent.agent_a.round_0')")
    write_elsewhere(server.intake.store, "late.span", carrier["TRACEPARENT"])
    page.wait_for_selector(".row:has-text('late.span')", timeout=60_000)
    assert page.text_content("#status") == "3 span(s), live"


def test_clicking_a_span_shows_its_attributes_with_json_as_objects(server: IntakeServer, page: Page) -> None:
    """A click shows the span's attributes, JSON values as nested tables, and a deep link to it."""

    def build(tracer: mastrace.Tracer) -> None:
        with tracer.span(
            "agent.agent_a.round_0",
            attributes={
                "massgen.agent_id": "agent_a",
                "config": {"model": "m-1", "tools": ["search", "calc"]},
            },
        ):
            pass

    trace_id = write_here(server.intake.store, build)
    page.goto(url(server, f"/runs/{trace_id}"))
    page.click(".row:has-text('agent.agent_a.round_0')")
    page.wait_for_selector("#details tr[data-key='massgen.agent_id']")
    assert "agent_a" in page.text_content("#details tr[data-key='massgen.agent_id']")  # type: ignore[operator]
    config = page.locator("#details tr[data-key='config']")
    # A JSON object is a nested table of its keys, not a string of JSON.
    assert config.locator("details.json .jt-key").all_text_contents()[:2] == ["model", "tools"]
    assert "selected" in (page.get_attribute(".row:has-text('agent.agent_a.round_0')", "class") or "")
    span_id = page.get_attribute(".row.selected", "data-span-id")
    assert page.url.endswith(f"#span={span_id}")  # a deep link to the selected span
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "serve-waterfall.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_filters_by_agent_round_errors_text_and_attribute_value(server: IntakeServer, page: Page) -> None:
    """The agent, round, errors, name and attribute-value filters each narrow the rows."""

    def build(tracer: mastrace.Tracer) -> None:
        for agent in ("agent_a", "agent_b"):
            for n in (0, 1):
                with (
                    tracer.span(f"agent.{agent}.round_{n}"),
                    tracer.span(
                        f"llm.openai.stream {agent} {n}",
                        attributes={"gen_ai.request.model": f"model-{agent}"},
                    ),
                ):
                    pass
        with pytest.raises(ValueError), tracer.span("agent.agent_b.round_2"):
            raise ValueError("failed round")

    trace_id = write_here(server.intake.store, build)
    page.goto(url(server, f"/runs/{trace_id}"))
    page.wait_for_selector("#status:has-text('10 span(s), live')")

    def names() -> list[str]:
        return sorted(page.locator(".row .label").all_text_contents())

    page.select_option("#agent", "agent_a")
    assert names() == sorted(
        [
            "agent.agent_a.round_0",
            "agent.agent_a.round_1",
            "llm.openai.stream agent_a 0",
            "llm.openai.stream agent_a 1",
        ]
    )
    page.select_option("#round", "1")
    assert names() == ["agent.agent_a.round_1", "llm.openai.stream agent_a 1"]
    page.select_option("#agent", "")
    page.select_option("#round", "")
    page.check("#errors")
    assert names() == ["agent.agent_b.round_2"]
    page.uncheck("#errors")
    page.fill("#text", "llm.")
    assert len(names()) == 4
    page.fill("#text", "")
    page.fill("#attr", "model-agent_b")
    page.press("#attr", "Enter")
    page.wait_for_function("document.querySelectorAll('.row').length === 2")
    assert names() == ["llm.openai.stream agent_b 0", "llm.openai.stream agent_b 1"]
    page.fill("#attr", "no-such-value")
    page.press("#attr", "Enter")
    page.wait_for_function("document.querySelectorAll('.row').length === 0")  # nothing matches: no rows
    assert page.text_content("#empty") == "No spans match these filters."
    assert page.is_visible("#empty")
    page.fill("#attr", "")
    page.press("#attr", "Enter")
    page.wait_for_function("document.querySelectorAll('.row').length === 10")


def test_runs_list_filters_by_time_range(server: IntakeServer, page: Page) -> None:
    """The time range keeps the runs started within it; none left says so."""
    write_here(server.intake.store, lambda tracer: None)
    page.goto(url(server))
    page.wait_for_selector("tr.run")
    page.select_option("#since", "900")
    assert page.locator("tr.run").count() == 1  # started within the last 15 minutes
    page.evaluate("Date.now = () => 4102444800000")  # the year 2100: the run is older than 7 days
    page.select_option("#since", "604800")
    assert page.locator("tr.run").count() == 0
    assert page.text_content("#empty") == "No runs match these filters."


def test_span_content_never_runs_as_script(server: IntakeServer, page: Page) -> None:
    """Markup and script in span names and values show as text on every page, the report included."""

    def build(tracer: mastrace.Tracer) -> None:
        with tracer.span(XSS_NAME, attributes={"payload": XSS_VALUE, XSS_NAME: {"nested": XSS_VALUE}}):
            pass

    trace_id = write_here(server.intake.store, build)
    page.goto(url(server, f"/runs/{trace_id}/report"))
    page.wait_for_selector("#report h1")
    assert XSS_NAME in (page.text_content("#report") or "")
    for path in ("/", f"/runs/{trace_id}"):
        page.goto(url(server, path))
        page.wait_for_selector("#status:has-text('live')")
    page.click(".row >> nth=1")
    page.wait_for_selector("#details tr[data-key='payload']")
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img").count() == 0 and page.locator("#details script").count() == 0
    assert XSS_VALUE in (page.text_content("#details tr[data-key='payload']") or "")


def test_a_10k_span_trace_renders_only_the_rows_in_view(server: IntakeServer, page: Page) -> None:
    """A 10,000-span run keeps the rows in view in the page; a deep link reveals a far span."""

    def build(tracer: mastrace.Tracer) -> None:
        for i in range(10_000):
            with tracer.span(f"step {i:05d}"):
                pass

    trace_id = write_here(server.intake.store, build)
    page.goto(url(server, f"/runs/{trace_id}"))
    page.wait_for_selector("#status:has-text('10001 span(s), live')", timeout=15_000)
    assert page.locator(".row").count() < 150  # virtualised: the DOM holds what is on screen
    page.evaluate("document.getElementById('wf').scrollTop = 1e9")
    page.wait_for_selector(".row:has-text('step 09999')")
    # A deep link selects and reveals a span far down the list.
    last = page.get_attribute(".row:has-text('step 09999')", "data-span-id")
    page.goto(url(server, f"/runs/{trace_id}#span={last}"))
    page.wait_for_selector(f".row.selected[data-span-id='{last}']", timeout=15_000)
    page.wait_for_selector("#details h2:has-text('step 09999')")


def test_two_checked_runs_open_their_config_and_usage_diff(server: IntakeServer, page: Page) -> None:
    """Checking two runs opens their diff: the changed model, and B − A deltas beside each figure."""
    ids = []
    for model in ("model-small", "model-large"):
        mastrace.configure(local=server.intake.store, service_name="ui-test")
        tracer = mastrace.get_tracer("ui-test")
        config = {"agents": {"a": {"model": model}}}
        usage = {"massgen.agent_id": "a", "massgen.usage.input": 10}
        with (
            tracer.span("coordination.session", attributes={"mastrace.config": config}) as root,
            tracer.span("agent.a.round_0", attributes=usage),
        ):
            pass
        mastrace.shutdown()
        assert root.span_context is not None
        ids.append(f"{root.span_context.trace_id:032x}")
    page.goto(url(server))
    for trace_id in ids:
        page.check(f"tr.run[data-trace-id='{trace_id}'] input.pick")
    page.click("#compare")
    page.wait_for_selector("tr.change")
    change = page.locator("tr.change").first.locator("td").all_text_contents()
    assert change == ["agents.a.model", "changed", "model-small", "model-large"]
    assert page.text_content("#a") == ids[0] and page.text_content("#b") == ids[1]
    total = page.locator("tr.agent").first.locator("td").all_text_contents()
    assert total[0] == "total" and len(total) == 10
    tokens_delta = page.locator("tr.agent").nth(1).locator("td").nth(6).text_content()
    assert tokens_delta == "0"  # the same 10 input tokens in both runs
