"""Compaction: closed segments become one Parquet file that every reader reads as `records`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from mastrace.analysis._store import TraceStore
from mastrace.store import LocalStoreExporter, connect, query
from mastrace.store._compact import PeriodicCompaction, compact
from mastrace.store._manifest import COMPACT_DIR, list_store, store_lock
from mastrace.store._retention import Retention, prune
from mastrace.store.reader import compacted_files, roots_complete, segment_files

SPANS_PER_TRACE = 4


def write_process(store: Path, traces: int, tag: str) -> set[tuple[str, str]]:
    """Write `traces` traces as one short process would (its own segment); return their ids."""
    exporter = LocalStoreExporter(store)
    provider = TracerProvider(resource=Resource.create({"service.name": f"svc-{tag}"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test.compact")
    ids: set[tuple[str, str]] = set()
    for t in range(traces):
        with tracer.start_as_current_span("coordination.session", attributes={"run": f"{tag}-{t}"}) as root:
            ids.add((f"{root.get_span_context().trace_id:032x}", f"{root.get_span_context().span_id:016x}"))
            for i in range(SPANS_PER_TRACE - 1):
                with tracer.start_as_current_span(f"agent.a{i}.round_0", attributes={"i": i}) as span:
                    context = span.get_span_context()
                    ids.add((f"{context.trace_id:032x}", f"{context.span_id:016x}"))
    provider.shutdown()
    return ids


def raw_ids(store: Path) -> list[tuple[str, str]]:
    """Every stored copy of every span, as the store's files hold them (no copy folded away). A file
    compacted away after the listing fails the read: listed again, as the store's readers do."""
    for attempt in (1, 2):
        con = connect(store, check=False)
        try:
            rows = con.execute("SELECT trace_id, span_id FROM records").fetchall()
            return [(str(t), str(s)) for t, s in rows]
        except duckdb.IOException:
            if attempt == 2:
                raise
        finally:
            con.close()
    raise AssertionError("unreachable")


def assert_exactly_once(store: Path, expected: set[tuple[str, str]]) -> None:
    found = raw_ids(store)
    assert len(found) == len(set(found)), "a span is read twice"
    assert set(found) == expected, f"{len(expected - set(found))} span(s) missing"


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, set[tuple[str, str]]]:
    path = tmp_path / "store"
    ids: set[tuple[str, str]] = set()
    for n in range(6):
        ids |= write_process(path, 2, str(n))
    return path, ids


def test_compaction_replaces_closed_segments_with_one_parquet_file(store: tuple[Path, set]) -> None:
    """Six closed segments become one Parquet file; records, roots and every span are unchanged."""
    path, ids = store
    before = query("SELECT * FROM records ORDER BY trace_id, span_id", path)
    roots_before = query("SELECT span_id FROM roots ORDER BY span_id", path)
    assert len(segment_files(path)) == 6
    result = compact(path, min_age=0)
    assert result.spans == len(ids) == 6 * 2 * SPANS_PER_TRACE
    assert len(result.compacted) == 6
    assert segment_files(path) == [] and list((path / "segments").iterdir()) == []
    assert list((path / "roots").iterdir()) == [] and list((path / "skeleton").iterdir()) == []
    assert compacted_files(path) == [result.written]
    assert query("SELECT * FROM records ORDER BY trace_id, span_id", path) == before
    assert query("SELECT span_id FROM roots ORDER BY span_id", path) == roots_before
    assert roots_complete(path)
    assert_exactly_once(path, ids)


def test_compacted_file_is_sorted_by_trace_and_zstd(store: tuple[Path, set]) -> None:
    """The Parquet file is ZSTD-compressed and its rows are in trace order (what zone maps skip by)."""
    path, _ = store
    written = compact(path, min_age=0).written
    con = connect(path)
    try:
        codecs = {
            c
            for (c,) in con.execute(
                "SELECT DISTINCT compression FROM parquet_metadata(?)", [str(written)]
            ).fetchall()
        }
        order = [t for (t,) in con.execute("SELECT trace_id FROM read_parquet(?)", [str(written)]).fetchall()]
    finally:
        con.close()
    assert codecs == {"ZSTD"}
    assert order == sorted(order)


