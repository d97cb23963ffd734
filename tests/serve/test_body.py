"""Bodies cannot flood `serve`: bombs are stopped while they inflate, bodies in flight are capped
(503 + Retry-After), and clients that trickle headers or bodies are dropped."""

from __future__ import annotations

import gzip
import socket
import threading
import time
import zlib
from collections.abc import Callable

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from mastrace.serve import IntakeServer

from .conftest import ServeProcess, raw_http, read_reply, request, wait_for
from .test_guard import spans_body, stored

PROTOBUF = {"Content-Type": "application/x-protobuf"}


def bomb(size: int, encoding: str = "gzip") -> bytes:
    """`size` zero bytes compressed (about 1000× smaller), made a megabyte at a time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS)
    zeros = b"\0" * (1 << 20)
    parts = [packer.compress(zeros) for _ in range(size >> 20)]
    return b"".join(parts) + packer.flush()


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_compression_bomb_gets_413_and_writes_nothing(server: IntakeServer, encoding: str) -> None:
    """A small body inflating far past the limit is refused while inflating (413)."""
    body = bomb(64 * 1024 * 1024, encoding)
    headers = {**PROTOBUF, "Content-Encoding": encoding}
    reply = raw_http(server.http_port or 0, request("POST", "/v1/traces", body, headers=headers))
    assert reply.status == 413 and b"inflates past the limit" in reply.body
    assert stored(server.intake.store) == 0
    assert server.budget is not None and server.budget.used == 0  # nothing stays reserved


@pytest.mark.slow
def test_a_1_gib_gzip_bomb_costs_the_server_little_memory(serve_process: Callable[..., ServeProcess]) -> None:
    """A 1 MB body inflating to 1 GiB: 413, and the server's peak memory stays far below it."""
    served = serve_process()
    body = bomb(1024**3)
    assert len(body) < 2 * 1024 * 1024
    headers = {**PROTOBUF, "Content-Encoding": "gzip"}
    reply = raw_http(served.http_port, request("POST", "/v1/traces", body, headers=headers))
    assert reply.status == 413
    assert served.peak_rss_mb() < 300, served.peak_rss_mb()


def test_bad_encodings_and_truncated_streams_are_refused(server: IntakeServer) -> None:
    """An unknown encoding is 415; a gzip stream cut short or not gzip at all is 400."""
    body, _ = spans_body()
    port = server.http_port or 0
    cases = [
        ({"Content-Encoding": "br"}, body, 415),
        ({"Content-Encoding": "gzip"}, gzip.compress(body)[:-12], 400),
        ({"Content-Encoding": "gzip"}, b"not gzip at all", 400),
        ({"Content-Encoding": "deflate"}, zlib.compress(body)[2:], 200),  # raw deflate, as some send it
    ]
    for extra, data, status in cases:
        reply = raw_http(port, request("POST", "/v1/traces", data, headers={**PROTOBUF, **extra}))
        assert reply.status == status, (extra, reply.body)


def test_a_declared_body_over_the_limit_is_refused_before_it_is_read(server: IntakeServer) -> None:
    """`Content-Length` past the limit: 413 at once, without the body being sent."""
    headers = {**PROTOBUF, "Content-Length": str(10 * 1024**3)}
    reply = raw_http(server.http_port or 0, request("POST", "/v1/traces", headers=headers))
    assert reply.status == 413


def test_bodies_past_the_in_flight_budget_get_503_with_retry_after(server: IntakeServer) -> None:
    """While bodies fill the budget, another sender gets 503 and `Retry-After`; retrying as told
    delivers every span (nothing lost)."""
    port = server.http_port or 0
    held = []
    for _ in range(2):  # two senders declaring 2 MB each and sending it slowly: the 4 MiB budget is full
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(request("POST", "/v1/traces", headers={**PROTOBUF, "Content-Length": str(2_097_000)}))
        sock.sendall(b"\0" * 1000)
        held.append(sock)
    wait_for(lambda: server.budget is not None and server.budget.used >= 4_194_000, "the budget to fill")
    body, _ = spans_body(5)
    refused = raw_http(port, request("POST", "/v1/traces", body, headers=PROTOBUF))
    assert refused.status == 503 and refused.headers.get("retry-after") == "1"
    for sock in held:
        sock.close()
    wait_for(lambda: server.budget is not None and server.budget.used == 0, "the budget to be given back")
    retried = raw_http(port, request("POST", "/v1/traces", body, headers=PROTOBUF))
    assert retried.status == 200 and stored(server.intake.store) == 5


def test_concurrent_senders_through_the_sdk_lose_nothing(server: IntakeServer) -> None:
    """Eight SDK exporters at once: every span lands once (503s, if any, are retried by the SDK)."""
    url = f"http://127.0.0.1:{server.http_port}/v1/traces"

    def send(i: int) -> None:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(HttpExporter(endpoint=url, timeout=60)))
        tracer = provider.get_tracer("burst")
        for n in range(20):
            with tracer.start_as_current_span(f"s{i}.{n}", attributes={"pad": "x" * 20_000}):
                pass
        provider.shutdown()

    threads = [threading.Thread(target=send, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert stored(server.intake.store) == 160


def test_slowloris_clients_are_dropped_and_others_still_served(server: IntakeServer) -> None:
    """Fifty clients trickling header bytes are disconnected after the header timeout, while a real
    sender is served meanwhile."""
    port = server.http_port or 0
    slow = []
    for _ in range(50):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        slow.append(sock)
    body, _ = spans_body()
    assert raw_http(port, request("POST", "/v1/traces", body, headers=PROTOBUF)).status == 200
    dropped = 0
    give_up = time.monotonic() + 120  # generous: the timeout is 1 s
    for sock in slow:
        sock.settimeout(max(0.1, give_up - time.monotonic()))
        try:
            while True:
                sock.sendall(b"X-Slow: 1\r\n")  # keep trickling until the server closes
                if sock.recv(1) == b"":
                    dropped += 1
                    break
        except TimeoutError:
            pass
        except OSError:  # reset: dropped too
            dropped += 1
        finally:
            sock.close()
    assert dropped == 50


def test_a_body_that_stops_arriving_gets_408(server: IntakeServer) -> None:
    """Headers whole, body cut short and then silence: 408 once the body timeout passes."""
    with socket.create_connection(("127.0.0.1", server.http_port or 0), timeout=600) as sock:
        sock.sendall(
            request("POST", "/v1/traces", headers={**PROTOBUF, "Content-Length": "1000"}) + b"\0" * 10
        )
        reply = read_reply(sock)
    assert reply.status == 408
    assert server.budget is not None and server.budget.used == 0
