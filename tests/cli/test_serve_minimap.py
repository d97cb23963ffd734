"""The waterfall's minimap, in Debian's Chromium: hidden over the whole run, shown once zoomed in with
every span drawn and the zoomed window on it; a click on it moves the window there."""

from __future__ import annotations

import re

from playwright.sync_api import Page

from mastrace.serve import IntakeServer

from .test_serve_waterfall import open_run


def _box(page: Page, selector: str) -> dict[str, float]:
    box = page.locator(selector).bounding_box()
    assert box is not None, selector
    return box


def test_the_minimap_shows_the_zoomed_window_and_moves_it(server: IntakeServer, page: Page) -> None:
    """Zoomed in 8×, the minimap's window covers an eighth of it; a click near its end moves the
    window (and the address's zoom) to the end of the run; `fit` hides it again."""
    open_run(server, page)
    assert page.locator("#minimap").is_hidden()
    for _ in range(3):
        page.click("#zoom-in")
    assert page.locator("#minimap").is_visible()
    lane, window = _box(page, "#mm-lane"), _box(page, "#mm-window")
    assert abs(window["width"] - lane["width"] / 8) <= 3
    assert abs((window["x"] + window["width"] / 2) - (lane["x"] + lane["width"] / 2)) <= 3  # centred
    painted = page.eval_on_selector(
        "#mm",
        "c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        " let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n; }",
    )
    assert painted > 0  # the spans are drawn
    page.mouse.click(lane["x"] + lane["width"] * 0.97, lane["y"] + lane["height"] / 2)
    window = _box(page, "#mm-window")
    assert abs((window["x"] + window["width"]) - (lane["x"] + lane["width"])) <= 3  # at the end
    zoom = re.search(r"zoom=(\d+)-(\d+)", page.evaluate("location.hash"))
    assert zoom is not None
    start, end = int(zoom[1]), int(zoom[2])
    assert start > 0 and abs((end - start) * 8 - end) <= 8 * 2  # an eighth of the run, ending at its end
    page.click("#zoom-reset")
    assert page.locator("#minimap").is_hidden()
