"""The OTLP/HTTP (Starlette on Uvicorn) and OTLP/gRPC (grpcio) servers of `mastrace serve`.

Intake, UI and API routes all sit behind one `Guard` (Host, Origin, token). Bodies are read with
bounded memory and time (`_body`), decoded and written on the intake's own thread, and UI reads run
on a pool of their own with one DuckDB thread, so that an open page never delays intake. A client
that does not finish its request headers within `header_timeout` seconds is disconnected.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ..exceptions import MastraceError
from ._body import Body, BodyError, Budget, drain, read_body
from ._guard import Guard, needs_token
from ._intake import CONTENT_TYPES, Intake, IntakeError, decode_request, media_type
from ._otlp_json import OtlpJsonError, json_spans
from ._query_api import query_routes
from ._ui import ui_routes

__all__ = ["MAX_BODY_BYTES", "MAX_IN_FLIGHT_BYTES", "IntakeServer", "ServeOptions", "start_intake"]

MAX_BODY_BYTES: Final = 32 * 1024 * 1024
"""A request body larger than this (after decompression too) is refused with 413."""
MAX_IN_FLIGHT_BYTES: Final = 64 * 1024 * 1024
"""What all bodies in flight may hold at once (received and inflated); beyond it, 503 + Retry-After."""
_RETRY_AFTER: Final = "1"
_GRPC_STATUS = {400: 3, 408: 4, 413: 8, 415: 3, 503: 14}  # google.rpc.Code of each HTTP refusal


@dataclass(frozen=True)
class ServeOptions:
    """How `serve` protects itself (see `start_intake`)."""

    max_body: int = MAX_BODY_BYTES
    max_in_flight: int = MAX_IN_FLIGHT_BYTES
    token: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    header_timeout: float = 10.0
    body_idle_timeout: float = 10.0
    body_timeout: float = 120.0
    ui_workers: int = 2
    source: str | None = None
    """A `clickhouse://` or `chdb://` URL the UI and the Query API read instead of the store."""


def _status_body(status: int, message: str, media: str) -> tuple[bytes, str]:
    """An OTLP error body: a `google.rpc.Status`, as protobuf or JSON like the request."""
    try:
        from google.protobuf import json_format
        from google.rpc import status_pb2
    except ImportError:  # pragma: no cover - googleapis-common-protos comes with the OTLP exporters
        return message.encode(), "text/plain; charset=utf-8"
    reply = status_pb2.Status(code=_GRPC_STATUS.get(status, 2), message=message)
    if media == "application/json":
        return json_format.MessageToJson(reply, indent=None).encode(), "application/json"
    if media in CONTENT_TYPES:
        return reply.SerializeToString(), "application/x-protobuf"
    return message.encode(), "text/plain; charset=utf-8"


_METRICS_PATH: Final = "/v1/metrics"


def _http_app(intake: Intake, options: ServeOptions, budget: Budget, intake_pool: Any, ui_pool: Any) -> Any:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    def refuse(status: int, message: str, media: str) -> Response:
        body, kind = _status_body(status, message, media)
        headers = {"Retry-After": _RETRY_AFTER} if status in (429, 503) else None
        return Response(body, status_code=status, media_type=kind, headers=headers)

    def process(body: bytes, media: str) -> tuple[int, str]:
        if media == "application/json":
            return intake.ingest_spans(json_spans(body))
        return intake.ingest(decode_request(body, media))

    async def traces(request: Request) -> Response:
        media = media_type(request.headers.get("content-type"))
        if media not in CONTENT_TYPES:
            # What a web page can send without asking first (text/plain, forms) never gets in.
            return PlainTextResponse(
                f"unsupported content type {media or '(none)'!r}: OTLP/HTTP sends application/x-protobuf "
                "or application/json",
                415,
            )
        encoding = request.headers.get("content-encoding", "identity").strip().lower() or "identity"
        if encoding not in ("identity", "gzip", "deflate"):
            return PlainTextResponse(f"unsupported content-encoding {encoding!r}: use gzip or deflate", 415)
        try:
            length_header = request.headers.get("content-length")
            length = int(length_header) if length_header is not None else None
        except ValueError:
            return refuse(400, "the content-length is not a number", media)
        try:
            body: Body = await read_body(
                request.receive,
                encoding=encoding,
                length=length,
                limit=options.max_body,
                budget=budget,
                idle=options.body_idle_timeout,
                total=options.body_timeout,
            )
        except BodyError as exc:
            if exc.drain:
                await drain(request.receive, options.body_idle_timeout)
            return refuse(exc.status, str(exc), media)
        if request.url.path == _METRICS_PATH:
            # Metrics sent beside the spans (mastrace's GenAI histograms, any SDK's) are taken and
            # dropped: the store keeps spans only, and the spans hold the same numbers.
            body.release()
            return _ok(ExportMetricsServiceResponse(), media)
        try:
            loop = asyncio.get_running_loop()
            rejected, reason = await loop.run_in_executor(intake_pool, process, body.data, media)
        except (IntakeError, OtlpJsonError) as exc:
            return refuse(400, str(exc), media)
        finally:
            body.release()
        reply = ExportTraceServiceResponse()
        if rejected:
            reply.partial_success.rejected_spans = rejected
            reply.partial_success.error_message = reason
        return _ok(reply, media)

    def _ok(reply: Any, media: str) -> Response:
        if media == "application/json":
            from google.protobuf import json_format

            return JSONResponse(json_format.MessageToDict(reply))
        return Response(reply.SerializeToString(), media_type="application/x-protobuf")

    async def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    app = Starlette(
        routes=[
            Route("/v1/traces", traces, methods=["POST"]),
            Route(_METRICS_PATH, traces, methods=["POST"]),
            Route("/health", health),
            *ui_routes(intake.store, ui_pool, options.source),
            *query_routes(intake.store, token=options.token, source=options.source),
        ]
    )
    # One guard in front of every route, those of this app and any mounted on it later.
    return Guard(app, token=options.token, allowed_hosts=options.allowed_hosts)


def _protocol(header_timeout: float) -> type:
    """Uvicorn's h11 protocol, disconnecting a client that takes more than `header_timeout` seconds
    to send a request's headers (slowloris), on a new connection or between keep-alive requests."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderTimeoutProtocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(header_timeout, self._too_slow)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _too_slow(self) -> None:
            self._header_timer = None
            if not self.transport.is_closing():
                self.transport.close()

        def handle_events(self) -> None:
            cycle = self.cycle
            super().handle_events()
            if self.cycle is not cycle:  # a request's headers are complete
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
                self._arm()  # the next request on this connection gets the same time

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderTimeoutProtocol


