"""`mastrace serve`'s intake: the real OpenTelemetry exporters (HTTP and gRPC) and logfire send to
it; spans land in the store scrubbed, with their resource; bad input is refused and writes nothing."""

from __future__ import annotations

import gzip
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from mastrace.serve import IntakeServer, start_intake
from mastrace.store import query


@pytest.fixture
def intake(tmp_path: Path) -> Iterator[IntakeServer]:
    server = start_intake(tmp_path / "store", http_port=0, grpc_port=0, max_body=2 * 1024 * 1024)
    yield server
    server.stop()


def _send(exporter: SpanExporter, service: str, n: int = 3) -> None:
    provider = TracerProvider(
        resource=Resource.create({"service.name": service, "deployment.environment": "ci"})
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("sender", "1.0")
    with tracer.start_as_current_span("coordination.session", attributes={"massgen.task": "t"}) as root:
        root.add_event("started", {"k": 1})
        for i in range(n - 1):
            with tracer.start_as_current_span(f"agent.a.round_{i}", attributes={"api_key": "sk-" + "q" * 40}):
                pass
    provider.shutdown()


def _rows(intake: IntakeServer) -> list[dict[str, object]]:
    return query(
        "SELECT span_name, service_name, CAST(attributes AS VARCHAR) AS a, "
        "CAST(otel_resource_attributes AS VARCHAR) AS r, CAST(otel_events AS VARCHAR) AS e, parent_span_id "
        "FROM records ORDER BY start_timestamp",
        intake.intake.store,
    )


def test_the_http_exporter_sends_to_the_store(intake: IntakeServer) -> None:
    _send(HttpExporter(endpoint=f"http://127.0.0.1:{intake.http_port}/v1/traces"), "via-http")
    rows = _rows(intake)
    assert [r["span_name"] for r in rows] == ["coordination.session", "agent.a.round_0", "agent.a.round_1"]
    assert all(r["service_name"] == "via-http" and "deployment.environment" in str(r["r"]) for r in rows)
    assert "sk-qqqq" not in str(rows) and "Scrubbed" in str(rows[1]["a"])  # scrubbed like in-process export
    assert rows[1]["parent_span_id"] is not None and "started" in str(rows[0]["e"])


def test_the_grpc_exporter_sends_to_the_store(intake: IntakeServer) -> None:
    _send(GrpcExporter(endpoint=f"127.0.0.1:{intake.grpc_port}", insecure=True), "via-grpc", n=5)
    rows = _rows(intake)
    assert len(rows) == 5 and {r["service_name"] for r in rows} == {"via-grpc"}


def test_json_and_gzip_bodies(intake: IntakeServer) -> None:
    from google.protobuf import json_format

    collected: list[ReadableSpan] = []

    class Keep(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            collected.extend(spans)  # type: ignore[call-overload]
            return SpanExportResult.SUCCESS

    _send(Keep(), "json")
    request = encode_spans(collected)
    url = f"http://127.0.0.1:{intake.http_port}/v1/traces"
    body = json_format.MessageToJson(request).encode()
    with urllib.request.urlopen(
        urllib.request.Request(url, body, {"Content-Type": "application/json"})
    ) as reply:
        assert reply.status == 200 and json.loads(reply.read()) == {}
    zipped = gzip.compress(request.SerializeToString())
    headers = {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}
    with urllib.request.urlopen(urllib.request.Request(url, zipped, headers)) as reply:
        assert reply.status == 200
    assert len(_rows(intake)) == 3  # the same 3 spans, twice: shown once


@pytest.mark.parametrize(
    ("body", "headers", "status"),
    [
        (b"\x00not protobuf\xff", {"Content-Type": "application/x-protobuf"}, 400),
        (b"{not json", {"Content-Type": "application/json"}, 400),
        (b"not gzip", {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}, 400),
        (b"x" * (3 * 1024 * 1024), {"Content-Type": "application/x-protobuf"}, 413),
        (
            gzip.compress(b"\x00" * (3 * 1024 * 1024)),
            {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"},
            413,
        ),
        (b"\x00", {"Content-Encoding": "gzip"}, 415),  # no content type: not OTLP
    ],
)
def test_bad_bodies_are_refused_and_write_nothing(
    intake: IntakeServer, body: bytes, headers: dict[str, str], status: int
) -> None:
    url = f"http://127.0.0.1:{intake.http_port}/v1/traces"
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(urllib.request.Request(url, body, headers))
    assert caught.value.code == status
    assert caught.value.read()  # a message says why
    assert _rows(intake) == []


def test_many_senders_at_once_lose_nothing(intake: IntakeServer) -> None:
    url = f"http://127.0.0.1:{intake.http_port}/v1/traces"
    threads = [
        threading.Thread(target=_send, args=(HttpExporter(endpoint=url), f"s{i}", 20)) for i in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(_rows(intake)) == 160 and intake.intake.stored == 160


def test_logfire_can_send_to_it(intake: IntakeServer) -> None:
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        f"""
        import logfire
        logfire.configure(token="pylf_v1_us_fake", send_to_logfire=True, console=False,
                          advanced=logfire.AdvancedOptions(base_url="http://127.0.0.1:{intake.http_port}"))
        with logfire.span("Agent restart: {{agent_id}}", agent_id="agent_a"):
            pass
        logfire.force_flush()
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, timeout=60)
    rows = query("SELECT span_name, message FROM records", intake.intake.store)
    assert {"span_name": "Agent restart: {agent_id}", "message": "Agent restart: agent_a"} in rows


def test_the_serve_command(tmp_path: Path) -> None:
    import os
    import re
    import signal
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTRACE_", "OTEL_"))}
    mastrace_bin = Path(sys.executable).parent / "mastrace"
    proc = subprocess.Popen(
        [str(mastrace_bin), "serve", "--http-port", "0", "--grpc-port", "-1", "--store", str(tmp_path / "s")],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        port = re.search(r"http://127\.0\.0\.1:(\d+)/v1/traces", first)
        assert port, first
        _send(HttpExporter(endpoint=f"http://127.0.0.1:{port.group(1)}/v1/traces"), "cli", n=4)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "stored 4 span(s)" in out
    assert len(query("SELECT span_id FROM records", tmp_path / "s")) == 4


def test_a_span_of_control_characters_is_stored_under_the_row_bound(intake: IntakeServer) -> None:
    """A 1.5 MB OTLP body of one span whose list holds control characters (six bytes each in JSON)
    gives one line under 1 MB, cut visibly, that every reader reads."""
    provider = TracerProvider()
    collected: list[ReadableSpan] = []

    class Keep(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            collected.extend(spans)  # type: ignore[call-overload]
            return SpanExportResult.SUCCESS

    provider.add_span_processor(SimpleSpanProcessor(Keep()))
    with provider.get_tracer("ctl").start_as_current_span(
        "ctl", attributes={"items": ["\x01" * 1400] * 1000}
    ):
        pass
    provider.shutdown()
    body = encode_spans(collected).SerializeToString()
    url = f"http://127.0.0.1:{intake.http_port}/v1/traces"
    request = urllib.request.Request(url, body, {"Content-Type": "application/x-protobuf"})
    with urllib.request.urlopen(request) as reply:
        assert reply.status == 200
    (segment,) = [f for f in (intake.intake.store / "segments").glob("*.ndjson") if f.stat().st_size]
    (line,) = segment.read_bytes().splitlines()
    assert len(line) <= 1_000_000 < 6 * 1400 * 1000
    assert query("SELECT attributes->>'mastrace.truncated' AS t FROM records", intake.intake.store) == [
        {"t": "true"}
    ]


def test_an_app_traced_by_mastrace_sends_to_serve_without_a_warning(
    intake: IntakeServer, peer: str, instrumented_llms: None, caplog: pytest.LogCaptureFixture
) -> None:
    """`configure(otlp=<serve>)` sends the GenAI metrics beside the spans: serve takes them (it keeps
    spans only), so the application gets no "did not take the GenAI metrics" warning."""
    import logging

    import mastrace
    from genai_peer import openai_tool_call

    mastrace.configure(otlp=f"http://127.0.0.1:{intake.http_port}", local=False)
    with caplog.at_level(logging.WARNING, logger="mastrace"):
        openai_tool_call(peer)
        result = mastrace.force_flush()
        mastrace.shutdown()
    assert result.failed == 0 and result.exported >= 1
    assert [r["span_name"] for r in _rows(intake)] == ["llm.openai.chat"]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
