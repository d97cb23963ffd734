"""Every route of `serve` behind one guard: a web page cannot post spans (CSRF), read them through a
rebound DNS name, or reach the server from another site; a token protects intake, UI and API."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from mastrace.exceptions import ConfigError, MastraceError
from mastrace.serve import IntakeServer, resolve_token, start_intake
from mastrace.store import query

from .conftest import ServeProcess, raw_http, request

TOKEN = "t0ken-for-the-serve-tests"
SINCE = datetime(2000, 1, 1, tzinfo=timezone.utc)  # every span the tests send is later


def stored(store: Path) -> int:
    if not (store / "segments").is_dir():
        return 0
    return int(query("SELECT count(*) AS n FROM records", store)[0]["n"])


def spans_body(n: int = 3) -> tuple[bytes, list[ReadableSpan]]:
    """A real OTLP protobuf body of `n` spans, made by the SDK's own encoder."""
    kept: list[ReadableSpan] = []

    class Keep(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            kept.extend(spans)  # type: ignore[call-overload]
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Keep()))
    tracer = provider.get_tracer("guard")
    with tracer.start_as_current_span("coordination.session"):
        for i in range(n - 1):
            with tracer.start_as_current_span(f"agent.a.round_{i}"):
                pass
    provider.shutdown()
    return encode_spans(kept).SerializeToString(), kept


def send(exporter: SpanExporter) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("guard").start_as_current_span("sent"):
        pass
    provider.shutdown()


# -- CSRF: what a form or a `fetch` without a preflight may send ----------------------------------
@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain; charset=utf-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        None,
        "application/xml",
    ],
)
def test_bodies_not_labelled_otlp_are_refused_with_415(
    server: IntakeServer, content_type: str | None
) -> None:
    """A protobuf body sent as text, a form or with no type at all is never parsed: 415, nothing stored."""
    body, _ = spans_body()
    headers = {"Content-Type": content_type} if content_type else {}
    reply = raw_http(server.http_port or 0, request("POST", "/v1/traces", body, headers=headers))
    assert reply.status == 415 and b"application/x-protobuf" in reply.body
    assert stored(server.intake.store) == 0


@pytest.mark.parametrize("origin", ["http://evil.example", "https://evil.example:4318", "null", "file://"])
def test_a_request_from_another_origin_is_refused_with_403(server: IntakeServer, origin: str) -> None:
    """Even with the right content type, a request carrying another site's Origin gets 403."""
    body, _ = spans_body()
    headers = {"Content-Type": "application/x-protobuf", "Origin": origin}
    reply = raw_http(server.http_port or 0, request("POST", "/v1/traces", body, headers=headers))
    assert reply.status == 403 and stored(server.intake.store) == 0


def test_a_cross_site_load_of_any_url_is_refused(server: IntakeServer) -> None:
    """An image or script tag on another site (no Origin, `Sec-Fetch-Site: cross-site`) gets 403."""
    reply = raw_http(
        server.http_port or 0, request("GET", "/api/runs", headers={"Sec-Fetch-Site": "cross-site"})
    )
    assert reply.status == 403


def test_loopback_origins_are_served(server: IntakeServer) -> None:
    """The server's own pages (and tools on this machine) send a loopback Origin: they get in."""
    body, _ = spans_body()
    for origin in (f"http://127.0.0.1:{server.http_port}", "http://localhost:3000", "http://[::1]:8080"):
        headers = {"Content-Type": "application/x-protobuf", "Origin": origin}
        assert (
            raw_http(server.http_port or 0, request("POST", "/v1/traces", body, headers=headers)).status
            == 200
        )
    assert stored(server.intake.store) == 3  # the same 3 spans each time, shown once


# -- DNS rebinding: a name the attacker controls, resolving to 127.0.0.1 ----------------------------
@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/api/runs",
        "/api/runs/latest/spans",
        "/runs/latest/report",
        "/runs/latest/view",
        "/api/diff?a=latest&b=latest",
        "/health",
    ],
)
def test_a_rebinding_host_reads_nothing(server: IntakeServer, path: str) -> None:
    """`Host: evil.example:4318` gets 403 on every route, with no data; the same request by a
    loopback name or address is served."""
    send(HttpExporter(endpoint=f"http://127.0.0.1:{server.http_port}/v1/traces"))
    refused = raw_http(server.http_port or 0, request("GET", path, host=f"evil.example:{server.http_port}"))
    assert refused.status == 403 and b"sent" not in refused.body and b"trace" not in refused.body.lower()
    for host in (f"localhost:{server.http_port}", f"127.0.0.1:{server.http_port}", "[::1]", "app.localhost"):
        assert raw_http(server.http_port or 0, request("GET", path, host=host)).status == 200, host


