"""Who may talk to `mastrace serve`: one ASGI middleware in front of every HTTP route of the app.

`serve` is a local server for one user. A web page the user opens can still reach it: by posting to
it (CSRF, with the content types a form may send), by loading its URLs, or by having a name of its
own resolve to 127.0.0.1 (DNS rebinding: the browser then treats our answers as the page's own). So
every request, whatever route it is for (intake, UI, API, and routes added later), passes `Guard`:

- its `Host` must be a loopback name (`localhost`, `*.localhost`), an IP address (never what a
  rebinding page sends) or a name the user allowed (`--allow-host`); otherwise 403;
- an `Origin` it carries must be loopback, allowed, or the server itself; otherwise 403; so must
  `Sec-Fetch-Site` not say `cross-site` (a page loading our URLs in an image or a script);
- with a token (`--token-file`, `MASTRACE_SERVE_TOKEN` or `--token`; required when listening off
  loopback), it must carry `Authorization: Bearer <token>` or the cookie a browser gets once;
  otherwise 401.

A browser gets the cookie from the address `serve` prints, `/signin#token=<token>`: the token is in
the fragment, which a browser never sends (so it is in no request line, server log or `Referer`); the
sign-in page's script reads it, trades it for the cookie by `POST /signin` with the token in
`Authorization`, and opens the UI. Opening any URL with `?token=<token>` still works too (the token is
then in a request line).

The cookie holds a digest of the token, never the token: any token (spaces, `;`, non-ASCII) makes a
valid cookie value, and its name carries part of that digest, so that two servers on one host (whose
cookies a browser does not tell apart by port) each keep their own.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import os
import re
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit

from ..exceptions import ConfigError

__all__ = [
    "SAFETY_HEADERS",
    "SIGNIN_PATH",
    "STRICT_POLICY",
    "TOKEN_COOKIE",
    "TOKEN_ENV",
    "Guard",
    "is_loopback",
    "needs_token",
    "page_policy",
    "resolve_token",
]

TOKEN_ENV: Final = "MASTRACE_SERVE_TOKEN"
TOKEN_COOKIE: Final = "mastrace_token"
_LOOPBACK_NAMES: Final = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def resolve_token(token: str | None = None, environ: MutableMapping[str, str] | None = None) -> str | None:
    """The bearer token that `serve` requires: `token` (`--token`) when given, else
    `MASTRACE_SERVE_TOKEN`, else None (no token). Blank values count as not given.

    Raises:
        ConfigError: The token is shorter than 16 characters (too easy to guess).
    """
    env = os.environ if environ is None else environ
    value = (token if token is not None and token.strip() else env.get(TOKEN_ENV, "")).strip()
    if not value:
        return None
    if len(value) < 16:
        raise ConfigError("the serve token must be at least 16 characters (e.g. `openssl rand -hex 16`)")
    return value


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 with or without brackets) is this machine only."""
    name = host.strip().strip("[]").lower().rstrip(".")
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def needs_token(host: str) -> bool:
    """Whether listening on `host` requires a token: anything but a loopback address does."""
    return not is_loopback(host)


def _hostname(value: str) -> str:
    """The host part of a `Host` header value (`name:port`, `[v6]:port`), lowercased."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


SIGNIN_PATH: Final = "/signin"
"""The page that trades the token in its address's fragment for the cookie (see the module)."""
_SIGNIN_SCRIPT: Final = """
(function () {
  var note = document.getElementById("note");
  var found = /^#token=(.*)$/.exec(location.hash);
  history.replaceState(null, "", location.pathname);
  if (!found) {
    note.textContent = "Open the whole address mastrace serve printed: the token follows #token=.";
    return;
  }
  var token;
  try { token = decodeURIComponent(found[1]); } catch (e) { token = found[1]; }
  var bytes = new TextEncoder().encode(token);  // a header carries the token's UTF-8 bytes
  var header = "";
  for (var i = 0; i < bytes.length; i++) header += String.fromCharCode(bytes[i]);
  fetch(location.pathname, {
    method: "POST", credentials: "same-origin", cache: "no-store",
    headers: {"Authorization": "Bearer " + header}
  }).then(function (reply) {
    if (reply.ok) location.replace("/");
    else note.textContent = "The token in the address was not accepted.";
  }, function () { note.textContent = "The server did not answer."; });
})();
"""
SIGNIN_PAGE: Final = (
    '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>mastrace</title>'
    '<meta name="referrer" content="no-referrer"></head>'
    '<body><p id="note">Signing in…</p><script>' + _SIGNIN_SCRIPT + "</script></body></html>"
)

