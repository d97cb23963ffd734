"""Redraw the README's screenshots of `mastrace serve` in Debian's Chromium.

Usage: `python docs/make_screenshots.py MASSGEN_STORE DEMO_STORE`, where MASSGEN_STORE holds a MassGen
run (for example the store of `tests_massgen`'s run, or `mastrace run -- massgen --automation ...`) and
DEMO_STORE two runs of `examples/coordination_demo.py` with different `--model`s. Writes
`docs/serve-runs.png`, `docs/serve-waterfall.png`, `docs/serve-report.png` and `docs/serve-diff.png`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

from mastrace.serve import start_intake

DOCS = Path(__file__).resolve().parent


def shoot(store: str, shots: dict[str, str], page: Page, select: str | None = None) -> None:
    server = start_intake(store, http_port=0, grpc_port=None)
    try:
        for name, path in shots.items():
            page.goto(f"http://127.0.0.1:{server.http_port}{path}")
            page.wait_for_load_state("networkidle")
            if select and name == "serve-waterfall.png":
                page.wait_for_selector(".row")
                page.click(select)
                page.wait_for_selector("#details tr[data-key]")
            page.screenshot(path=str(DOCS / name))
    finally:
        server.stop()


def main() -> None:
    massgen, demo = sys.argv[1], sys.argv[2]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"], headless=True)
        page = browser.new_page(viewport={"width": 1500, "height": 860})
        llm_call = ".row:has(.label:text-is('llm.chatcompletion.stream')) >> nth=0"
        shoot(massgen, {"serve-waterfall.png": "/runs/latest"}, page, llm_call)
        shoot(
            demo,
            {
                "serve-runs.png": "/",
                "serve-report.png": "/runs/latest/report",
                "serve-diff.png": "/diff?a=previous&b=latest",
            },
            page,
        )
        browser.close()


if __name__ == "__main__":
    main()