def test_open_and_recent_segments_are_left_alone(tmp_path: Path) -> None:
    """A segment a running writer holds, or one written within min_age, is not compacted."""
    path = tmp_path / "store"
    ids = write_process(path, 1, "closed")
    live = LocalStoreExporter(path)  # holds its (empty) segment
    try:
        result = compact(path, min_age=0)
        assert result.skipped_open == 1 and len(result.compacted) == 1
        assert segment_files(path) == [live.segment]
        assert compact(path, min_age=3600).written is None  # nothing old enough
    finally:
        live.shutdown()
    assert_exactly_once(path, ids)


def test_second_compaction_merges_small_files(store: tuple[Path, set], tmp_path: Path) -> None:
    """Newer segments and the earlier compacted file are merged into one file."""
    path, ids = store
    first = compact(path, min_age=0).written
    ids |= write_process(path, 3, "later")
    result = compact(path, min_age=0)
    assert result.merged == 1 and len(result.compacted) == 1
    assert first is not None and not first.exists()
    assert compacted_files(path) == [result.written]
    assert len(list((path / COMPACT_DIR).glob("*.json"))) == 1
    assert_exactly_once(path, ids)


def test_unpushed_segments_are_not_compacted(store: tuple[Path, set]) -> None:
    """A segment a push destination has not taken whole stays NDJSON (push reads segments)."""
    path, _ = store
    names = sorted(p.name for p in segment_files(path))
    (path / "pushed").mkdir()
    sizes = {n: (path / "segments" / n).stat().st_size for n in names}
    offsets = {n: sizes[n] for n in names[:4]} | {names[4]: sizes[names[4]] - 1}
    (path / "pushed" / "dest.json").write_text(json.dumps({"offsets": offsets}))
    result = compact(path, min_age=0)
    assert result.skipped_unpushed == 2 and len(result.compacted) == 4


def test_prune_removes_compacted_files_by_age(store: tuple[Path, set]) -> None:
    """Retention removes a compacted file as a whole, as old as the newest segment it replaced."""
    path, _ = store
    written = compact(path, min_age=0).written
    assert written is not None
    kept = prune(path, Retention(older_than=3600))
    assert kept.removed == [] and written.exists()
    result = prune(path, Retention(older_than=1), now=time.time() + 7200)
    assert result.removed == [written] and not written.exists()
    assert query("SELECT count(*) AS n FROM records", path) == [{"n": 0}]


def test_a_reader_opened_before_compaction_sees_every_span_once(store: tuple[Path, set]) -> None:
    """A TraceStore whose views were made before a compaction reads the compacted file after it."""
    path, ids = store
    with TraceStore(path) as reader:
        runs_before = reader.runs()
        compact(path, min_age=0)
        assert reader.runs() == runs_before
        rows = reader.rows("SELECT count(*) AS n, count(DISTINCT span_id) AS d FROM records")
        assert rows == [{"n": len(ids), "d": len(ids)}]
        tree = reader.spans(reader.resolve("latest"))
        assert len(tree) == SPANS_PER_TRACE


def test_readers_and_writers_during_repeated_compactions(tmp_path: Path) -> None:
    """While processes write and compactions run over and over, every read counts each span once."""
    path = tmp_path / "store"
    ids = write_process(path, 2, "seed")
    done = threading.Event()
    errors: list[BaseException] = []
    compactions = 0

    def compact_loop() -> None:
        nonlocal compactions
        try:
            while not done.is_set():
                compact(path, min_age=0)
                compactions += 1
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=compact_loop)
    thread.start()
    try:
        for n in range(8):
            ids |= write_process(path, 1, f"w{n}")
            for _ in range(3):
                found = raw_ids(path)
                assert len(found) == len(set(found)), "a span read twice"
                assert set(found) == ids
    finally:
        done.set()
        thread.join()
    assert not errors and compactions > 0
    compact(path, min_age=0)
    assert_exactly_once(path, ids)


_CHILD = """
import os, signal, sys
from mastrace.store._compact import compact

target = sys.argv[2]

def step(name):
    print(name, flush=True)
    if name == target:
        os.kill(os.getpid(), signal.SIGKILL)

compact(sys.argv[1], min_age=0, grace=0, step=step)
"""


def _steps(template: Path, tmp: Path) -> list[str]:
    """The steps a compaction of `template` goes through (recorded on a copy)."""
    copy = tmp / "record"
    shutil.copytree(template, copy)
    seen: list[str] = []
    compact(copy, min_age=0, step=seen.append)
    return seen


