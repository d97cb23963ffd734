"""`mastrace push` after a compaction: a destination first pushed to once segments were compacted
gets every span once, from the Parquet files; one that took the segments before gets none again."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import mastrace
from mastrace.cli._push import BATCH
from mastrace.store import compact, query
from mastrace.store._compact import CompactResult
from mastrace.store.reader import compacted_files, segment_files

from .conftest import Runner
from .test_push import Receiver, _emit, _stored


def _write(store: Path, runs: int, prefix: str) -> None:
    """`runs` processes' worth of spans: each configure() writes a segment of its own."""
    for i in range(runs):
        mastrace.configure(local=store, service_name="compacted")
        _emit(6 + i, f"{prefix}{i}")
        mastrace.shutdown()


def _compact(store: Path) -> CompactResult:
    result = compact(store, min_age=0, now=time.time() + 3600, grace=0)
    assert result.compacted and result.written is not None
    return result


def _fields(receiver: Receiver) -> dict[str, tuple[object, ...]]:
    """What a receiver got, per span id: trace, parent, name, times, attributes, events, links, status."""
    return {
        span.span_id.hex(): (
            span.trace_id.hex(),
            span.parent_span_id.hex(),
            span.name,
            span.start_time_unix_nano,
            span.end_time_unix_nano,
            sorted((a.key, str(a.value)) for a in span.attributes),
            [
                (e.name, e.time_unix_nano, sorted((a.key, str(a.value)) for a in e.attributes))
                for e in span.events
            ],
            [(lk.trace_id.hex(), lk.span_id.hex()) for lk in span.links],
            span.status.code,
        )
        for span in receiver.spans
    }


def test_a_new_destination_gets_the_compacted_spans_once(tmp_path: Path, mastrace_cli: Runner) -> None:
    store = tmp_path / "store"
    first, second = Receiver().start(), Receiver().start()
    try:
        _write(store, 3, "early")
        rows = _stored(store)
        assert mastrace_cli("push", "--to", first.url, store=store).returncode == 0
        _compact(store)
        assert segment_files(store) == [] and len(compacted_files(store)) == 1
        assert "origin" not in query("SELECT * FROM records LIMIT 1", store)[0]  # readers do not see it

        proc = mastrace_cli("push", "--to", second.url, store=store)
        assert proc.returncode == 0, proc.stderr
        assert f"sent {len(rows)} span(s)" in proc.stdout
        assert second.ids() == Counter(r["span_id"] for r in rows)
        assert _fields(second) == _fields(first)  # as first exported, from the Parquet file

        again = [mastrace_cli("push", "--to", r.url, store=store) for r in (first, second)]
        assert all(p.returncode == 0 and "sent 0 span(s)" in p.stdout for p in again), again
        assert f"{len(rows)} already sent before" in again[1].stdout
        assert len(first.spans) == len(second.spans) == len(rows)
    finally:
        first.stop()
        second.stop()


def test_merged_compactions_and_new_segments_reach_each_destination_once(
    tmp_path: Path, mastrace_cli: Runner
) -> None:
    """Compacted, more written, pushed to one destination, more written, compacted again (merging
    the first file): the old destination gets only the newest spans, a new one everything, each once."""
    store = tmp_path / "store"
    old, new = Receiver().start(), Receiver().start()
    try:
        _write(store, 2, "a")
        _compact(store)
        _write(store, 2, "b")
        assert mastrace_cli("push", "--to", old.url, store=store).returncode == 0
        _write(store, 1, "c")
        again = _compact(store)  # merges the first file with the "b" segments; "c" waits for `old`
        assert again.merged == 1 and again.skipped_unpushed == 1
        assert len(segment_files(store)) == 1 and len(compacted_files(store)) == 1
        total = query("SELECT count(*) AS n FROM records", store)[0]["n"]
        pushed_old = mastrace_cli("push", "--to", old.url, store=store)
        pushed_new = mastrace_cli("push", "--to", new.url, store=store)
        assert pushed_old.returncode == 0 and pushed_new.returncode == 0, (
            pushed_old.stderr,
            pushed_new.stderr,
        )
        assert len(new.spans) == total and max(new.ids().values()) == 1
        assert set(old.ids()) == set(new.ids()) and max(old.ids().values()) == 1
        assert "sent 6 span(s)" in pushed_old.stdout  # the "c" segment only
        names = Counter(s.name.split(".")[0] for s in new.spans if s.name != "coordination.session")
        assert set(names) == {"a0", "a1", "b0", "b1", "c0"}
    finally:
        old.stop()
        new.stop()


def test_a_push_of_one_trace_from_a_compacted_file_then_of_all(tmp_path: Path, mastrace_cli: Runner) -> None:
    store = tmp_path / "store"
    receiver = Receiver().start()
    try:
        _write(store, 2, "t")
        rows = _stored(store)
        _compact(store)
        trace = next(r["trace_id"] for r in rows if r["span_name"] == "t1.0")
        some = mastrace_cli("push", trace, "--to", receiver.url, store=store)
        assert some.returncode == 0 and "sent 7 span(s)" in some.stdout, some.stdout + some.stderr
        rest = mastrace_cli("push", "--to", receiver.url, store=store)
        assert rest.returncode == 0 and f"sent {len(rows) - 7} span(s)" in rest.stdout, rest.stdout
        assert len(receiver.spans) == len(rows) and max(receiver.ids().values()) == 1
    finally:
        receiver.stop()


class _FailsAfterOne(Receiver):
    """Takes the first request, then answers 503 to the rest (while `failing`)."""

    failing = True

    def take(self, request: ExportTraceServiceRequest) -> None:
        super().take(request)
        if self.failing:
            self.status = 503


def test_an_interrupted_push_from_a_compacted_file_resumes_where_it_stopped(
    tmp_path: Path, mastrace_cli: Runner
) -> None:
    store = tmp_path / "store"
    mastrace.configure(local=store, service_name="compacted")
    _emit(BATCH * 2 + 100, "big")
    mastrace.shutdown()
    rows = _stored(store)
    _compact(store)
    receiver = _FailsAfterOne().start()
    try:
        cut = mastrace_cli("push", "--to", receiver.url, store=store)
        assert cut.returncode == 2 and len(receiver.spans) == BATCH, cut.stderr
        receiver.failing, receiver.status = False, 200
        rest = mastrace_cli("push", "--to", receiver.url, store=store)
        assert rest.returncode == 0, rest.stderr
        assert f"sent {len(rows) - BATCH} span(s)" in rest.stdout and f"{BATCH} already sent" in rest.stdout
        assert receiver.ids() == Counter(r["span_id"] for r in rows)
    finally:
        receiver.stop()