_INTAKE_PATHS: Final = frozenset({"/v1/traces", "/v1/metrics"})
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)
STRICT_POLICY: Final = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
"""The Content-Security-Policy of every answer that is not a page: nothing in it may load or run."""
SAFETY_HEADERS: Final = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-resource-policy", b"same-origin"),
)


def page_policy(html: str) -> str:
    """The Content-Security-Policy of a UI page: its own scripts (the inline ones by their hash), style
    sheets and pictures from this server (or inline), requests to this server only, never framed.

    Span text a page shows can then neither run nor fetch anything from another origin, even if some
    path let it into the markup.
    """
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"
        for body in _INLINE_SCRIPT.findall(html)
    )
    return (
        f"default-src 'none'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; manifest-src 'self'; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    )


class Guard:
    """The ASGI middleware that checks every HTTP request before any route sees it (see the module).

    Args:
        app: The application (every route, including ones mounted later).
        token: The bearer token to require, or None.
        allowed_hosts: Names (besides loopback names and IP addresses) that `Host` and `Origin` may
            carry; `*` allows any.
    """

    def __init__(self, app: ASGIApp, *, token: str | None = None, allowed_hosts: Iterable[str] = ()) -> None:
        self.app = app
        self.token = token
        digest = hashlib.sha256(b"mastrace serve cookie\0" + token.encode()).hexdigest() if token else ""
        self._cookie = (f"{TOKEN_COOKIE}_{digest[:8]}", digest)
        self.allowed = frozenset(h.strip().lower().rstrip(".") for h in allowed_hosts if h.strip())

    def host_allowed(self, name: str) -> bool:
        """Whether a request may name this host: loopback, an IP address, or allowed by the user."""
        return is_loopback(name) or _is_address(name) or "*" in self.allowed or name in self.allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or ()}
        refusal = self._refusal(headers, str(scope.get("path", "")))
        tokenless = refusal is None and self.token is not None and not self._token_given(headers)
        if scope["type"] == "websocket" and (refusal or tokenless):
            await send({"type": "websocket.close", "code": 1008})
            return
        if refusal is not None:
            await _answer(send, 403, refusal)
            return
        if scope["type"] == "http" and scope.get("path") == SIGNIN_PATH:
            await self._signin(str(scope.get("method", "GET")), headers, send)
            return
        if tokenless:
            assert self.token is not None
            query = dict(parse_qsl(scope.get("query_string", b"").decode("utf-8", "replace")))
            if scope.get("method") == "GET" and hmac.compare_digest(
                query.get("token", "").encode(), self.token.encode()
            ):
                await self._grant(scope, query, send)
                return
            await _answer(
                send, 401, "a token is required (Authorization: Bearer …)", [(b"www-authenticate", b"Bearer")]
            )
            return
        await self.app(scope, receive, _with_safety_headers(send))

    def _refusal(self, headers: dict[str, str], path: str = "") -> str | None:
        """Why the request is refused (403), or None."""
        host = headers.get("host")
        if host is not None and not self.host_allowed(_hostname(host)):
            return (
                f"Host {_hostname(host)!r} is not this server's: requests must name it by a loopback "
                "name or an IP address (or start serve with --allow-host)"
            )
        origin = headers.get("origin")
        if origin is not None:
            name = (urlsplit(origin).hostname or "") if origin != "null" else ""
            same = host is not None and name == _hostname(host)
            if not name or not (is_loopback(name) or name in self.allowed or "*" in self.allowed or same):
                return f"requests from the web page at {origin!r} are refused"
            # A page on another port of this host (any local program's) is another origin: it reads
            # nothing without the token in its own Authorization header (a cookie is sent to every
            # port of a host, so it does not count).
            reading = path not in _INTAKE_PATHS  # a page may send spans (an OTLP exporter in a web app)
            if reading and not _same_origin(origin, host) and not self._bearer_given(headers):
                return f"requests from the web page at {origin!r} (another origin) need the token"
        if headers.get("sec-fetch-site") == "cross-site":
            return "requests from another site's web page are refused"
        return None

    def _bearer_given(self, headers: dict[str, str]) -> bool:
        """Whether the request carries the token in `Authorization` (never true without a token)."""
        if self.token is None:
            return False
        value = headers.get("authorization", "").strip()
        if value[:7].lower() == "bearer ":
            value = value[7:].strip()
        return bool(value) and hmac.compare_digest(value.encode("latin-1"), self.token.encode())

    def _token_given(self, headers: dict[str, str]) -> bool:
        assert self.token is not None
        # `Bearer <token>`, or the token alone: Logfire's query client sends its read token that way.
        value = headers.get("authorization", "").strip()
        if value[:7].lower() == "bearer ":
            value = value[7:].strip()
        # Headers were decoded as latin-1: encoding back gives the bytes sent (UTF-8 for a non-ASCII token).
        if value and hmac.compare_digest(value.encode("latin-1"), self.token.encode()):
            return True
        name, digest = self._cookie
        for part in headers.get("cookie", "").split(";"):
            given, _, value = part.strip().partition("=")
            if given == name and hmac.compare_digest(value.encode("latin-1"), digest.encode()):
                return True
        return False

    async def _signin(self, method: str, headers: dict[str, str], send: Send) -> None:
        """`GET /signin`: the page that reads the token from its fragment; `POST /signin` with the
        token in `Authorization`: the cookie, or 401 for another token."""
        if method in ("GET", "HEAD"):
            body = SIGNIN_PAGE.encode()
            policy = page_policy(SIGNIN_PAGE).encode()
            extra = [(b"content-security-policy", policy), (b"cache-control", b"no-store")]
            await _answer(send, 200, "", extra, body=body, media=b"text/html; charset=utf-8")
        elif method != "POST":
            await _answer(send, 405, "GET or POST", [(b"allow", b"GET, POST")])
        elif self.token is None:
            await _answer(send, 200, "no token is needed")
        elif self._bearer_given(headers):
            await _answer(send, 200, "signed in", [(b"set-cookie", self._cookie_header().encode())])
        else:
            await _answer(send, 401, "the token is not accepted", [(b"www-authenticate", b"Bearer")])

    def _cookie_header(self) -> str:
        name, digest = self._cookie
        return f"{name}={digest}; HttpOnly; SameSite=Strict; Path=/"

    async def _grant(self, scope: Scope, query: dict[str, str], send: Send) -> None:
        """`?token=` on a page load: set the cookie the page's own requests carry, and go to the URL
        without the token (so that it is not left in the address bar or the history)."""
        rest = urlencode({k: v for k, v in query.items() if k != "token"})
        # The path as sent (still percent-encoded), with one leading slash: `//name/` would leave this host.
        path = "/" + (scope.get("raw_path") or scope.get("path", "/").encode()).decode("latin-1").lstrip("/")
        location = path + (f"?{rest}" if rest else "")
        cookie = self._cookie_header()
        await _answer(send, 303, "", [(b"location", location.encode()), (b"set-cookie", cookie.encode())])


def _same_origin(origin: str, host: str | None) -> bool:
    """Whether the page at `origin` is this server's own (same host and port as the `Host` it asked)."""
    if host is None:
        return False
    parts = urlsplit(origin)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        asked = urlsplit(f"//{host}")
        asked_port = asked.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return False
    return (parts.hostname or "") == (asked.hostname or "") and port == asked_port


def _with_safety_headers(send: Send) -> Send:
    """`send` adding `SAFETY_HEADERS` and (unless the route set its own) `STRICT_POLICY` to the answer."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers") or ())
            names = {name.lower() for name, _ in headers}
            headers += [(name, value) for name, value in SAFETY_HEADERS if name not in names]
            if b"content-security-policy" not in names:
                headers.append((b"content-security-policy", STRICT_POLICY.encode()))
            message = {**message, "headers": headers}
        await send(message)

    return sending


async def _answer(
    send: Send,
    status: int,
    text: str,
    headers: list[tuple[bytes, bytes]] | None = None,
    *,
    body: bytes | None = None,
    media: bytes = b"text/plain; charset=utf-8",
) -> None:
    send = _with_safety_headers(send)
    body = text.encode("utf-8") if body is None else body
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", media),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
