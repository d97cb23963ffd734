"""The coordination graph on `mastrace serve`'s pages (Debian's Chromium): drawn on the run page from
the spans' attributes, a click on an edge or a node keeps its spans in the waterfall, and the
report embeds it as an inline SVG; names are text, never markup."""

from __future__ import annotations

from playwright.sync_api import Page

import mastrace
from mastrace.serve import IntakeServer

from .test_serve_browser import XSS_NAME, url, write_here


class Coordinator(mastrace.CoordinationMixin):
    pass


def build(tracer: mastrace.Tracer) -> None:
    for agent in ("agent_a", "agent_b", XSS_NAME):
        with tracer.span(f"agent.{agent}.round_0", attributes={"massgen.agent_id": agent,
                         "massgen.usage.input": 100, "massgen.usage.output": 10}):  # fmt: skip
            for _ in range(2 if agent == "agent_a" else 1):
                with tracer.span("mcp.search.query"):
                    pass
    c = Coordinator()
    c.record_answer("agent_a", "agent1.1")
    c.record_vote("agent_b", "agent_a", "agent1.1")
    c.record_vote(XSS_NAME, "agent_a", "agent1.1")
    c.record_winner("agent_a", "agent1.1")


def open_graph(server: IntakeServer, page: Page) -> str:
    trace_id = write_here(server.intake.store, build)
    page.goto(url(server, f"/runs/{trace_id}"))
    page.wait_for_selector("#status:has-text('12 span(s), live')")
    assert page.is_hidden("#graph")
    page.click("#show-graph")
    page.wait_for_selector("#graph g.node-group")
    return trace_id


def labels() -> str:
    return "rows => rows.map(r => r.querySelector('.label').textContent)"


def test_the_graph_shows_agents_votes_winner_and_mcp_use(server: IntakeServer, page: Page) -> None:
    open_graph(server, page)
    nodes = page.eval_on_selector_all("#graph g.node-group", "gs => gs.map(g => g.dataset.node)")
    assert nodes == [XSS_NAME, "agent_a", "agent_b", "mcp:search"]
    first_lines = page.eval_on_selector_all(
        "#graph g.node-group text:first-of-type", "ts => ts.map(t => t.textContent)"
    )
    assert first_lines == [XSS_NAME, "agent_a", "agent_b", "MCP search"]
    assert page.evaluate("window.__pwned") is None and page.locator("#graph img").count() == 0
    winner = page.get_attribute("#graph g[data-node='agent_a'] ellipse", "stroke")
    assert winner == "#16a34a"
    assert page.text_content("#graph g[data-node='agent_a']") == "agent_awinner, 1 answer100 in / 10 out"
    kinds = page.eval_on_selector_all(
        "#graph g.edge-group", "gs => gs.map(g => g.dataset.kind + ':' + g.querySelector('text').textContent)"
    )
    assert sorted(kinds) == sorted(["vote:1 vote", "vote:1 vote", "mcp:2 calls", "mcp:1 call", "mcp:1 call"])


def test_clicking_an_edge_or_a_node_keeps_its_spans(server: IntakeServer, page: Page) -> None:
    open_graph(server, page)
    page.locator("#graph g.edge-group[data-kind='vote'][data-source='agent_b']").dispatch_event("click")
    page.wait_for_selector("#picked:not([hidden])")
    assert page.eval_on_selector_all(".row", labels()) == ["Agent vote: agent_b -> agent1.1"]
    assert "agent_b → agent_a" in (page.text_content("#picked-text") or "")
    page.locator("#graph g[data-node='mcp:search']").dispatch_event("click")
    assert page.eval_on_selector_all(".row", labels()) == ["mcp.search.query"] * 4
    page.click("#unpick")
    assert page.is_hidden("#picked")
    assert page.locator(".row").count() == 12
    page.locator("#graph g[data-node='agent_b']").dispatch_event("click")
    assert page.input_value("#agent") == "agent_b"
    assert page.eval_on_selector_all(".row", labels()) == [
        "agent.agent_b.round_0",
        "mcp.search.query",
        "Agent vote: agent_b -> agent1.1",
    ]


def test_the_report_embeds_the_graph_as_inline_svg(server: IntakeServer, page: Page) -> None:
    trace_id = write_here(server.intake.store, build)
    page.goto(url(server, f"/runs/{trace_id}/report"))
    page.wait_for_selector("#report h2#coordination-graph")
    texts = page.eval_on_selector_all(
        "#report svg.coordination-graph text", "ts => ts.map(t => t.textContent)"
    )
    assert "agent_a" in texts and XSS_NAME in texts and "MCP search" in texts
    assert page.locator("#report svg script").count() == 0 and page.evaluate("window.__pwned") is None
