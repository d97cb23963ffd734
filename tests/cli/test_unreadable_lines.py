"""A line no reader could read (36 MB, 1 GiB, or foreign bytes) is skipped and counted by every
command: the good runs stay visible, the exit status stays 0."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import mastrace
from mastrace.analysis import TraceStore
from mastrace.store import connect, query
from mastrace.store.reader import root_files, segment_files, store_health

from .conftest import Runner

GIB = 1 << 30


def good_store(store: Path) -> dict[str, object]:
    """A store with one coordination session (two rounds, a cost) written by mastrace; its root row."""
    mastrace.configure(local=store, service_name="good", synchronous=True)
    tracer = mastrace.get_tracer()
    with tracer.span("coordination.session", attributes={"massgen.task": "t"}):
        for i in range(2):
            with tracer.span(
                f"agent.a.round_{i}", attributes={"massgen.agent_id": "a", "massgen.usage.cost": 0.25}
            ):
                pass
    mastrace.shutdown()
    (segment,) = segment_files(store)
    return next(
        json.loads(line) for line in segment.read_text().splitlines() if '"coordination.session"' in line
    )


def append_line(path: Path, row: dict[str, object], filler: int, *, sparse: bool = False) -> None:
    """Append `row` with a string of `filler` bytes in its attributes: written out, or as a sparse
    hole (a 1 GiB line that takes no disk space and reads as NUL bytes)."""
    head = json.dumps({**row, "attributes": {}})[:-2].encode() + b',"attributes":{"x":"'
    with path.open("ab") as f:
        f.write(head)
        if sparse:
            f.truncate(f.tell() + filler)
            f.seek(0, os.SEEK_END)
        else:
            f.write(b"\\u0001" * (filler // 6))  # control characters, as JSON escapes them
        f.write(b'"}}\n')


@pytest.fixture(scope="module")
def bad_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A good session, plus a 36 MB line and a 1 GiB line (a root each, so in the roots file too)."""
    store = tmp_path_factory.mktemp("unreadable") / "store"
    root = good_store(store)
    (segment,) = segment_files(store)
    (roots,) = root_files(store)
    for path in (segment, roots):
        append_line(path, {**root, "span_id": "1" * 16, "trace_id": "e" * 32}, 36_000_000)
        append_line(path, {**root, "span_id": "2" * 16, "trace_id": "f" * 32}, GIB, sparse=True)
    assert segment.stat().st_size > GIB
    return store


@pytest.mark.parametrize(
    "command",
    [
        ["runs"],
        ["runs", "--format", "json"],
        ["tree", "latest"],
        ["analyze", "latest", "-o", "-"],
        ["view", "latest", "-o", "view.html"],
        ["diff", "latest", "latest"],
        ["export", "latest", "--format", "otlp-json"],
        ["query", "SELECT span_name, attributes->>'massgen.usage.cost' AS cost FROM records ORDER BY 1"],
    ],
)
def test_every_command_skips_and_counts_the_long_lines(
    bad_store: Path, mastrace_cli: Runner, command: list[str]
) -> None:
    """Each reading command answers from the good lines, exit 0, and says it skipped the two long ones."""
    proc = mastrace_cli(*command, store=bad_store)
    assert proc.returncode == 0, proc.stderr
    assert "skipped 2 malformed row(s)" in proc.stderr
    assert "maximum_object_size" not in proc.stderr + proc.stdout
    if command[0] in ("runs", "query"):
        assert "coordination.session" in proc.stdout
    if command[0] == "query":
        assert proc.stdout.count("0.25") == 2


def test_the_runs_of_the_store_stay_visible(bad_store: Path, mastrace_cli: Runner) -> None:
    """`runs` lists the good session with its totals: nothing hides it, nothing is doubled."""
    proc = mastrace_cli("runs", "--format", "json", store=bad_store)
    (run,) = json.loads(proc.stdout)
    assert (run["name"], run["spans"], run["cost"]) == ("coordination.session", 3, 0.5)


def test_the_library_reads_around_them_too(bad_store: Path) -> None:
    """`connect()`, `query()` and `TraceStore` see the good rows and count the long ones as skipped."""
    assert query("SELECT count(*) AS n FROM records", bad_store) == [{"n": 3}]
    assert query("SELECT count(*) AS n FROM roots", bad_store) == [{"n": 1}]
    with connect(bad_store) as con:
        assert store_health(con, bad_store).skipped == 2
    with TraceStore(bad_store, sandbox=True) as traces:
        assert traces.resolve("latest") == traces.rows("SELECT trace_id FROM roots")[0]["trace_id"]
        assert traces.health().skipped == 2


def test_a_long_line_written_after_the_store_was_opened_is_skipped_too(tmp_path: Path) -> None:
    """A query that meets a long line the opening check did not see is run again without it."""
    store = tmp_path / "store"
    root = good_store(store)
    (segment,) = segment_files(store)
    with TraceStore(store) as traces:
        assert len(traces.runs()) == 1
        append_line(segment, {**root, "span_id": "3" * 16}, 40_000_000)
        assert [r.spans for r in traces.runs()] == [3]


def test_push_skips_and_counts_them_without_holding_them(bad_store: Path, mastrace_cli: Runner) -> None:
    """`push` sends the good spans and counts the long lines as malformed, reading them in pieces."""
    from .test_push import Receiver

    receiver = Receiver().start()
    try:
        proc = mastrace_cli("push", "--to", receiver.url, store=bad_store)
    finally:
        receiver.stop()
    assert proc.returncode == 0, proc.stderr
    assert "sent 3 span(s)" in proc.stdout and "2 malformed line(s) skipped" in proc.stdout
    assert len(receiver.spans) == 3


def test_every_ui_and_api_route_reads_around_them(bad_store: Path) -> None:
    """`serve`'s pages and API answer from the good lines and say how many were skipped: the runs
    list is not emptied by a line no reader can read."""
    import urllib.request

    from mastrace.serve import start_intake

    server = start_intake(bad_store, http_port=0, grpc_port=None)
    base = f"http://127.0.0.1:{server.http_port}"
    try:
        for path in (
            "/api/runs",
            "/api/runs/latest/spans",
            "/runs/latest/view",
            "/runs/latest/report",
            "/api/diff?a=latest&b=latest",
        ):
            with urllib.request.urlopen(base + path, timeout=600) as reply:
                body = reply.read()
                assert reply.status == 200 and reply.headers["X-Mastrace-Skipped-Rows"] == "2", path
            if path == "/api/runs":
                (run,) = json.loads(body)
                assert (run["name"], run["spans"]) == ("coordination.session", 3)
            if path.endswith("/spans"):
                assert len(json.loads(body)["spans"]) == 3
    finally:
        server.stop()
