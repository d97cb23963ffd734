"""`--source` against a hostile Query API: peak memory and time to exit 2, beside the deadline.

A loopback socket server answers every request with one hostile answer: an endless body, a
`Content-Length` of 10 GiB, a 1 GiB error body, or one byte every two seconds. Each case runs
`mastrace runs --source URL --source-timeout DEADLINE` in a fresh process, `--repeat` times,
interleaved; the command's peak RSS is read by a small parent of its own (`RUSAGE_CHILDREN`, so no
high-water mark is inherited). Printed side by side per case: exit status, peak RSS against the
300 MB target, and seconds to exit against the deadline (target: exit 2 within it, plus a few
seconds to start and stop).

Run: `python benchmarks/bench_source_bounds.py [--deadline 8] [--repeat 3]`
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

MASTRACE = Path(sys.executable).parent / "mastrace"
TARGET_RSS_MB = 300.0
START_STOP_S = 5.0  # what starting the interpreter and printing the error may add to the deadline
MEASURE = (
    "import resource, subprocess, sys\n"
    "code = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)
Answer = Callable[[socket.socket], None]
ARROW = b"Content-Type: application/vnd.apache.arrow.stream\r\n"


def endless(sock: socket.socket) -> None:
    sock.sendall(b"HTTP/1.1 200 OK\r\n" + ARROW + b"Connection: close\r\n\r\n")
    block = b"\xff" * 65536
    while True:
        sock.sendall(block)


def ten_gib(sock: socket.socket) -> None:
    sock.sendall(b"HTTP/1.1 200 OK\r\n" + ARROW + b"Content-Length: 10737418240\r\n\r\n")
    block = b"\x00" * 65536
    while True:
        sock.sendall(block)


def gib_error(sock: socket.socket) -> None:
    head = b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n"
    sock.sendall(head + b'{"detail": "')
    block = b"e" * 65536
    for _ in range(1073741824 // 65536):
        sock.sendall(block)


def drip(sock: socket.socket) -> None:
    sock.sendall(b"HTTP/1.1 200 OK\r\n" + ARROW + b"\r\n")
    while True:
        sock.sendall(b"\xff")
        time.sleep(2)


CASES: dict[str, Answer] = {
    "endless body": endless,
    "Content-Length 10 GiB": ten_gib,
    "1 GiB error body": gib_error,
    "1 byte every 2 s": drip,
}


def serve(answer: Answer) -> str:
    """A loopback server answering every connection with `answer`; its URL."""
    listener = socket.create_server(("127.0.0.1", 0))

    def one(sock: socket.socket) -> None:
        try:
            sock.recv(65536)
            answer(sock)
        except OSError:
            pass
        finally:
            sock.close()

    def accept() -> None:
        while True:
            sock, _ = listener.accept()
            threading.Thread(target=one, args=(sock,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}"


def run(url: str, deadline: float) -> tuple[int, float, float]:
    """Exit status, peak RSS (MB) and seconds of one `mastrace runs --source url`."""
    argv = [str(MASTRACE), "runs", "--source", url, "--source-timeout", f"{deadline:g}"]
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, *argv], capture_output=True, text=True, check=True, timeout=600
    )
    seconds = time.monotonic() - started
    code, peak_kb = map(int, out.stdout.split())
    return code, peak_kb / 1024, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadline", type=float, default=8.0, help="--source-timeout (seconds)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    urls = {name: serve(answer) for name, answer in CASES.items()}
    results: dict[str, list[tuple[int, float, float]]] = {name: [] for name in CASES}
    for i in range(args.repeat):
        names = list(CASES) if i % 2 == 0 else list(reversed(CASES))
        for name in names:
            results[name].append(run(urls[name], args.deadline))
    print(f"--source against hostile answers, deadline {args.deadline:g} s, {args.repeat} run(s) each")
    header = ("answer", "exit", "peak RSS MB", "vs 300", "seconds", "vs deadline")
    print("  {:24s} {:>6s} {:>12s} {:>7s} {:>8s} {:>12s}".format(*header))
    for name, rows in results.items():
        codes = sorted({code for code, _, _ in rows})
        peak = max(rss for _, rss, _ in rows)
        seconds = statistics.median(s for _, _, s in rows)
        rss_ok = "met" if peak <= TARGET_RSS_MB else "NOT met"
        time_ok = "met" if codes == [2] and seconds <= args.deadline + START_STOP_S else "NOT met"
        print(
            f"  {name:24s} {','.join(map(str, codes)):>6s} {peak:12.0f} {rss_ok:>7s} {seconds:8.1f} "
            f"{seconds / args.deadline:6.2f}x {time_ok}"
        )


if __name__ == "__main__":
    main()
