"""Span links in `mastrace serve`'s run page (Debian's Chromium), followed both ways: a vote names
the answer it voted for, the answer the votes it received, the winner its answer; any OpenTelemetry
link (a retry of an original) shows on the span panel, and the waterfall draws a subtle connector
between the selected span and the spans it is linked with."""

from __future__ import annotations

from opentelemetry import trace
from playwright.sync_api import Page

import mastrace
from mastrace.serve import IntakeServer

from .test_serve_browser import url, write_here


class Coordinator(mastrace.CoordinationMixin):
    pass


def build(tracer: mastrace.Tracer) -> None:
    c = Coordinator()
    c.record_answer("agent_a", "agent1.1")
    c.record_answer("agent_b", "agent2.1")
    c.record_vote("agent_b", "agent_a", "agent1.1", reason="clearer")
    c.record_vote("agent_c", "agent_a", "agent1.1")
    c.record_winner("agent_a", "agent1.1")
    with tracer.span("llm.call attempt 1") as first:
        pass
    original = first.span_context
    link = trace.Link(original, {"mastrace.link.kind": "retry"})
    with tracer.span("llm.call attempt 2", links=[link]):
        pass


def open_run(server: IntakeServer, page: Page) -> None:
    trace_id = write_here(server.intake.store, build)
    page.goto(url(server, f"/runs/{trace_id}"))
    page.wait_for_selector("#status:has-text('8 span(s), live')")


def row(label: str) -> str:
    return f".row:has(.label:text-is('{label}'))"


def test_an_answer_lists_the_votes_it_received_and_a_vote_leads_to_its_answer(
    server: IntakeServer, page: Page
) -> None:
    open_run(server, page)
    page.click(row("Agent answer: agent1.1"))
    page.wait_for_selector("#details ul.linked-from")
    received = page.locator("#details ul.linked-from li")
    assert received.locator("a").all_text_contents() == [
        "Agent vote: agent_b -> agent1.1",
        "Agent vote: agent_c -> agent1.1",
        "Winner selected: agent1.1",
    ]
    assert received.locator(".tag").all_text_contents() == [
        "vote received",
        "vote received",
        "chosen as winner by",
    ]
    assert page.locator("#details ul.links-to").count() == 0
    # The other answer received no vote: no links section at all.
    page.click(row("Agent answer: agent2.1"))
    page.wait_for_selector("#details h2:has-text('Agent answer: agent2.1')")
    assert page.locator("#details ul.links").count() == 0
    # Following a received vote selects it; it leads back to the answer.
    page.click(row("Agent answer: agent1.1"))
    page.click("#details ul.linked-from a:text-is('Agent vote: agent_c -> agent1.1')")
    page.wait_for_selector("#details h2:has-text('Agent vote: agent_c -> agent1.1')")
    assert page.locator(".row.selected .label").text_content() == "Agent vote: agent_c -> agent1.1"
    to = page.locator("#details ul.links-to li")
    assert to.locator(".tag").all_text_contents() == ["voted for"]
    to.locator("a").click()
    page.wait_for_selector("#details h2:has-text('Agent answer: agent1.1')")


def test_any_span_link_shows_with_its_attributes_and_a_connector(server: IntakeServer, page: Page) -> None:
    open_run(server, page)
    assert page.locator(row("llm.call attempt 2") + " .linkmark").count() == 1
    assert page.locator(row("llm.call attempt 1") + " .linkmark").count() == 1
    assert page.locator(row("coordination.session") + " .linkmark").count() == 0
    page.click(row("llm.call attempt 2"))
    page.wait_for_selector("#details ul.links-to")
    assert page.locator("#details ul.links-to .tag").all_text_contents() == ["retry of"]
    assert page.locator("#details ul.links-to a").text_content() == "llm.call attempt 1"
    assert "retry" in (page.text_content("#details ul.links-to .jt") or "")
    # A connector joins the two rows, from the middle of one to the middle of the other.
    connector = page.locator(".connector")
    assert connector.count() == 1
    tops = page.eval_on_selector_all(
        f"{row('llm.call attempt 1')}, {row('llm.call attempt 2')}", "rs => rs.map(r => r.offsetTop)"
    )
    box = connector.evaluate("c => [c.offsetTop, c.offsetHeight]")
    assert box == [min(tops) + 12, abs(tops[1] - tops[0])]
    page.click(row("coordination.session"))
    page.wait_for_selector("#details h2:has-text('coordination.session')")
    assert page.locator(".connector").count() == 0
