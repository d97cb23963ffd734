"""Logfire: configure(logfire=...) through the real logfire SDK, offline or against a loopback endpoint."""

from __future__ import annotations

import gzip
import json
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import logfire
import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import mastrace
from mastrace.exporters.logfire import is_logfire_provider
from mastrace.store import query

FAKE_TOKEN = "test-write-token-0123456789"  # not a real credential
SECRET = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"


@pytest.fixture(autouse=True)
def _stop_logfire() -> Iterator[None]:
    """Shut logfire's own exporters down after each test so none outlives its endpoint."""
    yield
    logfire.shutdown(timeout_millis=2000, flush=False)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class FakeLogfire:
    """A loopback HTTP endpoint standing in for the Logfire API."""

    url: str
    requests: list[Received] = field(default_factory=list)

    def trace_requests(self) -> list[tuple[Received, ExportTraceServiceRequest]]:
        out = []
        for r in self.requests:
            if r.path == "/v1/traces":
                body = gzip.decompress(r.body) if r.headers.get("content-encoding") == "gzip" else r.body
                out.append((r, ExportTraceServiceRequest.FromString(body)))
        return out


@pytest.fixture
def fake_logfire() -> Iterator[FakeLogfire]:
    """Serve /v1/info (token check) and accept every OTLP POST, recording it."""
    fake = FakeLogfire(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"project_name": "demo", "project_url": fake.url + "/demo"}).encode()
            self._reply(200, body, "application/json")

        def do_POST(self) -> None:
            data = self.rfile.read(int(self.headers.get("content-length", "0")))
            headers = {k.lower(): v for k, v in self.headers.items()}
            fake.requests.append(Received(self.path, headers, data))
            self._reply(200, b"", "application/x-protobuf")

        def _reply(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield fake
    server.shutdown()
    server.server_close()


def emit() -> None:
    tracer = mastrace.get_tracer("agents")
    with tracer.span("coordination.session", attributes={"massgen.task": "demo"}) as session:
        session.set_attribute("massgen.config", {"model": "gpt-x", "temperature": 0.2})
        with tracer.span("agent.a.round_1", attributes={"massgen.agent_id": "a", "note": f"key {SECRET}"}):
            tracer.event("Coordination event: winner_selected", winner="a")


def by_name(spans: tuple[ReadableSpan, ...] | list[ReadableSpan]) -> dict[str, ReadableSpan]:
    return {s.name: s for s in spans}


def attach_memory() -> InMemorySpanExporter:
    memory = InMemorySpanExporter()
    trace.get_tracer_provider().add_span_processor(SimpleSpanProcessor(memory))  # type: ignore[attr-defined]
    return memory


def test_logfire_true_makes_logfire_provider_global_and_keeps_the_store(tmp_path: Path) -> None:
    """configure(logfire=True) with no token installs logfire's provider and still writes the local store."""
    mastrace.configure(logfire=True, local=tmp_path / "store", service_name="lf-offline")
    assert is_logfire_provider(trace.get_tracer_provider())
    emit()
    result = mastrace.force_flush(timeout=10)
    assert result.ok and result.destinations["local"].exported == 3
    rows = query(
        "SELECT span_name, span_type, service_name FROM records ORDER BY span_name", tmp_path / "store"
    )
    assert [(r["span_name"], r["span_type"]) for r in rows] == [
        ("Coordination event: winner_selected", "log"),
        ("agent.a.round_1", "span"),
        ("coordination.session", "span"),
    ]
    assert {r["service_name"] for r in rows} == {"lf-offline"}


def test_logfire_spans_keep_parents(tmp_path: Path) -> None:
    """Spans made through logfire's provider nest session → round → event."""
    mastrace.configure(logfire=True, local=False)
    memory = attach_memory()
    emit()
    spans = by_name(memory.get_finished_spans())
    session, round_, event = (
        spans["coordination.session"],
        spans["agent.a.round_1"],
        spans["Coordination event: winner_selected"],
    )
    assert session.parent is None
    assert round_.parent is not None and round_.parent.span_id == session.context.span_id  # type: ignore[union-attr]
    assert event.parent is not None and event.parent.span_id == round_.context.span_id  # type: ignore[union-attr]
    assert len({s.context.trace_id for s in spans.values()}) == 1  # type: ignore[union-attr]


def test_logfire_dict_attributes_carry_a_json_schema() -> None:
    """A dict attribute goes to logfire as a JSON string described by logfire.json_schema."""
    mastrace.configure(logfire=True, local=False)
    memory = attach_memory()
    emit()
    attributes = by_name(memory.get_finished_spans())["coordination.session"].attributes or {}
    assert json.loads(str(attributes["massgen.config"])) == {"model": "gpt-x", "temperature": 0.2}
    schema = json.loads(str(attributes["logfire.json_schema"]))
    assert schema["properties"]["massgen.config"]["type"] == "object"


def test_logfire_events_are_logs_and_spans_are_spans() -> None:
    """tracer.event() keeps logfire.span_type=log through logfire's tracer; spans get span."""
    mastrace.configure(logfire=True, local=False)
    memory = attach_memory()
    emit()
    spans = by_name(memory.get_finished_spans())
    event = spans["Coordination event: winner_selected"].attributes or {}
    assert (event["logfire.span_type"], event["logfire.msg"], event["winner"]) == (
        "log",
        "Coordination event: winner_selected",
        "a",
    )
    assert (spans["agent.a.round_1"].attributes or {})["logfire.span_type"] == "span"


def test_token_sends_to_the_logfire_base_url_with_authorization(
    fake_logfire: FakeLogfire, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a token and LOGFIRE_BASE_URL, spans arrive there over OTLP with the Authorization header."""
    monkeypatch.setenv("LOGFIRE_BASE_URL", fake_logfire.url)
    mastrace.configure(logfire=FAKE_TOKEN, local=False, service_name="lf-online")
    emit()
    assert logfire.force_flush(timeout_millis=10_000)
    requests = fake_logfire.trace_requests()
    assert requests
    assert {r.headers["authorization"] for r, _ in requests} == {FAKE_TOKEN}
    sent = [s for _, req in requests for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]
    names = {s.name: s for s in sent}
    assert names["agent.a.round_1"].parent_span_id == names["coordination.session"].span_id
    attrs = {a.key: a.value.string_value for a in names["Coordination event: winner_selected"].attributes}
    assert attrs["logfire.span_type"] == "log"


def test_logfire_receives_mastrace_scrubbing(
    fake_logfire: FakeLogfire, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What reaches Logfire is scrubbed by mastrace's policy: secrets gone, token counts kept."""
    monkeypatch.setenv("LOGFIRE_BASE_URL", fake_logfire.url)
    mastrace.configure(logfire=FAKE_TOKEN, local=False)
    attributes = {
        "note": f"key {SECRET} here",
        "api_key": "plain-value-123",
        "gen_ai.usage.input_tokens": 42,
        "mcp.session.id": "abc-123",
        "llm": {"model": "m", "headers": {"Authorization": "Bearer abcdefgh12345678"}},
    }
    with mastrace.get_tracer().span("llm.openai.stream", attributes=attributes):
        pass
    assert logfire.force_flush(timeout_millis=10_000)
    requests = fake_logfire.trace_requests()
    assert all(SECRET.encode() not in req.SerializeToString() for _, req in requests)
    spans = [s for _, req in requests for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]
    # One span (Logfire's client sends a batch again when an answer is slow: copies are the same).
    assert len({bytes(s.span_id) for s in spans}) == 1, spans
    got = {a.key: a.value for a in spans[0].attributes}
    assert got["note"].string_value == "key [Scrubbed: openai_key] here"
    assert "plain-value-123" not in got["api_key"].string_value
    assert got["gen_ai.usage.input_tokens"].int_value == 42
    assert got["mcp.session.id"].string_value == "abc-123"
    llm = json.loads(got["llm"].string_value)
    assert llm["model"] == "m" and "abcdefgh12345678" not in json.dumps(llm)


def test_app_that_configured_logfire_first_keeps_working(tmp_path: Path) -> None:
    """logfire.configure() by the app, then mastrace.configure(): both see every span, nested."""
    app_spans = InMemorySpanExporter()
    logfire.configure(
        send_to_logfire=False, console=False, additional_span_processors=[SimpleSpanProcessor(app_spans)]
    )
    mastrace.configure(local=tmp_path / "store")
    with logfire.span("app request"):
        emit()
    assert mastrace.force_flush(timeout=10).destinations["local"].exported == 4
    rows = query("SELECT span_name, span_id, parent_span_id, span_type FROM records", tmp_path / "store")
    found = {r["span_name"]: r for r in rows}
    assert found["coordination.session"]["parent_span_id"] == found["app request"]["span_id"]
    assert found["Coordination event: winner_selected"]["span_type"] == "log"
    assert {s.name for s in app_spans.get_finished_spans()} >= {"app request", "coordination.session"}


def test_reconfigure_with_logfire_keeps_exporting(tmp_path: Path) -> None:
    """A second configure(logfire=True) re-attaches mastrace to logfire's new inner provider."""
    mastrace.configure(logfire=True, local=tmp_path / "one")
    mastrace.configure(logfire=True, local=tmp_path / "two")
    emit()
    assert mastrace.force_flush(timeout=10).destinations["local"].exported == 3
    assert query("SELECT count(*) AS n FROM records", tmp_path / "two") == [{"n": 3}]


def test_missing_logfire_raises_export_error_with_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the logfire package, configure(logfire=True) raises ExportError naming the extra."""
    monkeypatch.setitem(sys.modules, "logfire", None)
    with pytest.raises(mastrace.ExportError, match=r"mastrace\[logfire\]"):
        mastrace.configure(logfire=True, local=False)
    assert not mastrace.is_configured()


def test_otlp_endpoint_with_logfire_exports_each_span_once(
    fake_logfire: FakeLogfire, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With logfire on and OTEL_EXPORTER_OTLP_ENDPOINT set, the collector gets every span exactly once."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", fake_logfire.url)
    mastrace.configure(logfire=True, local=False)
    emit()
    assert mastrace.force_flush(timeout=10).destinations["otlp"].exported == 3
    assert logfire.force_flush(timeout_millis=10_000)
    sent = [
        s.name
        for _, req in fake_logfire.trace_requests()
        for rs in req.resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
    ]
    assert sorted(sent) == sorted(
        ["coordination.session", "agent.a.round_1", "Coordination event: winner_selected"]
    )


def test_mastrace_logfire_0_wins_over_a_token_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """MASTRACE_LOGFIRE=0 keeps Logfire off even when LOGFIRE_TOKEN is set (e.g. for the collector)."""
    monkeypatch.setenv("LOGFIRE_TOKEN", FAKE_TOKEN)
    monkeypatch.setenv("MASTRACE_LOGFIRE", "0")
    with pytest.warns(mastrace.MastraceWarning, match="no destination"):
        mastrace.configure(local=False)
    assert not is_logfire_provider(trace.get_tracer_provider())


def test_logfire_token_in_the_environment_turns_logfire_on(
    fake_logfire: FakeLogfire, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LOGFIRE_TOKEN alone enables the Logfire destination and is sent as the Authorization header."""
    monkeypatch.setenv("LOGFIRE_TOKEN", FAKE_TOKEN)
    monkeypatch.setenv("LOGFIRE_BASE_URL", fake_logfire.url)
    mastrace.configure(local=False)
    assert is_logfire_provider(trace.get_tracer_provider())
    emit()
    assert logfire.force_flush(timeout_millis=10_000)
    assert {r.headers["authorization"] for r, _ in fake_logfire.trace_requests()} == {FAKE_TOKEN}


def test_a_second_logfire_configure_does_not_lose_spans(tmp_path: Path) -> None:
    """MassGen calls `logfire.configure()` itself, after mastrace: spans after it still reach the store."""
    store = tmp_path / "store"
    mastrace.configure(logfire=True, local=store, service_name="twice")
    tracer = mastrace.get_tracer("twice")
    with tracer.span("before"):
        pass
    logfire.configure(send_to_logfire=False, console=False, inspect_arguments=False)
    with tracer.span("after"):
        pass
    with logfire.span("logfire after"):
        pass
    result = mastrace.force_flush(timeout=10)
    names = {r["span_name"] for r in query("SELECT span_name FROM records", store)}
    assert {"before", "after", "logfire after"} <= names
    assert result.destinations["local"].exported == len(names)


def test_logfire_configured_first_is_reused_and_its_processors_keep_every_span(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """App's logfire.configure(additional_span_processors=[...]) then configure(logfire=True): no second
    logfire.configure(), and the app's processor receives its own and mastrace's spans."""
    app_spans = InMemorySpanExporter()
    logfire.configure(
        send_to_logfire=False,
        console=False,
        service_name="the-app",
        additional_span_processors=[SimpleSpanProcessor(app_spans)],
    )
    calls: list[object] = []
    original = logfire.configure
    monkeypatch.setattr(logfire, "configure", lambda *a, **k: calls.append(k) or original(*a, **k))
    mastrace.configure(logfire=True, local=tmp_path / "store")
    with logfire.span("app request"):
        emit()
    with logfire.span("app after"):
        pass
    assert calls == []  # the application's configuration is reused, not replaced
    assert mastrace.force_flush(timeout=10).destinations["local"].exported == 5
    names = [s.name for s in app_spans.get_finished_spans()]
    assert sorted(names) == sorted(
        [
            "app request",
            "app after",
            "coordination.session",
            "agent.a.round_1",
            "Coordination event: winner_selected",
        ]
    )
    rows = query("SELECT span_name, span_id, parent_span_id, service_name FROM records", tmp_path / "store")
    found = {r["span_name"]: r for r in rows}
    assert found["coordination.session"]["parent_span_id"] == found["app request"]["span_id"]
    assert {r["service_name"] for r in rows} == {"the-app"}  # the application's resource


def test_an_app_logfire_configure_after_mastrace_keeps_both_receiving(tmp_path: Path) -> None:
    """configure(logfire=True) then the app's own logfire.configure(additional_span_processors=[...]):
    mastrace's store and the app's processor both receive every later span, nested."""
    store = tmp_path / "store"
    mastrace.configure(logfire=True, local=store)
    app_spans = InMemorySpanExporter()
    logfire.configure(
        send_to_logfire=False, console=False, additional_span_processors=[SimpleSpanProcessor(app_spans)]
    )
    with logfire.span("app request"):
        emit()
    assert mastrace.force_flush(timeout=10).destinations["local"].exported == 4
    assert {s.name for s in app_spans.get_finished_spans()} == {
        "app request",
        "coordination.session",
        "agent.a.round_1",
        "Coordination event: winner_selected",
    }
    found = {
        r["span_name"]: r for r in query("SELECT span_name, span_id, parent_span_id FROM records", store)
    }
    assert found["coordination.session"]["parent_span_id"] == found["app request"]["span_id"]
    mastrace.configure(logfire=True, local=tmp_path / "two")  # now the app's configuration: reused
    with logfire.span("later"):
        pass
    assert "later" in {s.name for s in app_spans.get_finished_spans()}


def test_logfire_receives_captured_messages_scrubbed(
    fake_logfire: FakeLogfire, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A secret in a captured tool call's arguments or a tool result does not reach Logfire."""
    monkeypatch.setenv("LOGFIRE_BASE_URL", fake_logfire.url)
    mastrace.configure(logfire=FAKE_TOKEN, local=False)
    messages = [
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "c1", "name": "f", "arguments": {"api_key": SECRET}}],
        },
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "c1", "response": f"password={SECRET}"}],
        },
    ]
    with mastrace.get_tracer().span(
        "llm.openai.chat", attributes={"gen_ai.input.messages": json.dumps(messages)}
    ):
        pass
    assert logfire.force_flush(timeout_millis=10_000)
    requests = fake_logfire.trace_requests()
    assert requests and all(SECRET.encode() not in req.SerializeToString() for _, req in requests)


