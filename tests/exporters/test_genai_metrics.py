"""GenAI client metrics from real LLM calls: to an application's MeterProvider, over OTLP to a
loopback receiver (decoded with the OTLP protobuf), and to Logfire's MeterProvider."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import logfire
import pytest
from opentelemetry import metrics
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricsData
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import mastrace
from genai_peer import CALLS, INPUT_TOKENS, OUTPUT_TOKENS
from mastrace import semconv

HISTOGRAMS = {semconv.METRIC_GEN_AI_TOKEN_USAGE, semconv.METRIC_GEN_AI_OPERATION_DURATION}


@pytest.fixture(autouse=True)
def instrumented(instrumented_llms: None) -> Iterator[None]:
    yield
    logfire.shutdown(timeout_millis=2000, flush=False)


def points(data: MetricsData | None) -> dict[str, list[tuple[dict[str, Any], int, float]]]:
    """Histogram points by metric name: (attributes, count, sum)."""
    out: dict[str, list[tuple[dict[str, Any], int, float]]] = {}
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    out.setdefault(metric.name, []).append((dict(p.attributes), p.count, p.sum))
    return out


def test_histograms_reach_the_applications_meter_provider(peer: str) -> None:
    """Each call gives one duration point and one input and one output token point, with the keys."""
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    mastrace.configure(local=False, exporters=[InMemorySpanExporter()])
    for name in CALLS:
        CALLS[name](peer)
    assert mastrace.force_flush(timeout=10).complete
    found = points(reader.get_metrics_data())
    assert set(found) == HISTOGRAMS
    durations = found[semconv.METRIC_GEN_AI_OPERATION_DURATION]
    assert sum(count for _, count, _ in durations) == len(CALLS)
    assert {a[semconv.GEN_AI_PROVIDER_NAME] for a, _, _ in durations} == {"openai", "anthropic"}
    tokens = found[semconv.METRIC_GEN_AI_TOKEN_USAGE]
    by_type = {
        t: sum(s for a, _, s in tokens if a[semconv.GEN_AI_TOKEN_TYPE] == t) for t in ("input", "output")
    }
    assert by_type == {"input": len(CALLS) * INPUT_TOKENS, "output": len(CALLS) * OUTPUT_TOKENS}
    for attributes, _, _ in tokens:
        assert attributes[semconv.GEN_AI_OPERATION_NAME] == "chat"
        assert attributes[semconv.GEN_AI_REQUEST_MODEL] in ("gpt-peer", "claude-peer")
        assert attributes[semconv.GEN_AI_RESPONSE_MODEL].endswith("-2026")
        assert attributes[semconv.SERVER_ADDRESS] == "127.0.0.1" and semconv.SERVER_PORT in attributes


def test_a_failed_call_is_timed_with_its_error_type() -> None:
    """A call that fails has a duration point with `error.type` and no token points."""
    import openai

    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    mastrace.configure(local=False, exporters=[InMemorySpanExporter()])
    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk-test-not-real", max_retries=0)
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    mastrace.force_flush(timeout=10)
    found = points(reader.get_metrics_data())
    assert [a[semconv.ERROR_TYPE] for a, _, _ in found[semconv.METRIC_GEN_AI_OPERATION_DURATION]] == [
        "APIConnectionError"
    ]
    assert semconv.METRIC_GEN_AI_TOKEN_USAGE not in found


def test_no_metrics_destination_when_nothing_receives_metrics(peer: str) -> None:
    """Without OTLP, Logfire or an application MeterProvider, no metrics are computed (no thread)."""
    mastrace.configure(local=False, exporters=[InMemorySpanExporter()])
    from mastrace.setup import _config

    pipeline = _config._RT.pipeline
    assert pipeline is not None and [d.name for d in pipeline.destinations] == ["InMemorySpanExporter#0"]
    assert set(mastrace.force_flush(timeout=5).destinations) == {"InMemorySpanExporter#0"}


class _Receiver(BaseHTTPRequestHandler):
    metrics: list[ExportMetricsServiceRequest] = []  # noqa: RUF012 - filled by the server thread
    paths: list[str] = []  # noqa: RUF012

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        type(self).paths.append(self.path)
        if self.path == "/v1/metrics":
            type(self).metrics.append(ExportMetricsServiceRequest.FromString(body))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return None


def test_histograms_are_exported_over_otlp_with_the_spans(peer: str) -> None:
    """With OTLP on, the histograms reach the same endpoint at /v1/metrics (at shutdown at the latest)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Receiver.metrics.clear()
    try:
        mastrace.configure(local=False, otlp=f"http://127.0.0.1:{server.server_address[1]}")
        CALLS["openai streamed tool call"](peer)
        mastrace.shutdown(timeout=10)
    finally:
        server.shutdown()
        server.server_close()
    names = {
        m.name
        for request in _Receiver.metrics
        for rm in request.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    assert names == HISTOGRAMS and "/v1/traces" in _Receiver.paths


def test_histograms_reach_logfire(peer: str) -> None:
    """With the application's Logfire (metrics reader included) reused, the histograms reach Logfire."""
    reader = InMemoryMetricReader()
    logfire.configure(
        send_to_logfire=False, console=False, metrics=logfire.MetricsOptions(additional_readers=[reader])
    )
    mastrace.configure(logfire=True, local=False)
    CALLS["anthropic tool call"](peer)
    mastrace.force_flush(timeout=10)
    found = points(reader.get_metrics_data())
    assert set(found) >= HISTOGRAMS
    assert found[semconv.METRIC_GEN_AI_OPERATION_DURATION][0][0][semconv.GEN_AI_PROVIDER_NAME] == "anthropic"
