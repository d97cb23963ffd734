"""The diff page of `mastrace serve` (Debian's Chromium) says what happened differently: the winner,
the votes, the answers, each round's outcome and the aligned span trees, linked to their spans."""

from __future__ import annotations

from playwright.sync_api import Page

from mastrace.serve import IntakeServer
from outcome_runs import write_two_runs

from .test_serve_browser import url


def test_the_diff_page_shows_winner_votes_rounds_and_tree_changes(server: IntakeServer, page: Page) -> None:
    a, b = write_two_runs(server.intake.store)
    page.goto(url(server, f"/diff?a={a}&b={b}"))
    page.wait_for_selector("#outcomes:not([hidden])")
    assert page.text_content("#winner") == "agent_a → agent_b"
    assert "changed" in (page.get_attribute("#winner-card", "class") or "")
    assert page.text_content("#discarded") == "0 → 1"
    votes = [r.locator("td").all_text_contents() for r in page.locator("tr.vote").all()]
    assert votes == [
        ["agent_a → agent_b", "0", "1"],
        ["agent_b → agent_a", "1", "0"],
        ["agent_c → agent_a", "1", "0"],
        ["agent_c → agent_b", "0", "1"],
    ]
    changed = [r.locator("td").all_text_contents() for r in page.locator("tr.round.changed").all()]
    assert changed == [
        ["agent_a", "1", "(no round)", "vote → agent_b"],
        ["agent_b", "1", "vote → agent_a", "(no round)"],
        ["agent_c", "1", "vote → agent_a", "vote → agent_b"],
    ]
    kinds = page.eval_on_selector_all("tr.tree-change", "rs => rs.map(r => r.dataset.change)")
    assert sorted(set(kinds)) == ["added", "costlier", "removed", "slower"]
    slower = page.locator("tr.tree-change[data-change='slower'] td").all_text_contents()
    assert slower == [
        "slower",
        "coordination.session / agent.agent_a.round_0 / llm.openai.stream",
        "1.00 s",
        "2.00 s",
    ]
    # Each side links to its span in its run's waterfall.
    page.click("tr.tree-change[data-change='slower'] td:nth-child(4) a")
    page.wait_for_selector(".row.selected")
    assert page.text_content(".row.selected .label") == "llm.openai.stream"
    assert b in page.url
