"""OTLP exporters (http/protobuf and grpc) built from an endpoint or the standard environment.

The OpenTelemetry exporters log every failed attempt of every batch. On mastrace's export threads
only the first such record after each `build_otlp_exporter()` is let through: later failures are
counted by the pipeline and reported by `force_flush()` instead of filling the log while a
collector is down.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ..exceptions import ConfigError, ExportError

__all__ = [
    "AckRecorder",
    "FastFailExporter",
    "build_otlp_exporter",
    "destination_key",
    "guard_otlp_exporter",
    "otlp_protocol",
    "validate_endpoint",
]

_PROTOCOLS = ("http/protobuf", "grpc")
_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
)
_THREAD_PREFIXES = ("mastrace-export-", "mastrace-close-")


def otlp_protocol() -> str:
    """The OTLP protocol from `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`.

    Raises:
        ConfigError: The protocol is not `http/protobuf` or `grpc`.
    """
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    if protocol == "http/json":
        raise ConfigError(
            "OTLP protocol http/json is not supported by opentelemetry-exporter-otlp; "
            "use http/protobuf or grpc"
        )
    if protocol not in _PROTOCOLS:
        raise ConfigError(f"unknown OTLP protocol {protocol!r}; expected one of {_PROTOCOLS}")
    return protocol


def validate_endpoint(endpoint: str) -> str:
    """Check that an OTLP endpoint is an `http://` or `https://` URL with a host.

    Raises:
        ConfigError: It is not.
    """
    parts = urlsplit(endpoint.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"OTLP endpoint {endpoint!r} must be an http:// or https:// URL, e.g. http://127.0.0.1:4318"
        )
    return endpoint.strip()


def build_otlp_exporter(endpoint: str | bool, protocol: str | None = None) -> SpanExporter:
    """Build an OTLP span exporter.

    Args:
        endpoint: A base URL (`http://127.0.0.1:4318`; `/v1/traces` is appended for http) or True
            to take the endpoint, headers, timeout and compression from `OTEL_EXPORTER_OTLP_*`.
        protocol: `http/protobuf` or `grpc`; default from the environment, else `http/protobuf`.

    Raises:
        ConfigError: The protocol or endpoint is invalid.
        ExportError: The exporter for the protocol is not installed.
    """
    protocol = protocol or otlp_protocol()
    url = None if endpoint is True else validate_endpoint(str(endpoint)).rstrip("/")
    _quiet_exporter_logs()
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc

            if url is None:
                return Grpc()
            return Grpc(endpoint=url.split("://", 1)[1], insecure=url.startswith("http://"))
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

        if url is None:
            return Http()
        if not url.endswith("/v1/traces"):
            url += "/v1/traces"
        return Http(endpoint=url)
    except ImportError as exc:  # pragma: no cover - the exporter is a core dependency
        raise ExportError(f"the OTLP {protocol} exporter is not installed: {exc}") from exc


def destination_key(endpoint: str | bool, protocol: str | None = None) -> str:
    """The name under which what an OTLP endpoint acknowledged is remembered in the local store.

    The same endpoint gives the same key whether spans reached it live or through `mastrace push`:
    the full traces URL for OTLP/HTTP, `grpc:host:port` for gRPC.
    """
    protocol = protocol or otlp_protocol()
    if endpoint is True:
        var = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
        traces = os.environ.get(var)
        base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        default = "http://localhost:4317" if protocol == "grpc" else "http://localhost:4318"
        if protocol != "grpc" and traces:
            return traces.rstrip("/")
        endpoint = traces or base or default
    url = str(endpoint).strip().rstrip("/")
    if protocol == "grpc":
        return "grpc:" + url.split("://", 1)[-1]
    return url if url.endswith("/v1/traces") else url + "/v1/traces"


class AckRecorder(SpanExporter):
    """Records, in the local store, the ids of the spans an OTLP endpoint acknowledged.

    `mastrace push` to the same endpoint then skips them: spans that reached the collector live
    are not sent twice, and those an outage kept from it are. One append per acknowledged batch,
    to a file of this process's own (`<store>/pushed/<key digest>.acked-<host>-<pid>`).
    """

    def __init__(self, inner: SpanExporter, path: Path, endpoint: str = "") -> None:
        self.inner = inner
        self.path = path
        self.endpoint = endpoint
        self._fd: int | None = None

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        if result is SpanExportResult.SUCCESS:
            try:
                ids = "".join(f"{s.context.span_id:016x}\n" for s in spans)
                if self._fd is None:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                    if self.endpoint and os.fstat(self._fd).st_size == 0:
                        # Which receiver this is, for a push that names it another way (localhost).
                        ids = f"# endpoint {self.endpoint}\n" + ids
                os.write(self._fd, ids.encode())
            except OSError:  # only a later push's shortcut is lost: it then sends these again
                pass
        return result

    def shutdown(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)


def guard_otlp_exporter(
    exporter: SpanExporter, endpoint: str | bool, protocol: str | None = None
) -> SpanExporter:
    """Wrap an OTLP exporter so that a collector that is down fails a batch at once.

    The OpenTelemetry exporters retry a refused connection with exponential backoff for up to their
    timeout (10 s by default), on every batch: a process exits seconds late and `force_flush()`
    waits. `FastFailExporter` looks first, with a TCP connection of at most `probe_timeout`
    seconds, whenever the last batch failed: a port that refuses, or a host that does not answer,
    fails the batch without the retries. Transient errors of a reachable collector (429, 503) are
    still retried by the exporter itself.
    """
    address = _address(endpoint, protocol or otlp_protocol())
    if address is None:
        return exporter
    return FastFailExporter(exporter, address)


def _address(endpoint: str | bool, protocol: str) -> tuple[str, int] | None:
    """The host and port to probe for `endpoint`, or None when probing would not tell (a proxy)."""
    if endpoint is True:
        var = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
        endpoint = os.environ.get(var) or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or ""
        if not endpoint:
            endpoint = "http://localhost:4317" if protocol == "grpc" else "http://localhost:4318"
    parts = urlsplit(str(endpoint).strip())
    if not parts.hostname:
        return None
    if any(
        os.environ.get(v) for v in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY")
    ):
        return None
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return parts.hostname, port


class FastFailExporter(SpanExporter):
    """An OTLP exporter that checks a collector is reachable before retrying it (see `guard_otlp_exporter`).

    Args:
        inner: The OpenTelemetry OTLP exporter.
        address: The collector's host and port.
        probe_timeout: Seconds a connection attempt may take.
    """

    def __init__(self, inner: SpanExporter, address: tuple[str, int], probe_timeout: float = 0.25) -> None:
        self.inner = inner
        self.address = address
        self.probe_timeout = probe_timeout
        self.reachable: bool | None = None  # None: not known yet

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.reachable is not True and not self._probe():
            self.reachable = False
            return SpanExportResult.FAILURE
        result = self.inner.export(spans)
        self.reachable = result is SpanExportResult.SUCCESS or None
        return result

    def _probe(self) -> bool:
        try:
            with socket.create_connection(self.address, timeout=self.probe_timeout):
                return True
        except OSError:
            return False

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)


class _FirstRecordOnly(logging.Filter):
    """Lets one record through from mastrace's export threads, then drops the rest until reset."""

    def __init__(self) -> None:
        super().__init__()
        self._seen = False
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self._seen = False

    def filter(self, record: logging.LogRecord) -> bool:
        if not threading.current_thread().name.startswith(_THREAD_PREFIXES):
            return True
        with self._lock:
            first, self._seen = not self._seen, True
        return first


def _quiet_exporter_logs() -> None:
    for name in _EXPORTER_LOGGERS:
        logger = logging.getLogger(name)
        mine = [f for f in logger.filters if isinstance(f, _FirstRecordOnly)]
        if mine:
            mine[0].reset()
        else:
            logger.addFilter(_FirstRecordOnly())