def test_allow_host_lets_a_named_host_in(tmp_path: Path) -> None:
    """A name given with `allow_hosts` (`--allow-host`) is served; others are still refused."""
    server = start_intake(tmp_path / "s", http_port=0, grpc_port=None, allow_hosts=("tracing.lan",))
    try:
        port = server.http_port or 0
        assert raw_http(port, request("GET", "/health", host="tracing.lan:4318")).status == 200
        assert raw_http(port, request("GET", "/health", host="evil.example")).status == 403
    finally:
        server.stop()


def test_a_route_mounted_later_is_guarded_too(server: IntakeServer) -> None:
    """The guard wraps the whole app: a route added after start (another module's API) is covered."""
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    async def secret(request: object) -> PlainTextResponse:
        return PlainTextResponse("secret data")

    app = server._uvicorn.config.loaded_app
    while not hasattr(app, "router"):  # uvicorn's own wrappers, then the guard, then Starlette
        app = app.app
    app.router.routes.append(Route("/v9/secret", secret, methods=["POST"]))
    port = server.http_port or 0
    assert raw_http(port, request("POST", "/v9/secret", host="evil.example")).status == 403
    assert raw_http(port, request("POST", "/v9/secret")).body == b"secret data"


# -- the token -------------------------------------------------------------------------------------
@pytest.fixture
def guarded(tmp_path: Path) -> IntakeServer:
    server = start_intake(tmp_path / "store", http_port=0, grpc_port=0, token=TOKEN)
    yield server
    server.stop()


@pytest.mark.parametrize("path", ["/v1/traces", "/", "/api/runs", "/runs/latest/view", "/health"])
def test_without_the_token_every_route_says_401(guarded: IntakeServer, path: str) -> None:
    """No token, or a wrong one: 401 on intake, pages and API alike."""
    port = guarded.http_port or 0
    method = "POST" if path == "/v1/traces" else "GET"
    body, _ = spans_body() if method == "POST" else (b"", [])
    for auth in (
        {},
        {"Authorization": "Bearer wrong-token-wrong-token"},
        {"Authorization": f"Basic {TOKEN}"},
    ):
        headers = {"Content-Type": "application/x-protobuf", **auth}
        reply = raw_http(port, request(method, path, body, headers=headers))
        assert reply.status == 401 and reply.headers.get("www-authenticate") == "Bearer"
    assert stored(guarded.intake.store) == 0


