"""Pending spans: the local store records the start of each span still open at a flush, readers
merge it with the span's end, a killed writer's open spans read as unfinished, and none of it
changes what the `records` view answers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from live_agents import live_run, wait_for
from mastrace.analysis import SpanRow, TraceStore, open_runs, open_spans
from mastrace.pipeline._pipeline import Destination, Pipeline
from mastrace.store import LocalStoreExporter, query
from mastrace.store.reader import StoreHealth, pending_files
from seed_run import SEED_QUERIES, write_store


def _pipeline(store: Path) -> tuple[Pipeline, TracerProvider]:
    """The store behind mastrace's own pipeline (its export thread), on a provider of its own."""
    pipeline = Pipeline([Destination("local", LocalStoreExporter(store), interval=0.1)])
    provider = TracerProvider(resource=Resource.create({"service.name": "pending"}))
    provider.add_span_processor(pipeline)
    return pipeline, provider


def _open(store: Path, trace_id: str | None = None) -> list[SpanRow]:
    with TraceStore(store) as traces:
        return open_spans(traces, trace_id)


def test_an_open_span_is_read_by_name_and_attributes_then_merged_with_its_end(tmp_path: Path) -> None:
    """A span open past a flush reads as running, by name and attributes; once it ends it is one span."""
    store = tmp_path / "store"
    pipeline, provider = _pipeline(store)
    tracer = provider.get_tracer("t")
    span = tracer.start_span("agent.agent_b.round_2", attributes={"massgen.agent_id": "agent_b", "round": 2})
    trace_id = f"{span.get_span_context().trace_id:032x}"
    found = wait_for(lambda: _open(store, trace_id), "the open span's start record")
    (row,) = found  # type: ignore[misc]
    assert (row.name, row.state, row.attributes["massgen.agent_id"]) == (
        "agent.agent_b.round_2",
        "running",
        "agent_b",
    )
    assert query("SELECT count(*) AS n FROM records", store) == [{"n": 0}]  # the view reads no start record
    span.end()
    assert pipeline.flush(60).complete
    assert _open(store, trace_id) == []
    rows = query("SELECT span_name, count(*) AS n FROM records GROUP BY 1", store)
    assert rows == [{"span_name": "agent.agent_b.round_2", "n": 1}]
    provider.shutdown()


def test_each_open_span_is_recorded_once(tmp_path: Path) -> None:
    """Flush after flush, an open span's start record is written once."""
    store = tmp_path / "store"
    pipeline, provider = _pipeline(store)
    span = provider.get_tracer("t").start_span("long")
    wait_for(lambda: _open(store), "the start record")
    for _ in range(5):  # five more flushes while it stays open
        assert pipeline.flush(60).complete
        time.sleep(0.15)
    (pending,) = pending_files(store)
    assert len(pending.path.read_bytes().splitlines()) == 1
    span.end()
    provider.shutdown()


def test_a_clean_shutdown_with_every_span_ended_leaves_no_pending_file(tmp_path: Path) -> None:
    """A writer whose pending spans all ended deletes its pending file at shutdown."""
    store = tmp_path / "store"
    _, provider = _pipeline(store)
    span = provider.get_tracer("t").start_span("long")
    wait_for(lambda: pending_files(store), "a pending file")
    span.end()
    provider.shutdown()
    assert pending_files(store) == []


def test_a_killed_run_shows_its_open_spans_as_unfinished(tmp_path: Path) -> None:
    """SIGKILL with three rounds open: they and the session read as unfinished, by name."""
    store = tmp_path / "store"
    with live_run(store, tmp_path / "run") as run:
        names = {
            "coordination.session",
            "agent.agent_a.round_0",
            "agent.agent_b.round_0",
            "agent.agent_c.round_0",
        }
        wait_for(lambda: {s.name for s in _open(store, run.trace_id)} == names, "every open span")
        assert {s.state for s in _open(store, run.trace_id)} == {"running"}
        run.kill()
    opened = _open(store, run.trace_id)
    assert {s.name for s in opened} == names and {s.state for s in opened} == {"unfinished"}
    with TraceStore(store) as traces:
        (summary,) = open_runs(traces).values()
        assert (summary.state, summary.open, summary.root.name) == ("unfinished", 4, "coordination.session")  # type: ignore[union-attr]


def test_start_records_change_no_answer_of_the_guides_queries(tmp_path: Path) -> None:
    """With open spans in the store (in a new trace and in the seed's trace), every query of the
    guide answers what it answered before, and the runs' totals are the same."""
    seed = write_store(tmp_path / "store")

    def answers() -> dict[str, list[str]]:  # rows in any order: some queries have no ORDER BY
        return {name: sorted(map(repr, seed.run(sql))) for name, sql in SEED_QUERIES.items()}

    before = answers()
    with TraceStore(seed.path) as traces:
        runs_before = traces.runs()
    writer = LocalStoreExporter(seed.path)
    tracer = TracerProvider().get_tracer("open")
    in_seed = trace.SpanContext(
        int(seed.trace_id, 16), 0x1234, is_remote=True, trace_flags=trace.TraceFlags(1)
    )
    spans = [
        tracer.start_span(
            "agent.agent_z.round_9", context=trace.set_span_in_context(trace.NonRecordingSpan(in_seed))
        ),
        tracer.start_span("coordination.session"),
    ]
    assert writer.export_pending(spans) == 2  # type: ignore[arg-type]
    assert len(_open(seed.path)) == 2
    assert answers() == before
    with TraceStore(seed.path) as traces:
        assert traces.runs() == runs_before


