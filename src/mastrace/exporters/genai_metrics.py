"""GenAI client metrics, derived from finished LLM call spans on an export thread.

The GenAI semantic conventions define two histograms for a client's model calls:

- `gen_ai.client.token.usage` (`{token}`): one point per call for input tokens and one for output
  tokens (`gen_ai.token.type = input | output`);
- `gen_ai.client.operation.duration` (`s`): one point per call, with `error.type` when it failed;

both with `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`,
`gen_ai.response.model`, `server.address` and `server.port`, and the conventions' bucket
boundaries. The values are exactly the span's: its duration and its `gen_ai.usage.*`. They are
recorded here, on the metrics destination's own thread, from the spans mastrace's LLM
instrumentation (scopes `mastrace.*`) ended: the call itself pays nothing for them.

They go to the OpenTelemetry metrics API: to an OTLP metric exporter next to the OTLP span
exporter when OTLP is on, and to the global MeterProvider when one is set (Logfire sets one,
so with `logfire=` they reach Logfire; an application's own provider receives them too). The local
store keeps no metrics: its spans hold the same numbers (`SUM` over `gen_ai.usage.*`, `duration`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry import metrics
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind

from .. import semconv
from ..tracing._errors import log_internal_error, warn_once
from ..tracing._otel_private import span_attributes

__all__ = ["GenAIMetricsExporter", "build_otlp_meter_provider"]

_METRIC_KEYS = (
    semconv.GEN_AI_OPERATION_NAME,
    semconv.GEN_AI_PROVIDER_NAME,
    semconv.GEN_AI_REQUEST_MODEL,
    semconv.GEN_AI_RESPONSE_MODEL,
    semconv.SERVER_ADDRESS,
    semconv.SERVER_PORT,
)
_SCOPE_PREFIX = "mastrace"
_TOKENS = (
    (semconv.GEN_AI_USAGE_INPUT_TOKENS, semconv.GEN_AI_TOKEN_INPUT),
    (semconv.GEN_AI_USAGE_OUTPUT_TOKENS, semconv.GEN_AI_TOKEN_OUTPUT),
)


class _Instruments:
    """The two histograms on one MeterProvider."""

    def __init__(self, provider: Any) -> None:
        meter = provider.get_meter("mastrace", schema_url=semconv.SEMCONV_SCHEMA_URL)
        self.tokens = meter.create_histogram(
            semconv.METRIC_GEN_AI_TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=list(semconv.TOKEN_USAGE_BUCKETS),
        )
        self.duration = meter.create_histogram(
            semconv.METRIC_GEN_AI_OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=list(semconv.DURATION_BUCKETS),
        )


def is_llm_call(span: ReadableSpan) -> bool:
    """Whether `span` is a model call made through mastrace's LLM instrumentation or mixin."""
    scope = span.instrumentation_scope
    return (
        span.kind is SpanKind.CLIENT
        and span_attributes(span).get(semconv.GEN_AI_OPERATION_NAME) == semconv.GEN_AI_OP_CHAT
        and scope is not None
        and scope.name.startswith(_SCOPE_PREFIX)
    )


