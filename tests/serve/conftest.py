"""Fixtures for the serve tests: servers (in this process, or `mastrace serve` in its own), a raw
HTTP client that sends exactly the bytes it is given, and the OpenTelemetry JS SDK run by Node."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mastrace.serve import IntakeServer, start_intake

JS = Path(__file__).parent / "js"
MASTRACE = Path(sys.executable).parent / "mastrace"
WAIT = 120.0  # an upper bound for a server to answer on a loaded machine; never a speed requirement


@dataclass
class Reply:
    """What a raw HTTP request got back (status 0: the connection closed without an answer)."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


def raw_http(port: int, data: bytes, *, timeout: float = WAIT) -> Reply:
    """Send `data` as it is to 127.0.0.1:`port`, then read the answer until the server closes or
    its content-length is read."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        with contextlib.suppress(OSError):  # the server may answer and close before all is sent
            sock.sendall(data)
        return read_reply(sock)


def read_reply(sock: socket.socket) -> Reply:
    received = b""
    while b"\r\n\r\n" not in received:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            chunk = b""
        if not chunk:
            break
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    if not head:
        return Reply(0)
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0") or 0)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return Reply(int(lines[0].split()[1]), headers, body)


def request(
    method: str,
    path: str,
    body: bytes = b"",
    *,
    host: str = "127.0.0.1",
    headers: dict[str, str] | None = None,
) -> bytes:
    """The bytes of an HTTP/1.1 request (a Content-Length unless `headers` says otherwise)."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", "Connection: close"]
    given = {k.lower(): v for k, v in (headers or {}).items()}
    if "content-length" not in given and "transfer-encoding" not in given and (body or method == "POST"):
        lines.append(f"Content-Length: {len(body)}")
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


@pytest.fixture
def server(tmp_path: Path) -> Iterator[IntakeServer]:
    """An intake in this process, with small limits and timeouts so that attacks are quick to run."""
    intake = start_intake(
        tmp_path / "store",
        http_port=0,
        grpc_port=0,
        max_body=2 * 1024 * 1024,
        max_in_flight=4 * 1024 * 1024,
        header_timeout=1.0,
        body_timeout=3.0,
    )
    yield intake
    intake.stop()


@dataclass
class ServeProcess:
    """`mastrace serve` running in a process of its own (whose memory can be read)."""

    process: subprocess.Popen[str]
    http_port: int
    grpc_port: int | None
    store: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def peak_rss_mb(self) -> float:
        """The most memory the server process has held (VmHWM), in MB."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        (kb,) = re.findall(r"VmHWM:\s+(\d+) kB", status)
        return int(kb) / 1024


@pytest.fixture
def serve_process(tmp_path: Path) -> Iterator[Callable[..., ServeProcess]]:
    """Start `mastrace serve --http-port 0 ...` with extra arguments; stopped at the end of the test."""
    started: list[ServeProcess] = []

    def start(*args: str, env: dict[str, str] | None = None) -> ServeProcess:
        if not Path("/proc/self/status").exists():
            pytest.skip("reading a process's peak memory needs /proc")
        store = tmp_path / f"store{len(started)}"
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("MASTRACE_", "OTEL_"))}
        process = subprocess.Popen(
            [str(MASTRACE), "serve", "--http-port", "0", "--grpc-port", "0", "--store", str(store), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**clean, **(env or {})},
        )
        assert process.stdout is not None
        first = process.stdout.readline()  # printed once listening; blocks until then (no deadline)
        http = re.search(r"http://[^:]+:(\d+)/v1/traces", first)
        if not http:
            process.kill()
            pytest.fail(f"mastrace serve did not start: {first!r} {process.communicate()[1]}")
        grpc = re.search(r"OTLP/gRPC on [^:]+:(\d+)", first)
        handle = ServeProcess(process, int(http.group(1)), int(grpc.group(1)) if grpc else None, store)
        started.append(handle)
        return handle

    yield start
    for handle in started:
        if handle.process.poll() is None:
            handle.process.send_signal(signal.SIGTERM)
            try:
                handle.process.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                handle.process.kill()
                handle.process.communicate()


def wait_for(condition: Callable[[], bool], what: str, deadline: float = WAIT) -> None:
    """Wait until `condition()` holds; fail saying `what` after a generous deadline."""
    give_up = time.monotonic() + deadline
    while not condition():
        if time.monotonic() > give_up:
            pytest.fail(f"gave up waiting for {what} after {deadline:g} s")
        time.sleep(0.05)


@pytest.fixture(scope="session")
def node_sender() -> Path:
    """The OpenTelemetry JS SDK and OTLP/HTTP exporter, installed from the npm registry into
    `tests/serve/js/node_modules` when missing (`make test` installs them beforehand)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip(
            "Node.js and npm are needed to run the OpenTelemetry JS exporter (install nodejs and npm)"
        )
    marker = JS / "node_modules" / "@opentelemetry" / "exporter-trace-otlp-http" / "package.json"
    if not marker.exists():
        with open(JS / ".install.lock", "w") as lock:  # two suites at once install it once
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not marker.exists():
                proc = subprocess.run(
                    [npm, "ci", "--no-audit", "--no-fund"],
                    cwd=JS,
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                if proc.returncode != 0:
                    pytest.skip(f"npm could not install the OpenTelemetry JS packages: {proc.stderr[-500:]}")
    return JS / "send.js"
