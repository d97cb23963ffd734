"""What a user of the run page notices (Debian's Chromium): the detail panel takes room only when a
span is selected and can be resized; filters, zoom and the selected span live in the address;
zoom and pan on the time axis; keyboard navigation; and `mastrace view` shares the palette."""

from __future__ import annotations

from playwright.sync_api import Page

from mastrace.serve import IntakeServer

from .test_serve_browser import url
from .test_serve_waterfall import open_run


def labels(page: Page) -> list[str]:
    return page.locator(".row .label").all_text_contents()


def test_the_panel_takes_room_only_for_a_selected_span_and_resizes(server: IntakeServer, page: Page) -> None:
    open_run(server, page)
    assert page.is_hidden("#details")
    assert page.eval_on_selector("#wf", "w => w.offsetWidth") == 1400  # the bars get the whole width
    page.click(".row:has(.label:text-is('llm.openai.stream'))")
    page.wait_for_selector("#details h2")
    before = page.eval_on_selector("#details", "d => d.offsetWidth")
    assert 300 < before < 700
    box = page.locator("#resizer").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + 3, box["y"] + 100)
    page.mouse.down()
    page.mouse.move(box["x"] - 200, box["y"] + 100, steps=5)
    page.mouse.up()
    after = page.eval_on_selector("#details", "d => d.offsetWidth")
    assert abs(after - (before + 203)) <= 4, (before, after)
    page.keyboard.press("Escape")
    assert page.is_hidden("#details") and "span=" not in page.url
    assert page.locator(".row.selected").count() == 0


def test_filters_zoom_and_selection_live_in_the_address(server: IntakeServer, page: Page) -> None:
    trace_id = open_run(server, page)
    page.select_option("#agent", "agent_a")
    page.fill("#text", "mcp")
    page.check("#errors")
    page.uncheck("#errors")
    page.click(".row:has(.label:text-is('mcp.search.q'))")
    page.click("#zoom-in")
    address = page.url
    assert "agent=agent_a" in address and "q=mcp" in address and "span=" in address and "zoom=" in address
    page.goto(url(server, "/"))
    page.goto(address)  # a fresh page on the address: the same filters, span and zoom
    page.wait_for_selector(".row.selected")
    assert page.input_value("#agent") == "agent_a" and page.input_value("#text") == "mcp"
    assert sorted(labels(page)) == ["Tool execution: mcp__search__q", "mcp.search.q"]
    assert page.text_content(".row.selected .label") == "mcp.search.q"
    assert page.text_content("#details h2") == "mcp.search.q"
    assert trace_id in page.url


def test_zoom_and_pan_on_the_time_axis(server: IntakeServer, page: Page) -> None:
    open_run(server, page)
    session = ".row:has(.label:text-is('coordination.session')) .bar"

    def width() -> float:
        return float(page.eval_on_selector(session, "b => b.getBoundingClientRect().width"))

    whole = width()
    page.click("#zoom-in")
    assert abs(page.eval_on_selector(session, "b => parseFloat(b.style.width)") - 200.0) < 0.5
    page.click("#zoom-in")
    assert abs(page.eval_on_selector(session, "b => parseFloat(b.style.width)") - 400.0) < 1
    first = page.locator("#ticks .tick").all_text_contents()
    # Ctrl+wheel zooms too, dragging the axis pans: the tick labels move.
    box = page.locator("#ticks").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 10)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 4, box["y"] + 10, steps=4)
    page.mouse.up()
    assert page.locator("#ticks .tick").all_text_contents() != first
    page.click("#zoom-reset")
    assert abs(width() - whole) < 1.5
    assert page.locator("#ticks .tick").first.text_content() == "0"


def test_keyboard_moves_folds_and_closes(server: IntakeServer, page: Page) -> None:
    open_run(server, page)
    page.click("#wf")  # focus on the page, not on a filter box
    page.keyboard.press("ArrowDown")
    page.wait_for_selector(".row.selected")
    assert page.text_content(".row.selected .label") == "coordination.session"
    page.keyboard.press("ArrowDown")
    page.wait_for_selector("#details h2:text-is('agent.agent_a.round_0')")
    assert page.text_content(".row.selected .label") == "agent.agent_a.round_0"
    page.keyboard.press("Enter")  # fold its subtree
    assert "llm.openai.stream" not in labels(page)
    page.keyboard.press("Enter")
    assert "llm.openai.stream" in labels(page)
    page.keyboard.press("ArrowUp")
    assert page.text_content(".row.selected .label") == "coordination.session"
    page.keyboard.press("Escape")
    assert page.locator(".row.selected").count() == 0 and page.is_hidden("#details")


def test_view_and_serve_share_one_palette(server: IntakeServer, page: Page) -> None:
    trace_id = open_run(server, page)
    kinds = ("session", "agent", "llm", "tool", "event")
    served = {
        k: page.eval_on_selector(f".row[data-kind='{k}'] .bar", "b => getComputedStyle(b).backgroundColor")
        for k in kinds
    }
    page.goto(url(server, f"/runs/{trace_id}/view"))
    page.wait_for_selector(".span-bar")
    viewed = {
        k: page.eval_on_selector(f".span-bar.kind-{k}", "b => getComputedStyle(b).backgroundColor")
        for k in kinds
    }
    assert viewed == served
