"""Sending stored spans to an OTLP receiver for `mastrace push`, believing only what the receiver says.

- A destination is its resolved endpoint (scheme, address, port, path): `localhost` and `127.0.0.1`
  are one receiver, so what one of them took is not sent again through the other.
- A redirect is followed only to the same origin, carrying the same request; to another origin it
  is an error and nothing is marked as sent (a 301 must not turn into empty GETs that "delivered").
- A 2xx is a delivery only with an OTLP answer (empty, protobuf or JSON): an HTML page is an error.
  A partial success counts the spans the receiver rejected; OTLP asks not to send them again.
- 429, 502, 503 and 504 (gRPC: UNAVAILABLE, RESOURCE_EXHAUSTED) are retried a few times, after the
  receiver's `Retry-After` when it gives one.
- No answer within the timeout leaves the batch unmarked and says so.
"""

from __future__ import annotations

import email.utils
import gzip
import http.client
import ipaddress
import json
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urljoin, urlsplit

from opentelemetry.sdk.trace import ReadableSpan

from ..exceptions import MastraceError

__all__ = ["Delivery", "Sender", "endpoint_identity", "grpc_sender", "http_sender"]

RETRIES: Final = 5
MAX_WAIT: Final = 60.0  # the longest Retry-After honoured (a longer one is waited this long)
_REDIRECTS: Final = 5
_RETRYABLE: Final = frozenset({429, 502, 503, 504})


@dataclass(frozen=True)
class Delivery:
    """What the receiver said of one batch: how many of its spans it rejected, and why."""

    rejected: int = 0
    message: str = ""


Sender = Callable[[Sequence[ReadableSpan]], Delivery]


def endpoint_identity(url: str, protocol: str) -> str:
    """The destination `url` is, whatever it is called: scheme, address, port and path.

    Every loopback address is one (`localhost`, `127.0.0.1` and `[::1]` reach this machine);
    another host is named by the addresses it resolves to.

    Raises:
        MastraceError: The host cannot be resolved.
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise MastraceError(f"the port of {url!r} is not a number") from None
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise MastraceError(f"cannot resolve {host!r}: {exc}") from exc
    addresses = sorted({str(info[4][0]) for info in infos})
    loopback = all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)
    address = "loopback" if loopback else ",".join(addresses)
    if protocol == "grpc":
        return f"grpc+{scheme}://{address}:{port}"
    path = parts.path.rstrip("/")
    if not path.endswith("/v1/traces"):
        path += "/v1/traces"
    return f"{scheme}://{address}:{port}{path}"


def _retry_after(value: str | None, attempt: int) -> float:
    """Seconds to wait before attempt `attempt + 1`: the receiver's Retry-After (seconds or an HTTP
    date), else 1, 2, 4… seconds; never more than `MAX_WAIT`."""
    if value:
        value = value.strip()
        try:
            return min(MAX_WAIT, max(0.0, float(value)))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value) if value else None
            if when is not None:
                return min(MAX_WAIT, max(0.0, when.timestamp() - time.time()))
    return min(MAX_WAIT, float(2**attempt))


def _timed_out(where: str, timeout: float, spans: int) -> MastraceError:
    return MastraceError(
        f"{where} did not answer within {timeout:g} s (raise --timeout): the batch of {spans} span(s) was "
        "not marked as sent; it may have arrived, and the next push sends it again (a mastrace store "
        "shows a span sent twice once)"
    )


def _otlp_reply(status: int, media: str, body: bytes, url: str) -> Delivery:
    """The partial success of a 2xx answer; an answer that is not OTLP is an error."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    if not body.strip():
        return Delivery()
    if media in ("application/x-protobuf", "application/protobuf"):
        try:
            partial = ExportTraceServiceResponse.FromString(body).partial_success
        except Exception as exc:
            raise MastraceError(
                f"{url} answered {status} with a protobuf body that is not OTLP: {exc}"
            ) from exc
        return Delivery(int(partial.rejected_spans), partial.error_message)
    if media == "application/json":
        try:
            data = json.loads(body)
            partial = data.get("partialSuccess") or data.get("partial_success") or {}
            rejected = int(partial.get("rejectedSpans") or partial.get("rejected_spans") or 0)
        except (ValueError, AttributeError, TypeError) as exc:
            raise MastraceError(f"{url} answered {status} with JSON that is not OTLP: {exc}") from exc
        return Delivery(rejected, str(partial.get("errorMessage") or partial.get("error_message") or ""))
    preview = body[:80].decode("utf-8", "replace").strip()
    raise MastraceError(
        f"{url} answered {status} with {media or 'an untyped'} body, not an OTLP response ({preview!r}): "
        "is it an OTLP endpoint? nothing was marked as sent"
    )


