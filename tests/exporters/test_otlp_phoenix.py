"""OTLP export: a round trip through a real receiver (Arize Phoenix), and a collector that is down."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import mastrace
from mastrace.exporters.otlp import build_otlp_exporter
from mastrace.store import query
from phoenix_server import Phoenix, free_port

WAIT = 60.0  # upper bound for a flush; never a speed requirement


def hex_ids(span: ReadableSpan) -> tuple[str, str, str | None]:
    assert span.context is not None
    parent = f"{span.parent.span_id:016x}" if span.parent is not None else None
    return f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}", parent


def emit_agent_trace() -> None:
    tracer = mastrace.get_tracer("roundtrip")
    with (
        tracer.span(
            "coordination.session",
            attributes={"massgen.task": "sum two numbers", "massgen.agent_ids": ["a", "b"]},
        ),
        tracer.span("agent.a.round_1", attributes={"massgen.agent_id": "a", "massgen.round": 1}) as span,
    ):
        span.set_attribute("massgen.usage.input", 120)
        span.set_attribute("massgen.usage.cost", 0.0042)
        span.set_attribute("massgen.config", {"model": "gpt-x", "temperature": 0.2})
        tracer.event("Coordination event: winner_selected", winner="a", votes=2)


@pytest.mark.integration
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_spans_round_trip_through_phoenix(
    phoenix: Phoenix, protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spans sent over OTLP come back from Phoenix with the same ids, parents and attributes."""
    project = "mastrace-" + protocol.replace("/", "-")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={project}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    port = phoenix.http_port if protocol == "http/protobuf" else phoenix.grpc_port
    sent = InMemorySpanExporter()
    mastrace.configure(
        service_name="roundtrip", otlp=f"http://127.0.0.1:{port}", local=False, exporters=[sent]
    )
    emit_agent_trace()
    result = mastrace.force_flush(timeout=WAIT)
    assert result.ok and result.destinations["otlp"].exported == 3

    received = {s["context"]["span_id"]: s for s in phoenix.spans(project, expected=3)}
    assert len(received) == 3
    for span in sent.get_finished_spans():
        trace_id, span_id, parent_id = hex_ids(span)
        got = received[span_id]
        assert (got["name"], got["context"]["trace_id"], got["parent_id"]) == (span.name, trace_id, parent_id)
        expected_attributes = {k: list(v) if isinstance(v, tuple) else v for k, v in span.attributes.items()}
        assert {k: got["attributes"].get(k) for k in expected_attributes} == expected_attributes


def closed_port() -> int:
    """A loopback port with nothing listening (bound then released)."""
    return free_port()


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_collector_down_loses_nothing_locally_and_shutdown_is_bounded(
    protocol: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the OTLP endpoint down the app runs on, the local store is complete and failures are reported."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    store = tmp_path / "store"
    mastrace.configure(local=store, otlp=f"http://127.0.0.1:{closed_port()}")
    tracer = mastrace.get_tracer()
    for i in range(40):
        with tracer.span("agent.a.round_1", attributes={"massgen.round": i}):
            tracer.event("tick")
    flushed = mastrace.force_flush(timeout=10)
    assert flushed.destinations["local"].exported == 80
    otlp = flushed.destinations["otlp"]
    assert otlp.failed > 0 or otlp.pending > 0
    assert otlp.exported == 0 and not flushed.ok

    bound = 3.0
    started = time.monotonic()
    final = mastrace.shutdown(timeout=bound)
    assert time.monotonic() - started < bound + 2.0
    assert final.destinations["local"].exported == 80
    assert final.destinations["otlp"].exported == 0
    assert query("SELECT count(*) AS n FROM records", store) == [{"n": 80}]


def test_otlp_failures_are_logged_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Repeated failed exports to a dead collector log one exporter record, not one per batch."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    mastrace.configure(local=False, otlp=f"http://127.0.0.1:{closed_port()}")
    tracer = mastrace.get_tracer()
    with caplog.at_level(logging.WARNING):
        for _ in range(5):
            with tracer.span("s"):
                pass
            mastrace.force_flush(timeout=10)
    assert mastrace.force_flush(timeout=10).destinations["otlp"].failed == 5
    otel_records = [r for r in caplog.records if r.name.startswith("opentelemetry.exporter")]
    ours = [r for r in caplog.records if r.name == "mastrace" and "otlp" in r.getMessage()]
    # A refused port is now found before the exporter tries (and would log): at most its one record.
    assert len(otel_records) <= 1 and len(ours) == 1


def test_http_endpoint_gets_the_traces_path() -> None:
    """A base URL for http/protobuf is completed with /v1/traces."""
    exporter = build_otlp_exporter("http://127.0.0.1:4318/")
    assert exporter._endpoint == "http://127.0.0.1:4318/v1/traces"  # type: ignore[attr-defined]


def test_grpc_endpoint_is_given_without_its_scheme() -> None:
    """For grpc the exporter gets host:port; the http:// scheme only selects an insecure channel."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    plain = build_otlp_exporter("http://127.0.0.1:4317", protocol="grpc")
    assert isinstance(plain, OTLPSpanExporter)
    assert plain._endpoint == "127.0.0.1:4317"  # type: ignore[attr-defined]