class GenAIMetricsExporter(SpanExporter):
    """Records the GenAI client histograms for every LLM call span it is handed.

    Args:
        providers: MeterProviders to record into (the API's global one follows a provider that is
            set later); `owned` ones are flushed and shut down with this exporter.
        exit_budget: Seconds the last export of the owned providers may take at shutdown.
    """

    def __init__(
        self, providers: Sequence[Any], owned: Sequence[Any] = (), *, exit_budget: float = 1.0
    ) -> None:
        self._instruments = [_Instruments(p) for p in providers]
        self._owned = list(owned)
        self._exit_budget_ms = int(exit_budget * 1000)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for span in spans:
            try:
                if is_llm_call(span):
                    self._record(span)
            except Exception as exc:  # one odd span must not lose the others' metrics
                log_internal_error("genai metrics", exc)
        return SpanExportResult.SUCCESS

    def _record(self, span: ReadableSpan) -> None:
        # The dict behind the span's attributes: the public mapping answers `in` and `[]` through
        # Python-level calls, twice per key.
        attributes = span_attributes(span)
        common: dict[str, Any] = {k: attributes[k] for k in _METRIC_KEYS if k in attributes}
        error_type = attributes.get(semconv.ERROR_TYPE)
        if error_type is None and not span.status.is_ok:
            error_type = semconv.ERROR_TYPE_OTHER
        timed = common if error_type is None else {**common, semconv.ERROR_TYPE: error_type}
        duration = None
        if span.start_time is not None and span.end_time is not None:
            duration = (span.end_time - span.start_time) / 1e9
        for instruments in self._instruments:
            if duration is not None:
                instruments.duration.record(duration, timed)
            for key, token_type in _TOKENS:
                count = attributes.get(key)
                if isinstance(count, int) and not isinstance(count, bool):
                    instruments.tokens.record(count, {**common, semconv.GEN_AI_TOKEN_TYPE: token_type})

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return all(p.force_flush(timeout_millis) for p in self._owned)

    def shutdown(self) -> None:
        for provider in self._owned:  # a collector that is down may delay exit by the budget only
            try:
                provider.shutdown(timeout_millis=self._exit_budget_ms)
            except Exception as exc:
                log_internal_error("genai metrics shutdown", exc)


def global_meter_provider() -> Any:
    """The API's global MeterProvider (a proxy that follows a provider set later)."""
    return metrics.get_meter_provider()


_QUIET = threading.local()
_METRIC_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
)


class _DuringOurExport(logging.Filter):
    """Drops the OTLP metric exporter's records while mastrace's own export runs (see `_Quiet`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_QUIET, "active", False)


class _Quiet(MetricExporter):
    """The OTLP metric exporter, with one warning of ours instead of an error log per failed export.

    Many OTLP endpoints take traces only (Jaeger, Phoenix answer 405 to `/v1/metrics`): that must not
    print into the application's output every minute.
    """

    def __init__(self, inner: MetricExporter) -> None:
        super().__init__(
            preferred_temporality=inner._preferred_temporality,
            preferred_aggregation=inner._preferred_aggregation,
        )
        self._inner = inner

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        _QUIET.active = True
        try:
            result = self._inner.export(metrics_data, timeout_millis=timeout_millis)
        finally:
            _QUIET.active = False
        if result is not MetricExportResult.SUCCESS:
            warn_once(
                "otlp-metrics",
                "mastrace: the OTLP endpoint did not take the GenAI metrics (it may accept traces "
                "only); spans are not affected",
            )
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self._inner.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._inner.shutdown(timeout_millis=timeout_millis)


def _quiet_metric_logs() -> None:
    for name in _METRIC_EXPORTER_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DuringOurExport) for f in logger.filters):
            logger.addFilter(_DuringOurExport())


def build_otlp_meter_provider(endpoint: str | bool, resource: Any) -> Any:
    """A MeterProvider exporting over OTLP to the endpoint the spans go to (same protocol)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    from .otlp import otlp_protocol, validate_endpoint

    protocol = otlp_protocol()
    url = None if endpoint is True else validate_endpoint(str(endpoint)).rstrip("/")
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as Grpc

        exporter: Any = (
            Grpc()
            if url is None
            else Grpc(endpoint=url.split("://", 1)[1], insecure=url.startswith("http://"))
        )
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as Http

        if url is not None and url.endswith("/v1/traces"):
            url = url[: -len("/v1/traces")]
        exporter = Http() if url is None else Http(endpoint=url + "/v1/metrics")
    _quiet_metric_logs()
    return MeterProvider(metric_readers=[PeriodicExportingMetricReader(_Quiet(exporter))], resource=resource)
