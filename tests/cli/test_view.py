"""`mastrace view`: the HTML file, and how it behaves in headless Chromium.

The browser tests load the file with `#select=<span_id>`, which makes the page dispatch a real
click event on that span's bar; `--dump-dom` then shows the DOM after the click handler ran.
They fail (not skip) when Chromium is missing on CI (`CI=true`) and skip elsewhere.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from .conftest import Runner

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def chromium() -> str:
    """The Chromium executable; fail on CI and skip elsewhere when there is none."""
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("headless Chromium is required on CI (apt-get install chromium)")
    pytest.skip("headless Chromium is not installed")


def run_chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "chromium-profile"
    return subprocess.run(
        [chromium(), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=600
    )


class DomScan(HTMLParser):
    """Collects the span bars and the text of the attribute panel from a dumped DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.bars: list[dict[str, str]] = []
        self.panel: dict[str, str] | None = None
        self.panel_text: list[str] = []
        self.selected_rows: list[str] = []
        self._depth_in_panel = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        classes = a.get("class", "").split()
        if "span-bar" in classes:
            self.bars.append(a)
        if "row" in classes and "selected" in classes:
            self.selected_rows.append(a.get("data-span-id", ""))
        if a.get("id") == "attr-panel":
            self.panel = a
            self._depth_in_panel = 1
        elif self._depth_in_panel:
            self._depth_in_panel += 1

    def handle_endtag(self, tag: str) -> None:
        if self._depth_in_panel:
            self._depth_in_panel -= 1

    def handle_data(self, data: str) -> None:
        if self._depth_in_panel:
            self.panel_text.append(data)


@pytest.fixture(scope="module")
def latest_spans(module_cli: Runner, demo_store: Path) -> list[dict[str, str]]:
    """span_id, parent_span_id and span_name of every span of the latest run."""
    runs = json.loads(module_cli("runs", "--limit", "1", "--format", "json", store=demo_store).stdout)
    sql = (
        "SELECT span_id, parent_span_id, span_name FROM records "
        f"WHERE trace_id = '{runs[0]['trace_id']}' ORDER BY start_timestamp"
    )
    return json.loads(module_cli("query", sql, "--format", "json", store=demo_store).stdout)


@pytest.fixture(scope="module")
def page(module_cli: Runner, demo_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The view of the latest run, written with `mastrace view -o`."""
    target = tmp_path_factory.mktemp("view") / "trace.html"
    result = module_cli("view", "latest", "-o", str(target), store=demo_store)
    assert result.returncode == 0, result.stderr
    assert str(target) in result.stdout
    return target


def expected_depths(spans: list[dict[str, str]]) -> dict[str, int]:
    parents = {s["span_id"]: s["parent_span_id"] for s in spans}

    def depth(span_id: str) -> int:
        parent = parents[span_id]
        return 0 if parent is None or parent not in parents else 1 + depth(parent)

    return {span_id: depth(span_id) for span_id in parents}


def test_view_writes_a_single_offline_file(page: Path) -> None:
    """The page inlines its script and style and loads nothing from the network."""
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>")
    assert not re.search(r"<(script|link|img|iframe)[^>]*\s(src|href)=|@import|url\(", text)
    assert text.count("<script") == 2  # the span data (JSON) and the inline script


@pytest.mark.browser
def test_browser_renders_one_bar_per_span_at_its_depth(
    page: Path, latest_spans: list[dict[str, str]], tmp_path: Path
) -> None:
    """After the page loads in Chromium, there is one bar per span and each carries its nesting depth."""
    result = run_chromium(tmp_path, "--dump-dom", page.as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    scan = DomScan()
    scan.feed(result.stdout)
    assert len(scan.bars) == len(latest_spans) == 48
    got = {bar["data-span-id"]: int(bar["data-depth"]) for bar in scan.bars}
    assert got == expected_depths(latest_spans)
    assert max(got.values()) == 3  # session → round → tool execution → MCP call


@pytest.mark.browser
def test_clicking_a_span_fills_the_attribute_panel(
    page: Path, latest_spans: list[dict[str, str]], tmp_path: Path
) -> None:
    """A click on the failed MCP call's bar shows its attributes and exception in #attr-panel."""
    failed = next(
        s
        for s in latest_spans
        if s["span_name"] == "mcp.filesystem.write_file"
        and any(p["span_id"] == s["parent_span_id"] for p in latest_spans)
    )
    scans = []
    for span in (failed, latest_spans[0]):
        result = run_chromium(tmp_path, "--dump-dom", f"{page.as_uri()}#select={span['span_id']}")
        assert result.returncode == 0, result.stderr[-2000:]
        scan = DomScan()
        scan.feed(result.stdout)
        scans.append(scan)
    scan = scans[0]
    assert scan.panel is not None and scan.panel.get("data-span-id") == failed["span_id"]
    text = " ".join(scan.panel_text)
    assert "mcp.filesystem.write_file" in text and "PermissionError" in text
    assert "mcp.method.name" in text and "tools/call" in text
    assert scan.selected_rows == [failed["span_id"]]
    assert scans[1].panel is not None and "coordination.session" in " ".join(scans[1].panel_text)


def _png_size_and_colours(data: bytes) -> tuple[int, int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    idat, pos = b"", 8
    while pos < len(data):
        length = struct.unpack(">I", data[pos : pos + 4])[0]
        if data[pos + 4 : pos + 8] == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


@pytest.mark.browser
def test_screenshot_is_a_drawn_page(page: Path, latest_spans: list[dict[str, str]], tmp_path: Path) -> None:
    """A 1400×900 screenshot of the page is a real PNG with a drawn (not blank) waterfall."""
    shot = tmp_path / "shot.png"
    result = run_chromium(
        tmp_path,
        f"--screenshot={shot}",
        "--window-size=1400,900",
        f"{page.as_uri()}#select={latest_spans[0]['span_id']}",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    width, height, distinct_bytes = _png_size_and_colours(shot.read_bytes())
    assert (width, height) == (1400, 900)
    assert distinct_bytes > 32