def test_kill_loop_never_loses_or_duplicates_a_span(tmp_path: Path) -> None:
    """SIGKILL at every step of a compaction (and while it writes): each span stays readable exactly
    once, and the next compaction clears what the killed one left."""
    template = tmp_path / "template"
    ids: set[tuple[str, str]] = set()
    for n in range(2):
        ids |= write_process(template, 1, f"old{n}")
    compact(template, min_age=0)  # a compacted file for the next compaction to merge
    for n in range(4):
        ids |= write_process(template, 1, f"new{n}")
    steps = _steps(template, tmp_path)
    assert {"copy", "written", "renamed", "committed", "merged:0"} <= set(steps)
    assert sum(s.startswith("deleted:") for s in steps) == 4
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    # each step, and "while writing": killed as soon as the child says it started the copy
    targets = [*steps, "during-copy"]
    killed = 0
    for index, target in enumerate(targets):
        path = tmp_path / f"kill{index}"
        shutil.copytree(template, path)
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(path), target], stdout=subprocess.PIPE, env=env, text=True
        )
        assert child.stdout is not None
        if target == "during-copy":
            for line in child.stdout:
                if line.strip() == "copy":
                    child.send_signal(signal.SIGKILL)
                    break
        child.communicate(timeout=120)
        if child.returncode == -signal.SIGKILL:
            killed += 1
        assert_exactly_once(path, ids)
        with TraceStore(path) as reader:
            assert len(reader.runs()) == 6
        compact(path, min_age=0)
        assert_exactly_once(path, ids)
        listing = list_store(path)
        assert listing.stale == [] and len(listing.manifests) == 1
        leftovers = [p.name for p in (path / COMPACT_DIR).iterdir() if p.name.endswith(".tmp")]
        assert leftovers == []
        assert len(list((path / COMPACT_DIR).glob("*.parquet"))) == 1
    assert killed >= len(steps)


def test_periodic_compaction_runs_on_its_own_thread(store: tuple[Path, set]) -> None:
    """`serve`'s compactor compacts closed segments in the background, and stops when asked."""
    path, ids = store
    compactor = PeriodicCompaction(path, 0.05, min_age=0).start()
    try:
        deadline = time.monotonic() + 120
        while not compacted_files(path) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        compactor.stop(timeout=120)
    assert compactor.runs >= 1 and len(compacted_files(path)) == 1
    assert segment_files(path) == []
    assert_exactly_once(path, ids)


def test_a_busy_store_is_not_waited_for(store: tuple[Path, set]) -> None:
    """A compaction that does not wait returns `busy` while another holds the store's lock."""
    path, _ = store
    with store_lock(path):
        assert compact(path, min_age=0, wait=False).busy
    assert compact(path, min_age=0, wait=False).written is not None


def _as_json(value: object) -> object:
    """A value as the Query API's JSON answer spells it."""
    from datetime import datetime
    from decimal import Decimal

    if isinstance(value, datetime):
        return value.isoformat(timespec="microseconds") + "Z"
    return float(value) if isinstance(value, Decimal) else value


def test_query_api_answers_the_guides_queries_the_same_on_a_compacted_store(tmp_path: Path) -> None:
    """`serve`'s Logfire-compatible Query API, read by logfire's own client, answers each of the
    guide's 16 queries with the same rows on a compacted store as on its NDJSON original."""
    from datetime import datetime, timezone

    from logfire.query_client import LogfireQueryClient

    from mastrace.serve import start_intake
    from seed_run import SEED_QUERIES, write_store

    original = write_store(tmp_path / "seed")
    packed = tmp_path / "packed"
    shutil.copytree(original.path, packed)
    assert compact(packed, min_age=0, grace=0).written is not None
    server = start_intake(packed, http_port=0, grpc_port=None)
    since = datetime(2000, 1, 1, tzinfo=timezone.utc)
    try:
        with LogfireQueryClient("token", base_url=f"http://127.0.0.1:{server.http_port}") as client:
            for name, sql in SEED_QUERIES.items():
                text = original.sql(sql)
                want = query(text, original.path)
                assert want and sorted(query(text, packed), key=repr) == sorted(want, key=repr), name
                answer = client.query_json_rows(text, min_timestamp=since)
                assert [c["name"] for c in answer["columns"]] == list(want[0]), name
                expected = [{k: _as_json(v) for k, v in row.items()} for row in want]
                assert sorted(answer["rows"], key=repr) == sorted(expected, key=repr), name
    finally:
        server.stop()
