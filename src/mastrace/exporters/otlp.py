"""OTLP exporters (http/protobuf and grpc) built from an endpoint or the standard environment."""

from __future__ import annotations

import os

from opentelemetry.sdk.trace.export import SpanExporter

from ..exceptions import ConfigError, ExportError

_PROTOCOLS = ("http/protobuf", "grpc")


def otlp_protocol() -> str:
    """The OTLP protocol from `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`."""
    protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip()
    if protocol == "http/json":
        raise ConfigError("OTLP protocol http/json is not supported by opentelemetry-exporter-otlp; "
                          "use http/protobuf or grpc")
    if protocol not in _PROTOCOLS:
        raise ConfigError(f"unknown OTLP protocol {protocol!r}; expected one of {_PROTOCOLS}")
    return protocol


def build_otlp_exporter(endpoint: str | bool, protocol: str | None = None) -> SpanExporter:
    """Build an OTLP span exporter.

    Args:
        endpoint: A base URL (`http://127.0.0.1:4318`; `/v1/traces` is appended for http) or True
            to take the endpoint, headers, timeout and compression from `OTEL_EXPORTER_OTLP_*`.
        protocol: `http/protobuf` or `grpc`; default from the environment, else `http/protobuf`.
    """
    protocol = protocol or otlp_protocol()
    url = None if endpoint is True else str(endpoint).rstrip("/")
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc

            if url is None:
                return Grpc()
            insecure = url.startswith("http://")
            return Grpc(endpoint=url.split("://", 1)[-1] if "://" in url else url, insecure=insecure)
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

        if url is None:
            return Http()
        if not url.endswith("/v1/traces"):
            url += "/v1/traces"
        return Http(endpoint=url)
    except ImportError as exc:  # pragma: no cover - the exporter is a core dependency
        raise ExportError(f"the OTLP {protocol} exporter is not installed: {exc}") from exc
