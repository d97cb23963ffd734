"""The OTLP/HTTP (Starlette on Uvicorn) and OTLP/gRPC (grpcio) servers of `mastrace serve`."""

from __future__ import annotations

import asyncio
import gzip
import threading
import time
import zlib
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..exceptions import MastraceError
from ._intake import Intake, IntakeError, decode_request
from ._query_api import query_routes
from ._ui import ui_routes

__all__ = ["MAX_BODY_BYTES", "IntakeServer", "start_intake"]

MAX_BODY_BYTES = 32 * 1024 * 1024
"""A request body larger than this (after decompression too) is refused with 413."""


def _http_app(intake: Intake, max_body: int) -> Any:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    async def traces(request: Request) -> Response:
        chunks: list[bytes] = []
        size = 0
        async for part in request.stream():  # read to the end, so the sender gets the answer
            size += len(part)
            if size <= max_body:
                chunks.append(part)
            elif size > 8 * max_body:
                break  # past this, the connection is dropped rather than read
        if size > max_body:
            return PlainTextResponse(f"request body of {size}+ bytes is over the limit of {max_body}", 413)
        body = b"".join(chunks)
        encoding = request.headers.get("content-encoding", "").lower()
        try:
            if encoding == "gzip":
                body = _bounded(gzip.decompress(body), max_body)
            elif encoding == "deflate":
                body = _bounded(zlib.decompress(body), max_body)
            elif encoding not in ("", "identity"):
                return PlainTextResponse(f"unsupported content-encoding {encoding!r}", 415)
        except _TooLarge as exc:
            return PlainTextResponse(str(exc), 413)
        except (OSError, zlib.error, EOFError) as exc:
            return PlainTextResponse(f"body is not valid {encoding}: {exc}", 400)
        content_type = request.headers.get("content-type", "application/x-protobuf").lower()
        try:
            parsed = decode_request(body, content_type)
        except IntakeError as exc:
            return PlainTextResponse(str(exc), 400)
        rejected, reason = await asyncio.to_thread(intake.ingest, parsed)
        reply = ExportTraceServiceResponse()
        if rejected:
            reply.partial_success.rejected_spans = rejected
            reply.partial_success.error_message = reason
        if "json" in content_type:
            from google.protobuf import json_format

            return JSONResponse(json_format.MessageToDict(reply))
        return Response(reply.SerializeToString(), media_type="application/x-protobuf")

    async def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    return Starlette(
        routes=[
            Route("/v1/traces", traces, methods=["POST"]),
            Route("/health", health),
            *ui_routes(intake.store),
            *query_routes(intake.store),
        ]
    )


class _TooLarge(ValueError):
    pass


def _bounded(data: bytes, limit: int) -> bytes:
    if len(data) > limit:
        raise _TooLarge(f"decompressed body is over the limit of {limit} bytes")
    return data


def _grpc_server(intake: Intake, host: str, port: int, max_body: int) -> tuple[Any, int]:
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

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="mastrace-grpc"),
        options=[("grpc.max_receive_message_length", max_body)],
    )
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)  # type: ignore[no-untyped-call]
    bound = server.add_insecure_port(f"{host}:{port}")
    if not bound:
        raise MastraceError(f"cannot listen for OTLP/gRPC on {host}:{port}")
    server.start()
    return server, bound


@dataclass
class IntakeServer:
    """A running intake: its ports, and `stop()`."""

    intake: Intake
    host: str
    http_port: int | None
    grpc_port: int | None
    _uvicorn: Any = None
    _thread: threading.Thread | None = None
    _grpc: Any = None
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
        self.intake.close()


def start_intake(
    store: str | Path,
    *,
    host: str = "127.0.0.1",
    http_port: int | None = 4318,
    grpc_port: int | None = 4317,
    scrub: bool = True,
    max_body: int = MAX_BODY_BYTES,
) -> IntakeServer:
    """Start the OTLP servers on background threads; port 0 picks a free port, None turns one off.

    Raises:
        MastraceError: A port cannot be listened on, or the `serve` extra is not installed.
    """
    from ..scrubbing._options import ScrubbingOptions

    try:
        import uvicorn
    except ImportError as exc:
        raise MastraceError("mastrace serve needs the serve extra: pip install 'mastrace[serve]'") from exc
    intake = Intake(store, ScrubbingOptions() if scrub else None)
    server = IntakeServer(intake, host, None, None)
    if grpc_port is not None:
        server._grpc, server.grpc_port = _grpc_server(intake, host, grpc_port, max_body)
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
            _http_app(intake, max_body), log_level="warning", access_log=False, lifespan="off"
        )
        server._uvicorn = uvicorn.Server(config)
        server._thread = threading.Thread(
            target=server._uvicorn.run, kwargs={"sockets": [sock]}, name="mastrace-serve-http", daemon=True
        )
        server._thread.start()
        deadline = time.monotonic() + 10
        while not server._uvicorn.started and time.monotonic() < deadline:
            time.sleep(0.01)
    return server
