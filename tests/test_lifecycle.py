"""Process lifecycle: forked children keep exporting, and reconfiguring never loses spans."""

from __future__ import annotations

import contextvars
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import mastrace
from mastrace.store import query


def _child(i: int) -> None:
    with mastrace.get_tracer().span(f"child-{i}"):
        pass


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_forked_children_export_their_spans_under_the_parent(tmp_path: Path) -> None:
    """Spans made in fork-started multiprocessing children reach the store, with their pid and parent."""
    mastrace.configure(local=tmp_path)
    ctx = multiprocessing.get_context("fork")
    with mastrace.get_tracer().span("parent") as parent:
        procs = [ctx.Process(target=_child, args=(i,)) for i in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(30)
    assert all(p.exitcode == 0 for p in procs)
    mastrace.force_flush()
    rows = query("SELECT span_name, parent_span_id, process_pid FROM records ORDER BY span_name", tmp_path)
    assert [r["span_name"] for r in rows] == ["child-0", "child-1", "parent"]
    parent_id = f"{parent.span_context.span_id:016x}"
    children = rows[:2]
    assert all(r["parent_span_id"] == parent_id for r in children)
    assert {r["process_pid"] for r in children} == {p.pid for p in procs}


class _SlowExporter(SpanExporter):
    """Collects spans, taking its time over each batch."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        time.sleep(0.05)
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def test_reconfigure_while_spans_end_loses_none() -> None:
    """Every span ended while configure() swaps destinations reaches the old or the new one."""
    first, second = _SlowExporter(), _SlowExporter()
    mastrace.configure(local=False, exporters=[first], flush_interval=0.05)
    stop = threading.Event()
    created = 0

    def produce() -> None:
        nonlocal created
        tracer = mastrace.get_tracer()
        while not stop.is_set():
            with tracer.span("work"):
                created += 1
            time.sleep(0.0005)

    worker = threading.Thread(target=produce)
    worker.start()
    time.sleep(0.2)
    mastrace.configure(local=False, exporters=[second], flush_interval=0.05)
    time.sleep(0.2)
    stop.set()
    worker.join()
    result = mastrace.shutdown(timeout=10)
    assert result.dropped == 0 and result.failed == 0
    assert len(first.spans) + len(second.spans) == created
    assert first.spans and second.spans


def test_a_span_open_across_a_reconfigure_is_marked_interrupted_at_exit() -> None:
    """The new pipeline takes over the spans the old one saw start."""
    exporter = _SlowExporter()
    mastrace.configure(local=False, exporters=[_SlowExporter()])
    span = mastrace.get_tracer().start_span("long-running")
    mastrace.configure(local=False, exporters=[exporter])
    mastrace.shutdown(timeout=5, interrupted=True)
    assert span.is_recording() is False
    ended = [s for s in exporter.spans if s.name == "long-running"]
    assert len(ended) == 1 and (ended[0].attributes or {}).get("mastrace.interrupted") is True


def test_spans_open_at_exit_end_innermost_first() -> None:
    """A span still open inside another ends no later than it (a round inside its session)."""
    exporter = _SlowExporter()
    mastrace.configure(local=False, exporters=[exporter])
    tracer = mastrace.get_tracer()

    def left_open() -> None:  # in a context of its own: the spans it leaves current stay there
        outer, inner = tracer.span("outer"), tracer.span("inner")
        outer.__enter__()
        inner.__enter__()
        mastrace.shutdown(timeout=5, interrupted=True)

    contextvars.copy_context().run(left_open)
    ended = {s.name: s for s in exporter.spans}
    assert (
        ended["inner"].parent is not None and ended["inner"].parent.span_id == ended["outer"].context.span_id
    )
    assert ended["inner"].end_time is not None and ended["outer"].end_time is not None
    assert ended["inner"].end_time <= ended["outer"].end_time


if sys.platform == "win32":  # pragma: no cover
    pytestmark = pytest.mark.skip("POSIX process semantics")
