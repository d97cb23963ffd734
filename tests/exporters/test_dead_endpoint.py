"""A collector that is down: exit stays bounded, counts are truthful, one line says what was missed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import mastrace
from live_server import serving
from mastrace.exporters.otlp import FastFailExporter

SCRIPT = textwrap.dedent(
    """
    import sys, mastrace
    mastrace.configure(otlp=sys.argv[1], local=sys.argv[2], service_name="exit")
    tracer = mastrace.get_tracer("exit")
    with tracer.span("a"):
        with tracer.span("b"):
            pass
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(endpoint: str, store: Path, protocol: str = "http/protobuf") -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTRACE_", "OTEL_"))}
    env["OTEL_EXPORTER_OTLP_PROTOCOL"] = protocol
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, endpoint, str(store)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    return elapsed, proc.stderr


@pytest.fixture
def receiver() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", "0")))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    with serving(Handler) as url:
        yield url


@pytest.fixture
def silent() -> Iterator[str]:
    """A port that accepts connections and never answers (a hung collector)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(sock.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    sock.close()


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_exit_with_a_refusing_endpoint_is_bounded(tmp_path: Path, receiver: str, protocol: str) -> None:
    """Exit with a port that refuses takes about as long as with a live collector (it took 5.5 s)."""
    live, _ = _run(receiver, tmp_path / "live", protocol)
    dead, stderr = _run(f"http://127.0.0.1:{_free_port()}", tmp_path / "dead", protocol)
    assert dead < live + 2.0, (dead, live)
    lines = [line for line in stderr.splitlines() if "not delivered at exit" in line]
    store = tmp_path / "dead"
    assert lines == [
        f"mastrace: spans not delivered at exit: 2 to otlp; they are in the local store at {store}"
    ]


def test_exit_with_a_hung_endpoint_is_bounded(tmp_path: Path, receiver: str, silent: str) -> None:
    """A collector that accepts and never answers costs at most the OTLP exit budget (1 s)."""
    live, _ = _run(receiver, tmp_path / "live")
    hung, stderr = _run(silent, tmp_path / "hung")
    assert hung < live + 2.5, (hung, live)
    assert "spans not delivered at exit: 2 to otlp" in stderr
    assert "already shutdown" not in stderr


def test_force_flush_reports_what_a_dead_collector_missed(tmp_path: Path) -> None:
    """The README's sample: failed=120, pending=0, and the store holds all 120."""
    mastrace.configure(otlp=f"http://127.0.0.1:{_free_port()}", local=tmp_path / "store")
    tracer = mastrace.get_tracer("dead")
    for i in range(120):
        with tracer.span("work", attributes={"i": i}):
            pass
    result = mastrace.force_flush(timeout=5)
    otlp = result.destinations["otlp"]
    assert (otlp.exported, otlp.dropped, otlp.failed, otlp.pending) == (0, 0, 120, 0)
    assert result.destinations["local"].exported == 120 and result.complete


def test_a_collector_that_comes_back_gets_the_next_batches(tmp_path: Path) -> None:
    """Failing fast while down does not stick: once the port answers, batches go through again."""
    port = _free_port()
    mastrace.configure(otlp=f"http://127.0.0.1:{port}", local=False, exporters=[])
    tracer = mastrace.get_tracer("flap")
    with tracer.span("while down"):
        pass
    assert mastrace.force_flush(timeout=5).destinations["otlp"].failed == 1

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", "0")))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with tracer.span("after"):
            pass
        assert mastrace.force_flush(timeout=5).destinations["otlp"].exported == 1
    finally:
        mastrace.shutdown()
        server.shutdown()
        server.server_close()


def test_the_probe_is_skipped_behind_a_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    from mastrace.exporters.otlp import build_otlp_exporter, guard_otlp_exporter

    inner = build_otlp_exporter("http://127.0.0.1:4318")
    assert isinstance(guard_otlp_exporter(inner, "http://127.0.0.1:4318"), FastFailExporter)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    assert guard_otlp_exporter(inner, "http://127.0.0.1:4318") is inner
    inner.shutdown()


def test_a_hung_collector_holds_a_bounded_queue(
    tmp_path: Path, silent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a local store, the OTLP queue is capped: the rest is counted as dropped, and stored."""
    from mastrace.setup._destinations import REMOTE_QUEUE_WITH_STORE

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    mastrace.configure(local=tmp_path / "store", otlp=silent, otlp_exit_timeout=0.2)
    tracer = mastrace.get_tracer("hung")
    total = REMOTE_QUEUE_WITH_STORE + 5_000
    for i in range(total):
        with tracer.span("work", attributes={"i": i}):
            pass
    result = mastrace.force_flush(timeout=5)
    otlp, local = result.destinations["otlp"], result.destinations["local"]
    assert local.exported == total
    assert otlp.pending <= REMOTE_QUEUE_WITH_STORE + 512  # the queue, and one batch being sent
    assert otlp.dropped >= total - REMOTE_QUEUE_WITH_STORE - otlp.pending
    final = mastrace.shutdown(timeout=2)
    gone = final.destinations["otlp"]
    assert gone.exported + gone.dropped + gone.failed + gone.pending == total