FORKED = """
import os, sys, time
from opentelemetry.sdk.trace import TracerProvider
from mastrace.store import LocalStoreExporter

store, release = sys.argv[1], sys.argv[2]
writer = LocalStoreExporter(store)
span = TracerProvider().get_tracer("t").start_span("left.open")
assert writer.export_pending([span]) == 1
if os.fork() == 0:  # the child outlives its parent's writer
    open(release + ".started", "w").close()  # past the fork hooks
    while not os.path.exists(release):
        time.sleep(0.02)
    os._exit(0)
while not os.path.exists(release + ".started"):  # however late the child is scheduled
    time.sleep(0.02)
writer.shutdown()  # the span is still open: its start record stays, no longer held by this writer
print("ready", flush=True)
os.wait()
"""


def test_a_forked_child_does_not_keep_its_parents_open_spans_running(tmp_path: Path) -> None:
    """Once the writer that recorded a span's start is gone, the span is unfinished, even while a
    child forked from that process still runs."""
    import subprocess
    import sys

    store, release = tmp_path / "store", tmp_path / "release"
    proc = subprocess.Popen(
        [sys.executable, "-c", FORKED, str(store), str(release)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        (pending,) = pending_files(store)
        assert not pending.running
        assert [s.state for s in _open(store)] == ["unfinished"]
    finally:
        release.touch()
        proc.wait(timeout=120)


def test_prune_lets_go_of_the_start_records_of_writers_gone(tmp_path: Path) -> None:
    """A run killed long ago does not stay "unfinished" after `prune`: a gone writer's pending file older
    than the retention is removed; a running writer's never is, however old."""
    import os

    from mastrace.store._retention import Retention, prune

    store = tmp_path / "store"
    tracer = TracerProvider().get_tracer("t")
    gone, running = LocalStoreExporter(store), LocalStoreExporter(store)
    assert gone.export_pending([tracer.start_span("left.open")]) == 1
    assert running.export_pending([tracer.start_span("still.open")]) == 1
    gone.shutdown()  # its span never ended: the start record stays, held by no one
    old = time.time() - 3 * 86400
    for pending in pending_files(store):
        os.utime(pending.path, (old, old))
    assert sorted(p.running for p in pending_files(store)) == [False, True]
    kept = prune(store, Retention(older_than=86400), dry_run=True)
    assert kept.pending_removed == 1 and len(pending_files(store)) == 2  # a dry run removes nothing
    result = prune(store, Retention(older_than=86400))
    assert result.pending_removed == 1
    assert [p.running for p in pending_files(store)] == [True]
    assert [s.name for s in _open(store)] == ["still.open"]
    running.shutdown()


def test_a_tree_with_open_spans_reads_them_without_reading_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`render_trace` draws a trace from its skeleton files: its open spans (one start record whose span
    ended since, one still open) are told apart on the skeleton too, with no statement over `records`."""
    import re

    from mastrace.analysis import render_trace

    seed = write_store(tmp_path / "store")
    writer = LocalStoreExporter(seed.path)
    tracer = TracerProvider().get_tracer("open")
    in_seed = trace.set_span_in_context(
        trace.NonRecordingSpan(
            trace.SpanContext(int(seed.trace_id, 16), 0x1234, is_remote=True, trace_flags=trace.TraceFlags(1))
        )
    )
    spans = [tracer.start_span(f"agent.agent_z.round_{i}", context=in_seed) for i in range(2)]
    assert writer.export_pending(spans) == 2  # type: ignore[arg-type]
    spans[1].end()
    assert writer.export([spans[1]]).name == "SUCCESS"  # type: ignore[list-item]
    reads = re.compile(r"\b(?:FROM|JOIN)\s+records\b", re.IGNORECASE)
    statements: list[str] = []
    for name in ("table", "execute", "relation"):
        original = getattr(TraceStore, name)

        def counted(self: TraceStore, sql: str, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            statements.append(sql)
            return _original(self, sql, *args, **kwargs)

        monkeypatch.setattr(TraceStore, name, counted)
    checked = []
    monkeypatch.setattr(
        "mastrace.analysis._store.check_store", lambda *a, **k: checked.append(1) or StoreHealth(0, 0)
    )
    try:
        with TraceStore(seed.path) as traces:
            text = render_trace(traces, seed.trace_id, max_spans=None)
    finally:
        writer.shutdown()
    assert "agent.agent_z.round_0  … running" in text
    assert "agent.agent_z.round_1" in text and "agent.agent_z.round_1  … running" not in text
    assert [sql for sql in statements if reads.search(sql)] == [] and checked == []
