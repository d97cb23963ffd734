"""`--source` is bounded by the client: a hostile Query API (a raw socket server here) that answers
forever, announces 10 GiB, sends a 1 GiB error, drips, never answers or rate-limits forever ends in
one line on stderr and exit 2 within the deadline, with a bounded peak RSS; rows sent twice are shown
once and counted, as a local store shows them."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mastrace.store.reader import connect
from seed_run import write_store

from .conftest import MASTRACE, clean_env, run_measured

Answer = Callable[[socket.socket, bytes], None]
MAX_RSS = 300 * 2**20
DEADLINE = "8"


def _endless(sock: socket.socket, request: bytes) -> None:
    sock.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.apache.arrow.stream\r\nConnection: close\r\n\r\n"
    )
    block = b"\xff" * 65536
    while True:
        sock.sendall(block)


def _ten_gib(sock: socket.socket, request: bytes) -> None:
    sock.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.apache.arrow.stream\r\n"
        b"Content-Length: 10737418240\r\n\r\n"
    )
    block = b"\x00" * 65536
    while True:
        sock.sendall(block)


def _gib_error(sock: socket.socket, request: bytes) -> None:
    sock.sendall(
        b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n"
    )
    sock.sendall(b'{"detail": "')
    block = b"e" * 65536
    for _ in range(1073741824 // 65536):
        sock.sendall(block)


def _drip(sock: socket.socket, request: bytes) -> None:
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.apache.arrow.stream\r\n\r\n")
    while True:
        sock.sendall(b"\xff")
        time.sleep(2)


def _silent(sock: socket.socket, request: bytes) -> None:
    time.sleep(3600)


def _rate_limited(sock: socket.socket, request: bytes) -> None:
    sock.sendall(b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 60\r\nContent-Length: 0\r\n\r\n")


@pytest.fixture
def hostile() -> Iterator[Callable[[Answer], str]]:
    """Start a raw socket server answering every connection with `answer`; returns its URL."""
    listeners: list[socket.socket] = []

    def start(answer: Answer) -> str:
        listener = socket.create_server(("127.0.0.1", 0))
        listeners.append(listener)

        def serve() -> None:
            while True:
                try:
                    sock, _ = listener.accept()
                except OSError:
                    return
                threading.Thread(target=_answer, args=(sock, answer), daemon=True).start()

        threading.Thread(target=serve, daemon=True).start()
        return f"http://127.0.0.1:{listener.getsockname()[1]}"

    yield start
    for listener in listeners:
        listener.close()


def _answer(sock: socket.socket, answer: Answer) -> None:
    try:
        answer(sock, sock.recv(65536))
    except OSError:
        pass
    finally:
        sock.close()


def _run(*args: str) -> tuple[int, str, int, float]:
    """Exit status, stderr, peak RSS (bytes) and seconds of `mastrace *args` (killed after 120 s)."""
    return run_measured([str(MASTRACE), *args], kill_after=120)


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (_endless, "over the limit"),
        (_ten_gib, "10,737,418,240 bytes"),
        (_gib_error, "eeee"),
        (_drip, "deadline"),
        (_silent, "deadline"),
        (_rate_limited, "rate limiting"),
    ],
    ids=["endless", "10GiB", "1GiB-error", "drip", "silent", "429-forever"],
)
def test_a_hostile_source_is_one_line_and_exit_2(
    hostile: Callable[[Answer], str], answer: Answer, said: str
) -> None:
    """Each hostile answer ends in one line and exit 2 soon after the deadline, in bounded memory."""
    code, stderr, peak, seconds = _run("runs", "--source", hostile(answer), "--source-timeout", DEADLINE)
    assert code == 2 and stderr.count("\n") == 1 and said in stderr, stderr[-1000:]
    assert "Traceback" not in stderr and len(stderr) < 1000
    assert peak <= MAX_RSS, peak >> 20
    assert seconds < float(DEADLINE) + 60, seconds


def test_rows_sent_twice_are_shown_once_and_counted(tmp_path: Path, hostile: Callable[[Answer], str]) -> None:
    """A source answering every row twice: `runs` shows what the store shows, and counts the copies."""
    pytest.importorskip("pyarrow")
    import pyarrow
    import pyarrow.ipc

    store = tmp_path / "store"
    write_store(store)
    lock = threading.Lock()

    def doubled(sock: socket.socket, data: bytes) -> None:
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(
            next(
                line.split(b":")[1]
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
        )
        while len(body) < length:
            body += sock.recv(65536)
        request = json.loads(body)
        with lock, connect(store) as con:
            con.execute("CREATE TEMP TABLE once AS SELECT * FROM records")
            con.execute(
                "CREATE OR REPLACE TEMP VIEW records AS SELECT * FROM once UNION ALL SELECT * FROM once"
            )
            table = con.sql(request["sql"]).limit(int(request["limit"])).to_arrow_table()
        sink = pyarrow.BufferOutputStream()
        with pyarrow.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        payload = sink.getvalue().to_pybytes()
        sock.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.apache.arrow.stream\r\n"
            + f"Content-Length: {len(payload)}\r\n\r\n".encode()
            + payload
        )

    url = hostile(doubled)
    local = subprocess.run(
        [str(MASTRACE), "runs", "--format", "json", "--store", str(store)],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=120,
    )
    remote = subprocess.run(
        [str(MASTRACE), "runs", "--format", "json", "--source", url],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=120,
    )
    assert local.returncode == 0 and remote.returncode == 0, remote.stderr
    assert json.loads(remote.stdout) == json.loads(local.stdout)
    spans = sum(run["spans"] for run in json.loads(local.stdout))
    assert f"{spans} extra copy(ies)" in remote.stderr and "shown once" in remote.stderr, remote.stderr