def test_logfires_query_client_reads_with_the_token_as_its_read_token(guarded: IntakeServer) -> None:
    """Logfire's client sends its read token bare (no `Bearer`): the serve token is taken that way too."""
    from logfire.query_client import LogfireQueryClient

    send(
        HttpExporter(
            endpoint=f"http://127.0.0.1:{guarded.http_port}/v1/traces",
            timeout=10,
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
    )
    url = f"http://127.0.0.1:{guarded.http_port}"
    with LogfireQueryClient(TOKEN, base_url=url) as client:
        rows = client.query_json_rows("SELECT count(*) AS n FROM records", min_timestamp=SINCE)["rows"]
    assert rows == [{"n": stored(guarded.intake.store)}] and rows[0]["n"] > 0
    with (
        LogfireQueryClient("wrong-token-wrong-token", base_url=url) as client,
        pytest.raises(Exception) as caught,
    ):
        client.query_json_rows("SELECT count(*) AS n FROM records", min_timestamp=SINCE)
    assert "401" in str(caught.value) or "token" in str(caught.value).lower()


def test_the_sdk_exporters_send_with_the_token(guarded: IntakeServer) -> None:
    """The Python SDK's HTTP and gRPC exporters deliver once given the header; without it, nothing."""
    url = f"http://127.0.0.1:{guarded.http_port}/v1/traces"
    send(HttpExporter(endpoint=url, timeout=10))
    send(GrpcExporter(endpoint=f"127.0.0.1:{guarded.grpc_port}", insecure=True, timeout=5))
    assert stored(guarded.intake.store) == 0
    send(HttpExporter(endpoint=url, headers={"Authorization": f"Bearer {TOKEN}"}))
    send(
        GrpcExporter(
            endpoint=f"127.0.0.1:{guarded.grpc_port}",
            insecure=True,
            headers={"authorization": f"Bearer {TOKEN}"},
        )
    )
    assert stored(guarded.intake.store) == 2


def test_a_page_opened_with_the_token_keeps_a_cookie(guarded: IntakeServer) -> None:
    """`?token=` on a page sets an HttpOnly, SameSite=Strict cookie and leaves the URL; the cookie
    then opens the API (what the page's own requests carry)."""
    port = guarded.http_port or 0
    first = raw_http(port, request("GET", f"/?token={TOKEN}&x=1"))
    assert first.status == 303 and first.headers["location"] == "/?x=1"
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    value = cookie.split(";", 1)[0]
    assert raw_http(port, request("GET", "/api/runs", headers={"Cookie": value})).status == 200
    assert raw_http(port, request("GET", "/?token=wrong")).status == 401


def test_the_sign_in_page_trades_the_token_in_a_header_for_the_cookie(guarded: IntakeServer) -> None:
    """`GET /signin` answers a page (no data) whose only script is allowed by its hash; `POST /signin`
    with the token in `Authorization` sets the cookie, which then opens the API; another token, 401."""
    import base64
    import hashlib
    import re

    port = guarded.http_port or 0
    page = raw_http(port, request("GET", "/signin"))
    assert page.status == 200 and page.headers["content-type"].startswith("text/html")
    (script,) = re.findall(r"<script>(.*?)</script>", page.body.decode(), re.DOTALL)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    policy = page.headers["content-security-policy"]
    assert f"'sha256-{digest}'" in policy and "connect-src 'self'" in policy
    assert "location.hash" in script and "coordination" not in page.body.decode()
    refused = raw_http(
        port, request("POST", "/signin", headers={"Authorization": "Bearer wrong-token-xxxxxx"})
    )
    assert refused.status == 401 and "set-cookie" not in refused.headers
    taken = raw_http(port, request("POST", "/signin", headers={"Authorization": f"Bearer {TOKEN}"}))
    assert taken.status == 200
    cookie = taken.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
    value = cookie.split(";", 1)[0]
    assert raw_http(port, request("GET", "/api/runs", headers={"Cookie": value})).status == 200


@pytest.mark.parametrize("path", ["//evil.example/", "///evil.example/x", "/%2F%2Fevil.example/"])
def test_the_token_redirect_stays_on_this_server(guarded: IntakeServer, path: str) -> None:
    """A link to `//other.host/?token=` must not send the browser (with its new cookie) elsewhere:
    the redirect names a path on this server, never a network location."""
    port = guarded.http_port or 0
    reply = raw_http(port, request("GET", f"{path}?token={TOKEN}"))
    assert reply.status == 303
    location = reply.headers["location"]
    assert location.startswith("/") and not location.startswith("//"), location
    assert TOKEN not in location and TOKEN not in reply.headers["set-cookie"]


def test_the_token_comes_from_the_flag_or_the_environment() -> None:
    """`--token` beats `MASTRACE_SERVE_TOKEN`; a short token is refused; none means none."""
    assert resolve_token("x" * 20, {"MASTRACE_SERVE_TOKEN": "y" * 20}) == "x" * 20
    assert resolve_token(None, {"MASTRACE_SERVE_TOKEN": "y" * 20}) == "y" * 20
    assert resolve_token(None, {}) is None and resolve_token("  ", {}) is None
    with pytest.raises(ConfigError, match="at least 16"):
        resolve_token("short", {})


def test_off_loopback_a_token_is_required(tmp_path: Path, serve_process: Callable[..., ServeProcess]) -> None:
    """Listening on all interfaces without a token is refused at start (exit 2 from the command)."""
    with pytest.raises(MastraceError, match="needs a token"):
        start_intake(tmp_path / "s", host="0.0.0.0", http_port=0, grpc_port=None)
    import sys

    from .conftest import MASTRACE

    proc = subprocess.run(
        [str(MASTRACE), "serve", "--host", "0.0.0.0", "--http-port", "0", "--store", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=600,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert proc.returncode == 2 and "needs a token" in proc.stderr, (proc.stderr, sys.executable)
    served = serve_process("--host", "0.0.0.0", env={"MASTRACE_SERVE_TOKEN": TOKEN})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(served.url + "/api/runs", timeout=60)
    assert caught.value.code == 401
    auth = urllib.request.Request(served.url + "/api/runs", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(auth, timeout=60) as reply:
        assert json.loads(reply.read()) == []
