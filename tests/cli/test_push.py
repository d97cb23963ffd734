"""`mastrace push`: stored spans reach an OTLP endpoint once, as first exported; outages are made
good; bad destinations and answers give a clear error and mark nothing as sent."""

from __future__ import annotations

import gzip
import json
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import mastrace

from .conftest import Runner


@dataclass
class Receiver:
    """A loopback OTLP/HTTP receiver that decodes what it gets; it can go down and come back."""

    port: int = 0
    status: int = 200
    spans: list[Any] = field(default_factory=list)
    resources: list[dict[str, str]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                if receiver.status != 200:
                    self.send_response(receiver.status)
                    self.send_header("content-length", "5")
                    self.end_headers()
                    self.wfile.write(b"nope!")
                    return
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver.take(ExportTraceServiceRequest.FromString(body))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def take(self, request: ExportTraceServiceRequest) -> None:
        for resource_spans in request.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(span)
                    self.resources.append(resource)

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def ids(self) -> Counter[str]:
        return Counter(span.span_id.hex() for span in self.spans)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver().start()
    yield r
    r.stop()


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _emit(n: int, prefix: str = "work") -> None:
    tracer = mastrace.get_tracer("push")
    with tracer.span("coordination.session", attributes={"massgen.task": prefix}) as session:
        for i in range(n - 1):
            with tracer.span(
                f"{prefix}.{i}", attributes={"i": i, "cfg": {"k": [1, 2]}, "api_key": "sk-" + "x" * 30}
            ):
                pass
        session.add_event("checkpoint", {"n": n})


def _stored(store: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for f in sorted((store / "segments").glob("*.ndjson"))
        for line in f.read_text().splitlines()
    ]


def test_push_sends_every_span_once_as_first_exported(
    tmp_path: Path, receiver: Receiver, mastrace_cli: Runner
) -> None:
    store = tmp_path / "store"
    mastrace.configure(local=store, otlp=_dead_url(), service_name="pushed")
    _emit(30)
    tracer = mastrace.get_tracer("push")
    with tracer.span("target") as target:
        pass
    assert target.span_context is not None
    with tracer.span("linking", links=[target]):
        pass
    mastrace.shutdown()
    rows = _stored(store)
    proc = mastrace_cli("push", "--to", receiver.url, store=store)
    assert proc.returncode == 0, proc.stderr
    assert f"sent {len(rows)} span(s)" in proc.stdout
    assert receiver.ids() == Counter(r["span_id"] for r in rows)
    by_id = {span.span_id.hex(): span for span in receiver.spans}
    for row in rows:  # the same ids, parents, names, times and attributes
        span = by_id[row["span_id"]]
        assert span.trace_id.hex() == row["trace_id"] and span.name == row["span_name"]
        assert span.parent_span_id.hex() == (row.get("parent_span_id") or "")
        assert (span.start_time_unix_nano, span.end_time_unix_nano) == (row["start_ns"], row["end_ns"])
    work = next(s for s in receiver.spans if s.name == "work.3")
    attrs = {a.key: a.value for a in work.attributes}
    assert attrs["i"].int_value == 3 and attrs["api_key"].string_value.startswith("[Scrubbed")
    assert json.loads(attrs["cfg"].string_value) == {"k": [1, 2]}
    session = next(s for s in receiver.spans if s.name == "coordination.session")
    assert [e.name for e in session.events] == ["checkpoint"]
    linking = next(s for s in receiver.spans if s.name == "linking")
    assert [lk.span_id.hex() for lk in linking.links] == [f"{target.span_context.span_id:016x}"]
    assert all(r["service.name"] == "pushed" for r in receiver.resources)
    again = mastrace_cli("push", "--to", receiver.url, store=store)
    assert again.returncode == 0 and "sent 0 span(s)" in again.stdout
    assert len(receiver.spans) == len(rows)


def test_an_outage_is_made_good_without_duplicates(
    tmp_path: Path, receiver: Receiver, mastrace_cli: Runner
) -> None:
    """Live export, the collector down, back again; then push: nothing missing, nothing twice."""
    store = tmp_path / "store"
    mastrace.configure(local=store, otlp=receiver.url, service_name="outage")
    _emit(40, "before")
    assert mastrace.force_flush(timeout=10).destinations["otlp"].exported == 40
    receiver.stop()
    _emit(40, "during")
    assert mastrace.force_flush(timeout=10).destinations["otlp"].failed == 40
    receiver.start()  # the same port
    _emit(40, "after")
    mastrace.shutdown()
    assert len(receiver.spans) == 80
    proc = mastrace_cli("push", "--to", receiver.url, store=store)
    assert proc.returncode == 0, proc.stderr
    assert "sent 40 span(s)" in proc.stdout
    ids = receiver.ids()
    assert set(ids) == {r["span_id"] for r in _stored(store)}
    assert max(ids.values()) == 1


def test_a_push_of_some_traces_then_of_all(tmp_path: Path, receiver: Receiver, mastrace_cli: Runner) -> None:
    store = tmp_path / "store"
    mastrace.configure(local=store, service_name="partial")
    _emit(5, "first")
    _emit(7, "second")
    mastrace.shutdown()
    rows = _stored(store)
    second = next(r["trace_id"] for r in rows if r["span_name"] == "second.0")
    proc = mastrace_cli("push", second, "--to", receiver.url, store=store)
    assert proc.returncode == 0 and "sent 7 span(s)" in proc.stdout, proc.stderr
    proc = mastrace_cli("push", "--to", receiver.url, store=store)
    assert "sent 5 span(s)" in proc.stdout and "7 already sent before" in proc.stdout
    assert max(receiver.ids().values()) == 1 and len(receiver.spans) == 12


def test_push_over_grpc(tmp_path: Path, mastrace_cli: Runner) -> None:
    got: list[Any] = []

    class Service(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:
            got.extend(s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans)
            return trace_service_pb2.ExportTraceServiceResponse()

    import grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        store = tmp_path / "store"
        mastrace.configure(local=store, service_name="grpc")
        _emit(6)
        mastrace.shutdown()
        proc = mastrace_cli("push", "--to", f"http://127.0.0.1:{port}", "--protocol", "grpc", store=store)
        assert proc.returncode == 0, proc.stderr
        assert len(got) == 6
        again = mastrace_cli("push", "--to", f"http://127.0.0.1:{port}", "--protocol", "grpc", store=store)
        assert "sent 0 span(s)" in again.stdout and len(got) == 6
    finally:
        server.stop(0)


def test_push_to_logfire_carries_the_token(
    tmp_path: Path, receiver: Receiver, mastrace_cli: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    mastrace.configure(local=store, service_name="lf")
    _emit(3)
    mastrace.shutdown()
    import os
    import subprocess

    from .conftest import MASTRACE, clean_env

    env = {**clean_env(), "LOGFIRE_TOKEN": "pylf_v1_us_not-a-real-token", "LOGFIRE_BASE_URL": receiver.url}
    proc = subprocess.run(
        [str(MASTRACE), "push", "--to", "logfire", "--store", str(store)],
        capture_output=True,
        text=True,
        env=env,
        cwd=os.getcwd(),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert len(receiver.spans) == 3
    assert receiver.headers[0]["authorization"] == "pylf_v1_us_not-a-real-token"


@pytest.mark.parametrize("status", [400, 503])
def test_an_error_answer_marks_nothing_as_sent(
    tmp_path: Path, receiver: Receiver, mastrace_cli: Runner, status: int
) -> None:
    store = tmp_path / "store"
    mastrace.configure(local=store, service_name="err")
    _emit(4)
    mastrace.shutdown()
    receiver.status = status
    proc = mastrace_cli("push", "--to", receiver.url, store=store)
    assert proc.returncode == 2
    assert f"answered {status}" in proc.stderr and "nope!" in proc.stderr
    receiver.status = 200
    proc = mastrace_cli("push", "--to", receiver.url, store=store)
    assert proc.returncode == 0 and "sent 4 span(s)" in proc.stdout


def test_bad_destinations_and_records(tmp_path: Path, mastrace_cli: Runner, receiver: Receiver) -> None:
    store = tmp_path / "store"
    mastrace.configure(local=store, service_name="bad")
    _emit(2)
    mastrace.shutdown()
    for to, message in (
        ("ftp://example.org", "unsupported destination"),
        ("localhost:4318", "unsupported destination"),
        (_dead_url(), "cannot reach"),
    ):
        proc = mastrace_cli("push", "--to", to, store=store)
        assert proc.returncode == 2 and message in proc.stderr, (to, proc.stderr)
    assert mastrace_cli("push", "--to", "logfire", store=store).returncode == 2  # no token
    assert mastrace_cli("push", "--to", receiver.url, store=tmp_path / "nothing").returncode == 2
    # a hand-edited line is skipped and counted; a corrupt record is an error, not a resend
    (segment,) = (store / "segments").glob("*.ndjson")
    with segment.open("a") as f:
        f.write('{"span_id": "zz", "trace_id": [1]}\n')
    proc = mastrace_cli("push", "--to", receiver.url, store=store)
    assert (
        proc.returncode == 0
        and "sent 2 span(s)" in proc.stdout
        and "1 malformed line(s) skipped" in proc.stdout
    )
    for record in (store / "pushed").glob("*.json"):
        record.write_text("{not json")
    proc = mastrace_cli("push", "--to", receiver.url, store=store)
    assert proc.returncode == 2 and "cannot read the push record" in proc.stderr
    assert len(receiver.spans) == 2


def test_push_since_and_from_several_stores(tmp_path: Path, receiver: Receiver, mastrace_cli: Runner) -> None:
    """`--since` sends only recent spans; several `--store`s are pushed together, each remembered apart."""
    from datetime import datetime, timezone

    old, new = tmp_path / "old", tmp_path / "new"
    mastrace.configure(local=old, service_name="old")
    _emit(3, "old")
    mastrace.shutdown()
    mastrace.configure(local=new, service_name="new")
    _emit(4, "new")
    mastrace.shutdown()
    # The moment between the two: the first start of the new spans (to the microsecond, rounded
    # down), whatever time passed between them on a slow machine.
    first_new = min(r["start_ns"] for r in _stored(new))
    assert max(r["start_ns"] for r in _stored(old)) < first_new // 1000 * 1000
    since = datetime.fromtimestamp(first_new // 1000 / 1e6, tz=timezone.utc).isoformat()
    proc = mastrace_cli("push", "--since", since, "--to", receiver.url, "--store", str(old), store=new)
    assert proc.returncode == 0, proc.stderr
    assert "sent 4 span(s)" in proc.stdout
    proc = mastrace_cli("push", "--to", receiver.url, "--store", str(old), store=new)
    assert "sent 3 span(s)" in proc.stdout and "4 already sent before" in proc.stdout
    assert len(receiver.spans) == 7 and max(receiver.ids().values()) == 1
    bad = mastrace_cli("push", "--since", "yesterday-ish", "--to", receiver.url, store=new)
    assert bad.returncode == 2 and "--since takes" in bad.stderr
