"""`mastrace serve --token` as a person uses it, in Debian's Chromium: the address the command prints
opens the runs list, a run's waterfall, a span's details, the report and the diff, every request the
pages make authorised by the cookie; without the token nothing loads; on all interfaces with
`--allow-host` too, with any token a user may choose, and with two servers open in one browser."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page

from .conftest import MASTRACE, clean_env
from .test_view import FLAGS, chromium

HEX_TOKEN = "0123456789abcdef0123"
ALIAS = "tracebox.test"  # a name of this machine on a network, mapped to loopback by the browser
OTHER = "elsewhere.test"  # another name the browser maps to loopback, never allowed


@pytest.fixture(scope="module")
def mapped_browser(browser: Browser) -> Iterator[Browser]:
    """Chromium that resolves `tracebox.test` to 127.0.0.1 (the machine's name on a network), started
    by the module's Playwright (one Playwright per thread)."""
    launched = browser.browser_type.launch(
        executable_path=chromium(),
        args=[*FLAGS, f"--host-resolver-rules=MAP {ALIAS} 127.0.0.1, MAP {OTHER} 127.0.0.1"],
        headless=True,
    )
    yield launched
    launched.close()


@pytest.fixture
def serve_cli(tmp_path: Path, demo_store: Path) -> Iterator[Callable[..., str]]:
    """Start the installed `mastrace serve` on a copy of the demo store; returns the UI address it prints."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> str:
        store = tmp_path / f"store{len(started)}"
        shutil.copytree(demo_store, store)
        process = subprocess.Popen(
            [str(MASTRACE), "serve", "--store", str(store), "--http-port", "0", "--grpc-port", "-1", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=clean_env(),
        )
        started.append(process)
        assert process.stdout is not None
        for line in process.stdout:  # printed once listening; blocks until then (no deadline)
            found = re.search(r"web UI on (\S+)", line)
            if found:
                return found.group(1)
        pytest.fail(f"mastrace serve printed no UI address: {process.communicate()[1]}")

    yield start
    for process in started:
        process.terminate()
        process.communicate(timeout=60)


def origin(address: str) -> str:
    """The printed address without the sign-in page and its `#token=`: `http://host:port/`."""
    return address.split("signin#")[0]


def answers(context: BrowserContext) -> list[tuple[int, str]]:
    """Every response the context's pages get, as (status, URL), appended as they arrive."""
    seen: list[tuple[int, str]] = []
    context.on("response", lambda reply: seen.append((reply.status, reply.url)))
    return seen


def walk_every_page(page: Page, address: str) -> None:
    """Open the printed address, then a run, a span, the report and the diff of the two runs."""
    page.goto(address)
    page.wait_for_selector("#status:has-text('2 run(s), live')")
    assert "token" not in page.url  # traded for the cookie, out of the address bar
    page.locator("tr.run a").first.click()
    page.wait_for_selector("#status:has-text('48 span(s)')")
    page.locator(".row:has(.label:text-is('coordination.session'))").click()
    page.wait_for_selector("#details :text('trace')")
    page.click("#report")
    page.wait_for_selector("h1:has-text('Trace Analysis Report')")
    page.go_back()
    page.click("a:text-is('runs')")
    page.wait_for_selector("#status:has-text('2 run(s), live')")
    for box in page.locator("input.pick").all():
        box.check()
    page.click("#compare")
    page.wait_for_selector("#changes tbody tr")
    assert page.locator("#a").text_content() and page.locator("#b").text_content()


@pytest.mark.parametrize(
    "token",
    [HEX_TOKEN, "correct horse battery staple", "semi;colons;are;allowed", "pässwörd-mit-ümläuten"],
    ids=["hex", "spaces", "semicolons", "non-ascii"],
)
def test_the_printed_address_opens_every_page_with_every_request_authorised(
    serve_cli: Callable[..., str], browser: Browser, token: str
) -> None:
    """Whatever the token, the pages and each request they make (scripts, API polls, details, report,
    diff) are let in by the cookie the printed `#token=` address gave; no request is refused."""
    address = serve_cli("--token", token)
    context = browser.new_context()
    seen = answers(context)
    walk_every_page(context.new_page(), address)
    refused = [(status, where) for status, where in seen if status >= 400]
    assert not refused, refused
    assert any("/api/runs/" in where and "/spans/" in where for _, where in seen)  # a span's details
    context.close()


def test_on_all_interfaces_the_allowed_name_opens_every_page(
    serve_cli: Callable[..., str], mapped_browser: Browser
) -> None:
    """`--host 0.0.0.0 --allow-host NAME`: the printed address with the machine's name in it works like
    on loopback, and a name that was not allowed gets 403."""
    address = serve_cli("--host", "0.0.0.0", "--allow-host", ALIAS, "--token", HEX_TOKEN)
    named = re.sub(r"//[^/:]+:", f"//{ALIAS}:", address)
    context = mapped_browser.new_context()
    seen = answers(context)
    walk_every_page(context.new_page(), named)
    assert all(status < 400 for status, _ in seen), seen
    assert all(f"//{ALIAS}:" in where for _, where in seen)
    other = mapped_browser.new_context().new_page()
    reply = other.goto(re.sub(r"//[^/:]+:", f"//{OTHER}:", address))
    assert reply is not None and reply.status == 403, reply and reply.status
    assert "coordination.session" not in other.content()
    context.close()


def test_without_the_token_nothing_loads(serve_cli: Callable[..., str], browser: Browser) -> None:
    """Opened without the token (or with a wrong one in `?token=`), every page and API address answers
    401 and shows no run."""
    address = serve_cli("--token", HEX_TOKEN)
    base = origin(address)
    page = browser.new_context().new_page()
    for path in ("", "runs/latest", "runs/latest/report", "diff", "api/runs", "static/ui.js", "?token=wrong"):
        reply = page.goto(base + path)
        assert reply is not None and reply.status == 401, (path, reply and reply.status)
        assert "coordination.session" not in (page.content())
    assert page.context.cookies() == []


def test_two_servers_in_one_browser_keep_their_own_cookies(
    serve_cli: Callable[..., str], browser: Browser
) -> None:
    """A browser does not tell cookies apart by port: opening a second server (another token) must not
    lock the first one's open page out."""
    first = serve_cli("--token", HEX_TOKEN)
    second = serve_cli("--token", "another-token-another-token")
    context = browser.new_context()
    seen = answers(context)
    page = context.new_page()
    page.goto(first)
    page.wait_for_selector("#status:has-text('2 run(s), live')")
    context.new_page().goto(second)
    page.goto(origin(first) + "runs/latest")
    page.wait_for_selector("#status:has-text('48 span(s)')")
    assert all(status < 400 for status, _ in seen), seen


@pytest.mark.parametrize("token", [HEX_TOKEN, "pässwörd mit ümläuten;&=#"], ids=["hex", "non-ascii"])
def test_the_server_never_receives_the_token_in_an_address(
    tmp_path: Path, demo_store: Path, browser: Browser, monkeypatch: pytest.MonkeyPatch, token: str
) -> None:
    """The printed address opens the UI, and no request the server receives carries the token in its
    path or query (the fragment stays in the browser): it arrives once, in `POST /signin`'s header."""
    from urllib.parse import quote

    from mastrace.cli._serve import ui_url
    from mastrace.serve import _guard, start_intake

    received: list[
        tuple[str, str, bytes, bytes]
    ] = []  # (method, path, raw path, query) as the server saw them
    guarded = _guard.Guard.__call__

    async def logged(
        self: _guard.Guard, scope: _guard.Scope, receive: _guard.Receive, send: _guard.Send
    ) -> None:
        if scope["type"] == "http":
            raw = scope.get("raw_path") or b""
            received.append((scope["method"], scope["path"], raw, scope.get("query_string", b"")))
        await guarded(self, scope, receive, send)

    monkeypatch.setattr(_guard.Guard, "__call__", logged)
    store = tmp_path / "store"
    shutil.copytree(demo_store, store)
    server = start_intake(store, http_port=0, grpc_port=None, token=token)
    try:
        assert server.http_port is not None
        address = ui_url("127.0.0.1", server.http_port, token)
        assert "?" not in address and address.endswith("/signin#token=" + quote(token, safe=""))
        context = browser.new_context()
        seen = answers(context)
        walk_every_page(context.new_page(), address)
        assert all(status < 400 for status, _ in seen), seen
        context.close()
    finally:
        server.stop()
    spellings = {
        token.encode(),
        quote(token, safe="").encode(),
        quote(token).encode(),
        quote(token, safe="").encode().lower(),
    }
    leaked = [
        r for r in received if any(s in part for s in spellings for part in (r[2], r[3], r[1].encode()))
    ]
    assert not leaked, leaked
    assert ("POST", "/signin") in {(method, path) for method, path, _, _ in received}
    assert len(received) > 10  # the pages' own requests were seen, and none carried it