def _post(
    url: str, body: bytes, headers: dict[str, str], timeout: float
) -> tuple[int, dict[str, str], bytes]:
    """POST `body` to `url` (no redirect followed); the status, headers (lowercase) and body."""
    parts = urlsplit(url)
    connection_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = connection_type(parts.hostname or "", parts.port, timeout=timeout)
    try:
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        connection.request("POST", target, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def _same_origin(a: str, b: str) -> bool:
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.scheme, pa.hostname, pa.port) == (pb.scheme, pb.hostname, pb.port)


def http_sender(
    url: str, headers: dict[str, str], timeout: float, wait: Callable[[float], None] = time.sleep
) -> Sender:
    """POST OTLP/protobuf batches to `url` (see the module for what counts as delivered)."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    def send(spans: Sequence[ReadableSpan]) -> Delivery:
        body = gzip.compress(encode_spans(spans).SerializeToString())
        request_headers = {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip", **headers}
        target = url
        for attempt in range(RETRIES + 1):
            for _ in range(_REDIRECTS + 1):
                try:
                    status, reply_headers, reply = _post(target, body, request_headers, timeout)
                except TimeoutError as exc:
                    raise _timed_out(target, timeout, len(spans)) from exc
                except OSError as exc:
                    raise MastraceError(f"cannot reach {target}: {exc.strerror or exc}") from exc
                if status not in (301, 302, 303, 307, 308):
                    break
                location = urljoin(target, reply_headers.get("location", ""))
                if not _same_origin(url, location):
                    raise MastraceError(
                        f"{target} redirected to {location}, another origin: not followed, nothing marked as "
                        "sent (push to that URL if it is the receiver)"
                    )
                target = location
            else:
                raise MastraceError(f"{url} redirected more than {_REDIRECTS} times: nothing marked as sent")
            media = reply_headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if 200 <= status < 300:
                return _otlp_reply(status, media, reply, target)
            if status in _RETRYABLE and attempt < RETRIES:
                wait(_retry_after(reply_headers.get("retry-after"), attempt))
                continue
            detail = reply[:200].decode("utf-8", "replace").strip()
            raise MastraceError(
                f"{target} answered {status} {http.client.responses.get(status, '')}".rstrip()
                + (f": {detail}" if detail else "")
                + (f" (after {attempt + 1} attempts)" if attempt else "")
            )
        raise AssertionError("unreachable")  # pragma: no cover

    return send


def grpc_sender(
    endpoint: str,
    secure: bool,
    headers: dict[str, str],
    timeout: float,
    wait: Callable[[float], None] = time.sleep,
) -> Sender:
    """Export batches over OTLP/gRPC to `host:port`, reading the receiver's partial success."""
    import grpc
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    channel = (
        grpc.secure_channel(endpoint, grpc.ssl_channel_credentials())
        if secure
        else grpc.insecure_channel(endpoint)
    )
    stub = trace_service_pb2_grpc.TraceServiceStub(channel)  # type: ignore[no-untyped-call]
    metadata = [(k.lower(), v) for k, v in headers.items()]
    retryable = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED}

    def send(spans: Sequence[ReadableSpan]) -> Delivery:
        request = encode_spans(spans)
        for attempt in range(RETRIES + 1):
            try:
                reply: Any = stub.Export(request, timeout=timeout, metadata=metadata)
            except grpc.RpcError as exc:
                code = exc.code()
                if code is grpc.StatusCode.DEADLINE_EXCEEDED:
                    raise _timed_out(endpoint, timeout, len(spans)) from exc
                if code in retryable and attempt < RETRIES:
                    wait(_retry_after(None, attempt))
                    continue
                raise MastraceError(
                    f"the OTLP/gRPC endpoint {endpoint} refused the spans: {code.name}: {exc.details()}"
                ) from exc
            partial = reply.partial_success
            return Delivery(int(partial.rejected_spans), partial.error_message)
        raise AssertionError("unreachable")  # pragma: no cover

    return send