@pytest.mark.parametrize(
    "key",
    [
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.definitions",
        "gen_ai.input.messages",
    ],
)
def test_every_key_logfire_deems_safe_is_scrubbed_for_logfire(
    fake_logfire: FakeLogfire, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    """Content under each key Logfire's scrubber skips, and an exception message on an event, reach
    Logfire scrubbed, while token counts and text without a secret arrive as recorded."""
    monkeypatch.setenv("LOGFIRE_BASE_URL", fake_logfire.url)
    mastrace.configure(logfire=FAKE_TOKEN, local=False)
    content = json.dumps([{"type": "text", "content": f"use the key {SECRET} for the weather tool"}])
    with mastrace.get_tracer().span("llm.openai.chat") as span:
        span.set_attribute(key, content)
        span.set_attribute("gen_ai.usage.input_tokens", 123)
        span.set_attribute("gen_ai.request.model", "gpt-4o-mini")
        span.add_event(
            "exception", {"exception.message": f"401: bad key {SECRET}", "exception.type": "AuthError"}
        )
    assert logfire.force_flush(timeout_millis=10_000)
    sent = [span for _, req in fake_logfire.trace_requests() for span in _spans_of(req)]
    # One span; Logfire's client sends a batch again when an answer is slow (a busy machine): every
    # copy it sent is checked.
    chats = [s for s in sent if s.name == "llm.openai.chat"]
    assert len({bytes(s.span_id) for s in chats}) == 1, chats
    for chat in chats:
        attributes = {a.key: a.value for a in chat.attributes}
        text = attributes[key].string_value
        assert SECRET not in text and "for the weather tool" in text
        assert attributes["gen_ai.usage.input_tokens"].int_value == 123
        assert attributes["gen_ai.request.model"].string_value == "gpt-4o-mini"
        (event,) = [e for e in chat.events if e.name == "exception"]
        message = {a.key: a.value.string_value for a in event.attributes}["exception.message"]
        assert SECRET not in message and message.startswith("401: bad key")


def _spans_of(request: Any) -> list[Any]:
    return [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