def _check_free(host: str, port: int) -> None:
    """Refuse a gRPC port another process listens on, with the one line a taken HTTP port gets
    (grpcio would print its own error first, or share the port through SO_REUSEPORT)."""
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise MastraceError(f"cannot listen for OTLP/gRPC on {host}:{port}: {exc.strerror}") from exc


def _grpc_server(
    intake: Intake, host: str, port: int, options: ServeOptions, pool: futures.ThreadPoolExecutor
) -> tuple[Any, int]:
    if port:
        _check_free(host, port)
    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    class Service(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:
            rejected, reason = intake.ingest(request)
            reply = trace_service_pb2.ExportTraceServiceResponse()
            if rejected:
                reply.partial_success.rejected_spans = rejected
                reply.partial_success.error_message = reason
            return reply

    interceptors = [_TokenInterceptor(options.token)] if options.token else []
    server = grpc.server(
        pool,
        interceptors=interceptors,
        options=[
            ("grpc.max_receive_message_length", options.max_body),
            # Each message in flight is held decoded: as many as the HTTP budget allows bodies.
            ("grpc.max_concurrent_streams", 4),
            # grpcio binds with SO_REUSEPORT by default: a second serve would share the port (and
            # the spans) silently. Off, a taken port is refused as the HTTP port is.
            ("grpc.so_reuseport", 0),
        ],
        maximum_concurrent_rpcs=max(1, options.max_in_flight // options.max_body),
    )
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)  # type: ignore[no-untyped-call]
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError:  # grpcio raises where older versions returned 0
        bound = 0
    if not bound:
        raise MastraceError(f"cannot listen for OTLP/gRPC on {host}:{port} (is the port taken?)")
    server.start()
    return server, bound


class _TokenInterceptor:
    """Refuses gRPC calls without `authorization: Bearer <token>` (UNAUTHENTICATED)."""

    def __new__(cls, token: str) -> Any:
        import hmac

        import grpc

        def deny(request: Any, context: Any) -> Any:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "a token is required (authorization: Bearer …)")

        class Interceptor(grpc.ServerInterceptor):  # type: ignore[misc]
            def intercept_service(self, continuation: Any, details: Any) -> Any:
                given = dict(details.invocation_metadata or ()).get("authorization", "")
                scheme, _, value = given.partition(" ")
                if scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode()):
                    return continuation(details)
                return grpc.unary_unary_rpc_method_handler(deny)

        return Interceptor()


@dataclass
class IntakeServer:
    """A running intake: its ports, and `stop()`."""

    intake: Intake
    host: str
    http_port: int | None
    grpc_port: int | None
    options: ServeOptions = field(default_factory=ServeOptions)
    budget: Budget | None = None
    _uvicorn: Any = None
    _thread: threading.Thread | None = None
    _grpc: Any = None
    _pools: list[futures.ThreadPoolExecutor] = field(default_factory=list)
    stopped: bool = field(default=False)

    def stop(self) -> None:
        """Stop both servers (requests in flight finish) and close the store writer."""
        if self.stopped:
            return
        self.stopped = True
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._grpc is not None:
            self._grpc.stop(grace=2).wait(5)
        for pool in self._pools:
            pool.shutdown(wait=True, cancel_futures=True)
        self.intake.close()


