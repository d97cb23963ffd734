"""OTLP export: a round trip through a real receiver (Arize Phoenix), and a collector that is down."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import mastrace
from mastrace.exporters.otlp import build_otlp_exporter
from mastrace.store import query

# Upper bounds, never speed requirements: a loaded CI machine can take minutes to start Phoenix
# (~13 s when idle) or to ingest; past them the test is skipped (start-up) or fails (ingest).
START_WAIT = 600.0
WAIT = 300.0
PHOENIX = Path(sys.executable).parent / "phoenix"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Phoenix:
    http_port: int
    grpc_port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            return json.load(response)

    def spans(self, project: str, expected: int) -> list[dict[str, Any]]:
        """The project's spans, once `expected` of them have been ingested."""
        deadline = time.monotonic() + WAIT
        found: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            try:
                found = self.get(f"/v1/projects/{project}/spans?limit=1000")["data"]
            except urllib.error.HTTPError as exc:  # 404 until the project's first span lands
                if exc.code != 404:
                    raise
            if len(found) >= expected:
                return found
            time.sleep(0.25)
        return found


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    """A Phoenix server on 127.0.0.1 for the whole session."""
    if not PHOENIX.exists():
        pytest.skip("arize-phoenix is not installed (dependency group `phoenix`)")
    workdir = tmp_path_factory.mktemp("phoenix")
    server = Phoenix(free_port(), free_port())
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(server.http_port),
        "PHOENIX_GRPC_PORT": str(server.grpc_port),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (workdir / "server.log").open("w")
    process = subprocess.Popen(
        [str(PHOENIX), "serve"], env=env, cwd=workdir, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + START_WAIT
        while not _healthy(server.url):
            if process.poll() is not None:
                pytest.fail(
                    f"phoenix exited before it was healthy:\n{(workdir / 'server.log').read_text()[-3000:]}"
                )
            if time.monotonic() > deadline:
                pytest.skip(
                    f"phoenix was not healthy after {START_WAIT:g} s on this machine (too loaded to start it)"
                )
            time.sleep(0.5)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


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
