"""Many writer processes at once, readers during writes, and writers killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mastrace.store import connect, query
from mastrace.store.reader import root_files, roots_complete, segment_files, store_health

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")

# A writer process: `count` spans through the SDK's BatchSpanProcessor into the store.
BATCH_WRITER = """
import os, sys
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from mastrace.store import LocalStoreExporter

store, count, worker = sys.argv[1], int(sys.argv[2]), sys.argv[3]
provider = TracerProvider(resource=Resource.create({"process.pid": os.getpid()}))
exporter = LocalStoreExporter(store)
provider.add_span_processor(
    BatchSpanProcessor(
        exporter, max_queue_size=max(count, 512), max_export_batch_size=512, schedule_delay_millis=20
    )
)
tracer = provider.get_tracer("concurrency")
for i in range(count):
    with tracer.start_as_current_span("work", attributes={"worker": worker, "i": i}):
        pass
provider.shutdown()
sys.exit(0 if exporter.exported_spans == count and exporter.failed_spans == 0 else 1)
"""

# A writer process: `count` traces of a root and two children, through the BatchSpanProcessor.
TREE_WRITER = """
import sys
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from mastrace.store import LocalStoreExporter

store, count, worker = sys.argv[1], int(sys.argv[2]), sys.argv[3]
provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(LocalStoreExporter(store), schedule_delay_millis=10))
tracer = provider.get_tracer("concurrency")
for i in range(count):
    with tracer.start_as_current_span(f"{worker}-root-{i}"):
        for child in ("a", "b"):
            with tracer.start_as_current_span(child):
                pass
provider.shutdown()
"""

# A writer that exports batches forever, reporting the running total after each export returns.
ENDLESS_WRITER = """
import sys
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from mastrace.store import LocalStoreExporter

memory = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(memory))
tracer = provider.get_tracer("killed")
for i in range(int(sys.argv[2])):
    with tracer.start_as_current_span("batch-span", attributes={"i": i, "padding": "p" * 200}):
        pass
spans = memory.get_finished_spans()
exporter = LocalStoreExporter(sys.argv[1])
total = 0
while True:
    exporter.export(spans)
    total += len(spans)
    print(total, flush=True)
"""

# A writer that flushes some spans, then leaves half a line behind, as a kill mid-write would.
TORN_WRITER = """
import sys, time
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from mastrace.store import LocalStoreExporter

exporter = LocalStoreExporter(sys.argv[1])
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
tracer = provider.get_tracer("torn")
for i in range(int(sys.argv[2])):
    with tracer.start_as_current_span("flushed", attributes={"i": i}):
        pass
print(exporter.exported_spans, flush=True)
line = exporter.segment.read_bytes().splitlines(keepends=True)[-1]
with open(exporter.segment, "ab") as segment:
    segment.write(line[: len(line) // 2])
print("torn", flush=True)
time.sleep(60)
"""


def spawn(script: str, *args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def count(store: Path) -> int:
    return int(query("SELECT count(*) AS n FROM records", store)[0]["n"])


def copies(store: Path) -> int:
    """Every stored copy of every span: `records` shows a span written twice once, and counts the rest."""
    with connect(store) as con:
        (shown,) = con.execute("SELECT count(*) FROM records").fetchone() or (0,)
        return int(shown) + store_health(con, store).duplicates


@pytest.mark.slow
def test_four_processes_write_one_store_while_a_reader_queries(tmp_path: Path) -> None:
    """4 processes x 25,000 spans give exactly 100,000 distinct rows; queries during the writes never fail."""
    writers = [spawn(BATCH_WRITER, tmp_path, 25_000, f"w{n}") for n in range(4)]
    seen = []
    give_up = time.monotonic() + 300  # a safety net against a hung writer, not a performance bound
    try:
        while any(w.poll() is None for w in writers) and time.monotonic() < give_up:
            seen.append(count(tmp_path))  # raises (and fails the test) if a read ever fails
    finally:
        outputs = [w.communicate(timeout=600) for w in writers]
    assert [w.returncode for w in writers] == [0, 0, 0, 0], [err for _, err in outputs]
    assert seen == sorted(seen), "a later read saw fewer rows than an earlier one"
    (row,) = query(
        "SELECT count(*) AS n, count(DISTINCT span_id) AS spans, "
        "count(DISTINCT (attributes->>'worker') || ':' || (attributes->>'i')) AS keys, "
        "count(DISTINCT process_pid) AS pids FROM records",
        tmp_path,
    )
    assert row == {"n": 100_000, "spans": 100_000, "keys": 100_000, "pids": 4}


@pytest.mark.slow
def test_a_killed_writer_loses_nothing_it_reported_flushed(tmp_path: Path) -> None:
    """After SIGKILL at an arbitrary point, every span the writer had exported is readable (it exports
    the same spans again and again: `records` shows each once and counts the copies)."""
    batch = 2_000
    writer = spawn(ENDLESS_WRITER, tmp_path, batch)
    assert writer.stdout is not None
    reported = 0
    try:
        while reported < 5 * batch:
            line = writer.stdout.readline()
            assert line, writer.stderr.read() if writer.stderr else "writer exited"
            reported = int(line)
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        rest, _ = writer.communicate(timeout=30)
    reported = max([reported, *map(int, rest.split())])
    assert writer.returncode == -signal.SIGKILL
    # Any batch started after the last report may be on disk in full, in part, or not at all.
    assert reported <= copies(tmp_path) <= reported + batch
    assert count(tmp_path) == batch


def test_a_torn_line_left_by_a_killed_writer_is_skipped(tmp_path: Path) -> None:
    """A half-written last line is skipped: exactly the flushed spans are read; later writers still work."""
    writer = spawn(TORN_WRITER, tmp_path, 300)
    assert writer.stdout is not None
    try:
        flushed = int(writer.stdout.readline())
        assert writer.stdout.readline().strip() == "torn"
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.communicate(timeout=30)
    assert flushed == 300
    assert count(tmp_path) == 300
    follower = spawn(BATCH_WRITER, tmp_path, 10, "after")
    _, err = follower.communicate(timeout=600)
    assert follower.returncode == 0, err
    assert count(tmp_path) == 310


def test_concurrent_writers_each_keep_the_roots_of_their_own_segments(tmp_path: Path) -> None:
    """3 processes writing at once leave one roots file per segment and `roots` lists every root once."""
    writers = [spawn(TREE_WRITER, tmp_path, 200, f"w{n}") for n in range(3)]
    outputs = [w.communicate(timeout=600) for w in writers]
    assert [w.returncode for w in writers] == [0, 0, 0], [err for _, err in outputs]
    assert [f.name for f in root_files(tmp_path)] == [f.name for f in segment_files(tmp_path)]
    assert roots_complete(tmp_path)
    in_roots = query("SELECT span_id, span_name FROM roots ORDER BY span_id", tmp_path)
    in_records = query(
        "SELECT span_id, span_name FROM records WHERE parent_span_id IS NULL ORDER BY span_id", tmp_path
    )
    assert len(in_roots) == 600 and in_roots == in_records
