"""`mastrace push` believes only what a receiver says: redirects, partial successes, pages that are
not OTLP, Retry-After, timeouts, and one receiver under two names; counted at the receiver."""

from __future__ import annotations

import gzip
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

import mastrace
from mastrace.serve import start_intake
from mastrace.store import query

from .conftest import Runner

Answer = Callable[["Scripted", BaseHTTPRequestHandler, bytes], None]


@dataclass
class Scripted:
    """A loopback HTTP server answering each request with the next scripted answer (the last one
    repeats), recording every request: method, path, span ids and arrival time."""

    answers: list[Answer]
    requests: list[tuple[str, str, list[str], float]] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> Scripted:
        script = self

        class Handler(BaseHTTPRequestHandler):
            def handle_one(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0") or 0))
                ids: list[str] = []
                if body:
                    data = gzip.decompress(body) if self.headers.get("content-encoding") == "gzip" else body
                    request = ExportTraceServiceRequest.FromString(data)
                    ids = [
                        s.span_id.hex()
                        for rs in request.resource_spans
                        for ss in rs.scope_spans
                        for s in ss.spans
                    ]
                n = len(script.requests)
                script.requests.append((self.command, self.path, ids, time.monotonic()))
                script.answers[min(n, len(script.answers) - 1)](script, self, body)

            do_POST = do_GET = handle_one

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def spans(self) -> Counter[str]:
        """How many times each span id arrived."""
        return Counter(i for _, _, ids, _ in self.requests for i in ids)


def reply(status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> Answer:
    def answer(script: Scripted, handler: BaseHTTPRequestHandler, _: bytes) -> None:
        handler.send_response(status)
        for k, v in (headers or {}).items():
            handler.send_header(k, v)
        handler.send_header("content-length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return answer


OK = reply(200, b"", {"content-type": "application/x-protobuf"})


@pytest.fixture
def scripted() -> Iterator[Callable[..., Scripted]]:
    made: list[Scripted] = []

    def make(*answers: Answer) -> Scripted:
        made.append(Scripted(list(answers)).start())
        return made[-1]

    yield make
    for s in made:
        s.stop()


def stored_spans(store: Path, n: int) -> Path:
    mastrace.configure(local=store, service_name="answers")
    tracer = mastrace.get_tracer("answers")
    with tracer.span("coordination.session"):
        for i in range(n - 1):
            with tracer.span(f"work.{i}"):
                pass
    mastrace.shutdown()
    return store


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_to_another_origin_delivers_nothing_and_marks_nothing(
    tmp_path: Path, scripted: Callable[..., Scripted], mastrace_cli: Runner, status: int
) -> None:
    """A redirect to another port: exit 2, nothing marked; the other server got no request at all."""
    store = stored_spans(tmp_path / "store", 1200)
    target = scripted(OK)
    redirecting = scripted(reply(status, headers={"location": target.url + "/v1/traces"}))
    proc = mastrace_cli("push", "--to", redirecting.url, store=store)
    assert proc.returncode == 2 and "another origin" in proc.stderr
    assert target.requests == [] and len(redirecting.requests) == 1
    direct = mastrace_cli("push", "--to", target.url, store=store)
    assert direct.returncode == 0 and "sent 1200 span(s)" in direct.stdout
    assert len(target.spans()) == 1200 and max(target.spans().values()) == 1


def test_a_redirect_on_the_same_origin_is_followed_with_the_spans(
    tmp_path: Path, scripted: Callable[..., Scripted], mastrace_cli: Runner
) -> None:
    """A 307 to another path of the same server is followed, carrying the same POST."""
    store = stored_spans(tmp_path / "store", 5)

    def route(script: Scripted, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        if handler.path == "/v1/traces":
            reply(307, headers={"location": "/collector/v1/traces"})(script, handler, body)
        else:
            OK(script, handler, body)

    receiver = scripted(route)
    proc = mastrace_cli("push", "--to", receiver.url, store=store)
    assert proc.returncode == 0, proc.stderr
    assert [(m, p, len(ids)) for m, p, ids, _ in receiver.requests] == [
        ("POST", "/v1/traces", 5),
        ("POST", "/collector/v1/traces", 5),
    ]
    assert mastrace_cli("push", "--to", receiver.url, store=store).stdout.startswith("sent 0 span(s)")


def test_a_partial_success_is_not_sent_again(
    tmp_path: Path, scripted: Callable[..., Scripted], mastrace_cli: Runner
) -> None:
    """The receiver rejects 10 of the first 512: push goes on, says so, and the next push resends nothing."""
    store = stored_spans(tmp_path / "store", 1200)
    partial = ExportTraceServiceResponse()
    partial.partial_success.rejected_spans = 10
    partial.partial_success.error_message = "10 spans too old"
    receiver = scripted(
        reply(200, partial.SerializeToString(), {"content-type": "application/x-protobuf"}), OK
    )
    proc = mastrace_cli("push", "--to", receiver.url, store=store)
    assert proc.returncode == 0, proc.stderr
    assert "sent 1200 span(s)" in proc.stdout and "10 rejected by the receiver" in proc.stdout
    assert "rejected 10 of the span(s) sent: 10 spans too old" in proc.stderr
    again = mastrace_cli("push", "--to", receiver.url, store=store)
    assert "sent 0 span(s)" in again.stdout
    assert len(receiver.spans()) == 1200 and max(receiver.spans().values()) == 1  # 0 duplicates


@pytest.mark.parametrize(
    ("body", "media"),
    [
        (b"<html><body>Welcome to nginx!</body></html>", "text/html"),
        (b"ok", ""),
        (b"{not json", "application/json"),
    ],
)
def test_a_2xx_that_is_not_otlp_is_an_error(
    tmp_path: Path, scripted: Callable[..., Scripted], mastrace_cli: Runner, body: bytes, media: str
) -> None:
    """A web page (or anything but an OTLP answer) with 200 is not a delivery: exit 2, nothing marked."""
    store = stored_spans(tmp_path / "store", 4)
    page = scripted(reply(200, body, {"content-type": media} if media else {}))
    proc = mastrace_cli("push", "--to", page.url, store=store)
    assert proc.returncode == 2 and "not" in proc.stderr and "OTLP" in proc.stderr
    assert not (store / "pushed").exists() or not list((store / "pushed").glob("*.json"))


def test_429_with_retry_after_is_honoured(
    tmp_path: Path, scripted: Callable[..., Scripted], mastrace_cli: Runner
) -> None:
    """Twice 429 `Retry-After: 1`, then 200: the batch arrives once, and push waited as told."""
    store = stored_spans(tmp_path / "store", 3)
    busy = reply(429, b"slow down", {"retry-after": "1"})
    receiver = scripted(busy, busy, OK)
    proc = mastrace_cli("push", "--to", receiver.url, store=store)
    assert proc.returncode == 0, proc.stderr
    times = [t for _, _, _, t in receiver.requests]
    assert len(times) == 3 and times[1] - times[0] >= 1.0 and times[2] - times[1] >= 1.0
    assert sum(receiver.spans().values()) == 9 and "sent 3 span(s)" in proc.stdout


def test_a_receiver_always_busy_gives_up_after_a_few_retries(
    tmp_path: Path, scripted: Callable[..., Scripted], mastrace_cli: Runner
) -> None:
    """503 every time: a bounded number of attempts, then exit 2 with nothing marked."""
    store = stored_spans(tmp_path / "store", 2)
    receiver = scripted(reply(503, b"down", {"retry-after": "0"}))
    proc = mastrace_cli("push", "--to", receiver.url, store=store)
    assert proc.returncode == 2 and "503" in proc.stderr and "attempts" in proc.stderr
    assert len(receiver.requests) == 6


def test_two_urls_of_one_receiver_are_one_destination(
    tmp_path: Path, scripted: Callable[..., Scripted], mastrace_cli: Runner
) -> None:
    """Pushed to 127.0.0.1, then to localhost (and with a trailing slash): nothing is sent twice, and
    the later pushes count what the first one sent."""
    store = stored_spans(tmp_path / "store", 50)
    receiver = scripted(OK)
    port = receiver.url.rsplit(":", 1)[1]
    first = mastrace_cli("push", "--to", f"http://127.0.0.1:{port}", store=store)
    second = mastrace_cli("push", "--to", f"http://localhost:{port}/", store=store)
    third = mastrace_cli("push", "--to", f"http://localhost:{port}/v1/traces", store=store)
    assert "sent 50 span(s)" in first.stdout
    assert "sent 0 span(s)" in second.stdout and "sent 0 span(s)" in third.stdout, second.stderr
    assert "50 already sent before" in second.stdout and "50 already sent before" in third.stdout
    assert len(receiver.spans()) == 50 and max(receiver.spans().values()) == 1


def test_what_a_receiver_took_live_under_one_name_is_not_pushed_under_another(
    tmp_path: Path, scripted: Callable[..., Scripted], mastrace_cli: Runner
) -> None:
    """Exported live to `localhost`, pushed to `127.0.0.1`: only what the live export missed is sent."""
    receiver = scripted(OK)
    port = receiver.url.rsplit(":", 1)[1]
    store = tmp_path / "store"
    mastrace.configure(local=store, otlp=f"http://localhost:{port}", service_name="live")
    with mastrace.get_tracer().span("live"):
        pass
    assert mastrace.force_flush(timeout=30).destinations["otlp"].exported == 1
    mastrace.shutdown()
    proc = mastrace_cli("push", "--to", f"http://127.0.0.1:{port}", store=store)
    assert "sent 0 span(s)" in proc.stdout and "1 already sent before" in proc.stdout


def test_a_timeout_leaves_the_batch_unmarked_and_a_store_shows_it_once(
    tmp_path: Path, scripted: Callable[..., Scripted], mastrace_cli: Runner
) -> None:
    """The receiver stores the batch but answers after push's timeout: exit 2, batch unmarked; the
    next push sends it again, and the receiving mastrace store shows every span once."""
    store = stored_spans(tmp_path / "store", 30)
    intake = start_intake(tmp_path / "received", http_port=None, grpc_port=None)
    released = threading.Event()

    def slow_then_store(script: Scripted, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        intake.intake.ingest(ExportTraceServiceRequest.FromString(gzip.decompress(body)))
        if len(script.requests) == 1:
            released.wait(120)  # answers only after push gave up
        OK(script, handler, body)

    try:
        receiver = scripted(slow_then_store)
        proc = mastrace_cli("push", "--timeout", "1", "--to", receiver.url, store=store)
        released.set()
        assert proc.returncode == 2 and "did not answer within 1 s" in proc.stderr
        assert "not marked as sent" in proc.stderr
        again = mastrace_cli("push", "--to", receiver.url, store=store)
        assert again.returncode == 0 and "sent 30 span(s)" in again.stdout
        assert sum(receiver.spans().values()) == 60  # received twice ...
        shown = query("SELECT count(*) AS n FROM records", tmp_path / "received")
        assert shown == [{"n": 30}]  # ... shown once
    finally:
        released.set()
        intake.stop()


def test_pushing_twice_into_a_mastrace_store_doubles_no_number(tmp_path: Path, mastrace_cli: Runner) -> None:
    """The same spans pushed twice (two stores' records, as after a lost record) into `mastrace serve`:
    `runs` there shows each span once."""
    store = stored_spans(tmp_path / "store", 20)
    intake = start_intake(tmp_path / "received", http_port=0, grpc_port=None)
    try:
        url = f"http://127.0.0.1:{intake.http_port}"
        assert mastrace_cli("push", "--to", url, store=store).returncode == 0
        for record in (store / "pushed").glob("*.json"):
            record.unlink()  # forget what was sent: the next push sends it all again
        assert mastrace_cli("push", "--to", url, store=store).returncode == 0
        assert intake.intake.stored == 40
        runs = mastrace_cli("runs", "--format", "json", store=tmp_path / "received")
        assert '"spans": 20' in runs.stdout and "20 extra copy(ies)" in runs.stderr
    finally:
        intake.stop()


def test_the_push_record_counts_what_it_sent_and_an_older_record_is_counted_once(
    tmp_path: Path, scripted: Callable[..., Scripted], mastrace_cli: Runner
) -> None:
    """The record keeps the number of spans sent per segment, so the next push says how many were
    sent before without reading them; a record written before that count existed is counted from
    its segments, and gets the count."""
    import json

    store = stored_spans(tmp_path / "store", 30)
    receiver = scripted(OK)
    url = receiver.url
    assert "sent 30 span(s)" in mastrace_cli("push", "--to", url, store=store).stdout
    from mastrace.store._replay import PUSHED_DIR

    (record,) = (store / PUSHED_DIR).glob("*.json")
    data = json.loads(record.read_text())
    assert sum(data["lines"].values()) == 30 and data["lines"].keys() == data["offsets"].keys()
    del data["lines"]  # as an older version wrote it
    record.write_text(json.dumps(data))
    again = mastrace_cli("push", "--to", url, store=store)
    assert "sent 0 span(s)" in again.stdout and "30 already sent before" in again.stdout
    assert sum(json.loads(record.read_text())["lines"].values()) == 30
    assert len(receiver.spans()) == 30 and max(receiver.spans().values()) == 1
