"""Logfire's Query API in `mastrace serve`, and `analyze --source`, against the same work done locally.

Writes stores of 100,000 and 1,000,000 spans (the MassGen-shaped session of `bench_analyze.py`),
starts `mastrace serve` on each in its own process, and times, alternately and `--repeat` times each:

- `mastrace query "<SQL>" --format json` and `--format csv` on the store (in this process, through
  `mastrace.cli.main`, so without interpreter start-up): the baselines;
- `POST /v2/query` answered as JSON rows (`LogfireQueryClient.query_json_rows`) and as an Arrow
  stream (`query_arrow`), every row asked for, the client's decoding included;
- `mastrace analyze latest` with `--store` and with `--source http://127.0.0.1:<port>` on the
  100,000-span run, in this process and as whole commands (a new interpreter each).

The SQL reads six columns of every span, `attributes` among them. It prints the median of each and
the ratios (targets: Arrow ≤ 1.5× and JSON ≤ 3× `mastrace query`; `analyze --source` ≤ 2× `--store`).

Run: `python benchmarks/bench_query_api.py [--repeat N] [--sizes 100000,1000000] [--dir DIR]`
"""

from __future__ import annotations

import argparse
import io
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from _common import print_ratios
from bench_analyze import write_store
from logfire.query_client import LogfireQueryClient

from mastrace.cli import main

SQL = "SELECT span_name, span_id, trace_id, duration, start_timestamp, attributes FROM records"
SINCE = datetime(2000, 1, 1, tzinfo=timezone.utc)
MASTRACE = Path(sys.executable).with_name("mastrace")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(store: Path) -> Iterator[str]:
    """`mastrace serve` over `store` in its own process; yields its base URL."""
    port = _free_port()
    process = subprocess.Popen(
        [str(MASTRACE), "serve", "--store", str(store), "--http-port", str(port), "--grpc-port", "-1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(url + "/health", timeout=5).read()
            break
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise SystemExit("mastrace serve did not start") from None
            time.sleep(0.1)
    try:
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def _cli(*args: str) -> None:
    code = main(list(args), stdout=io.StringIO())
    if code:
        raise SystemExit(f"mastrace {' '.join(args)} failed with {code}")


def _command(*args: str) -> None:
    subprocess.run([str(MASTRACE), *args], check=True, stdout=subprocess.DEVNULL)


def _time(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(variants: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median seconds of each variant over `repeat` interleaved rounds (after one warm-up round)."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for fn in variants.values():
        fn()
    for _ in range(repeat):
        for name, fn in variants.items():
            samples[name].append(_time(fn))
    for name, values in samples.items():
        print(f"  {name:<44} median {statistics.median(values):7.3f} s   best {min(values):7.3f} s")
    return {name: statistics.median(values) for name, values in samples.items()}


def bench_query(store: Path, rows: int, repeat: int) -> list[tuple[str, float, float, str, float]]:
    print(f"\n{rows:,} rows: {SQL}")
    with serving(store) as url, LogfireQueryClient("local", base_url=url) as client:
        assert len(client.query_json_rows(SQL, min_timestamp=SINCE, limit=rows + 1)["rows"]) == rows
        times = measure(
            {
                "mastrace query --format json": lambda: _cli(
                    "query", SQL, "--store", str(store), "--format", "json"
                ),
                "mastrace query --format csv": lambda: _cli(
                    "query", SQL, "--store", str(store), "--format", "csv"
                ),
                "/v2/query JSON (query_json_rows)": lambda: client.query_json_rows(
                    SQL, min_timestamp=SINCE, limit=rows + 1
                ),
                "/v2/query Arrow (query_arrow)": lambda: client.query_arrow(
                    SQL, min_timestamp=SINCE, limit=rows + 1
                ),
            },
            repeat,
        )
    json_base, csv_base = times["mastrace query --format json"], times["mastrace query --format csv"]
    fastest = min(json_base, csv_base)
    label = f"{rows // 1000}k"
    return [
        (
            f"{label} JSON / mastrace query --format json",
            times["/v2/query JSON (query_json_rows)"],
            json_base,
            "<=",
            3.0,
        ),
        (
            f"{label} JSON / fastest mastrace query",
            times["/v2/query JSON (query_json_rows)"],
            fastest,
            "<=",
            3.0,
        ),
        (
            f"{label} Arrow / mastrace query --format json",
            times["/v2/query Arrow (query_arrow)"],
            json_base,
            "<=",
            1.5,
        ),
        (
            f"{label} Arrow / fastest mastrace query",
            times["/v2/query Arrow (query_arrow)"],
            fastest,
            "<=",
            1.5,
        ),
    ]


def bench_analyze(store: Path, repeat: int) -> list[tuple[str, float, float, str, float]]:
    print(f"\nmastrace analyze latest, {store.name}")
    with serving(store) as url:
        report = str(store.parent / "report.md")
        times = measure(
            {
                "analyze --store (in process)": lambda: _cli(
                    "analyze", "latest", "-o", report, "--store", str(store)
                ),
                "analyze --source (in process)": lambda: _cli(
                    "analyze", "latest", "-o", report, "--source", url
                ),
                "analyze --store (command)": lambda: _command(
                    "analyze", "latest", "-o", report, "--store", str(store)
                ),
                "analyze --source (command)": lambda: _command(
                    "analyze", "latest", "-o", report, "--source", url
                ),
            },
            repeat,
        )
    return [
        ("analyze --source / --store, in process", times["analyze --source (in process)"],
         times["analyze --store (in process)"], "<=", 2.0),
        ("analyze --source / --store, whole command", times["analyze --source (command)"],
         times["analyze --store (command)"], "<=", 2.0),
    ]  # fmt: skip


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sizes", default="100000,1000000", help="store sizes in spans, comma-separated")
    parser.add_argument("--dir", type=Path, default=None, help="write the stores here (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = args.dir or Path(scratch)
        stores = {}
        for size in (int(s) for s in args.sizes.split(",")):
            path = root / f"store{size}"
            if not path.exists():
                write_store(path, size)
            buffer = io.StringIO()
            main(
                ["query", "SELECT count(*) FROM records", "--store", str(path), "--format", "csv"],
                stdout=buffer,
            )
            stores[int(buffer.getvalue().split()[1])] = path
        ratios = []
        for rows, path in stores.items():
            ratios += bench_query(path, rows, args.repeat)
        smallest = min(stores)
        ratios += bench_analyze(stores[smallest], args.repeat)
    print_ratios(ratios)


if __name__ == "__main__":
    main_bench()