def start_intake(
    store: str | Path,
    *,
    host: str = "127.0.0.1",
    http_port: int | None = 4318,
    grpc_port: int | None = 4317,
    scrub: bool = True,
    max_body: int = MAX_BODY_BYTES,
    max_in_flight: int = MAX_IN_FLIGHT_BYTES,
    token: str | None = None,
    allow_hosts: tuple[str, ...] = (),
    header_timeout: float = 10.0,
    body_timeout: float = 120.0,
    to: str | None = None,
    source: str | None = None,
) -> IntakeServer:
    """Start the OTLP servers on background threads; port 0 picks a free port, None turns one off.

    Args:
        store: The store folder spans are written to.
        host: The address to listen on (loopback by default).
        http_port: The OTLP/HTTP (and UI) port; 0 picks one, None turns it off.
        grpc_port: The OTLP/gRPC port; 0 picks one, None turns it off.
        scrub: Scrub received spans like in-process export.
        max_body: The largest request body, received and inflated.
        max_in_flight: What all bodies in flight may hold at once; beyond it, 503 with Retry-After.
        token: A bearer token every request must carry (see `resolve_token`); required when `host`
            is not a loopback address.
        allow_hosts: Names (besides loopback names and IP addresses) that requests may use in their
            `Host` and `Origin`, e.g. the machine's name when serving on the network.
        header_timeout: Seconds a client has to send a request's headers.
        body_timeout: Seconds a client has to send a request's body (and 10 s between its parts).
        to: Write received spans into ClickHouse's `otel_traces` at this `clickhouse://` or
            `chdb://` URL instead of the store (the table is created with the OpenTelemetry
            Collector's schema when missing).
        source: Show ClickHouse's `otel_traces` at this URL in the UI, the Query API and MCP
            instead of the store (e.g. the table the team's Collector writes).

    Raises:
        MastraceError: A port cannot be listened on, a token is missing off loopback, or the
            `serve` extra is not installed.
    """
    from ..scrubbing._options import ScrubbingOptions

    try:
        import uvicorn
    except ImportError as exc:
        raise MastraceError("mastrace serve needs the serve extra: pip install 'mastrace[serve]'") from exc
    if token is None and needs_token(host):
        raise MastraceError(
            f"serving on {host}, which is not a loopback address, needs a token: pass --token or set "
            "MASTRACE_SERVE_TOKEN (senders then add the header Authorization: Bearer <token>)"
        )
    options = ServeOptions(
        max_body=max_body,
        max_in_flight=max(max_in_flight, max_body),
        token=token,
        allowed_hosts=tuple(allow_hosts),
        header_timeout=header_timeout,
        body_timeout=body_timeout,
        source=source,
    )
    destination = None
    if to is not None:
        from ..exceptions import StoreError
        from ..store._clickhouse import ClickHouseWriter, parse_target

        try:
            destination = ClickHouseWriter(parse_target(to))
        except StoreError as exc:
            raise MastraceError(str(exc)) from exc
    intake = Intake(store, ScrubbingOptions() if scrub else None, destination)
    budget = Budget(options.max_in_flight)
    server = IntakeServer(intake, host, None, None, options, budget)
    # Decoding and writing hold the interpreter: one thread, so that a burst queues instead of
    # piling up decoded requests; gRPC calls run on it too.
    intake_pool = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mastrace-intake")
    grpc_pool = futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="mastrace-grpc")
    # Pages read on threads of their own: a slow read never holds a thread intake waits for.
    ui_pool = futures.ThreadPoolExecutor(max_workers=options.ui_workers, thread_name_prefix="mastrace-ui")
    server._pools.extend([intake_pool, grpc_pool, ui_pool])
    if grpc_port is not None:
        server._grpc, server.grpc_port = _grpc_server(intake, host, grpc_port, options, grpc_pool)
    if http_port is not None:
        import socket

        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, http_port))
        except OSError as exc:
            server.stop()
            raise MastraceError(f"cannot listen for OTLP/HTTP on {host}:{http_port}: {exc.strerror}") from exc
        server.http_port = sock.getsockname()[1]
        config = uvicorn.Config(
            _http_app(intake, options, budget, intake_pool, ui_pool),
            log_level="warning",
            access_log=False,
            lifespan="off",
            http=_protocol(options.header_timeout),
            timeout_keep_alive=5,
            h11_max_incomplete_event_size=64 * 1024,
        )
        server._uvicorn = uvicorn.Server(config)
        server._thread = threading.Thread(
            target=server._uvicorn.run, kwargs={"sockets": [sock]}, name="mastrace-serve-http", daemon=True
        )
        server._thread.start()
        deadline = time.monotonic() + 60  # start-up, on a loaded machine; never a speed requirement
        while not server._uvicorn.started and server._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
    return server
