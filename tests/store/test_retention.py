"""Retention (`mastrace prune`, `retention=`) and a store folder removed under a running writer."""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

import mastrace
from mastrace.store import LocalStoreExporter, query
from mastrace.store._retention import Retention, parse_retention, prune
from mastrace.store.reader import root_files, segment_files

DAY = 86400.0


def spans(n: int, base: int = 1) -> list[ReadableSpan]:
    flags = TraceFlags(TraceFlags.SAMPLED)
    return [
        ReadableSpan(
            name=f"s{i}",
            context=SpanContext(base, base + i, False, flags),
            resource=Resource({}),
            attributes={"pad": "p" * 500},
            start_time=1_700_000_000_000_000_000,
            end_time=1_700_000_000_000_000_001,
        )
        for i in range(n)
    ]


def aged(store: Path, count: int, age_days: list[float]) -> list[Path]:
    """`count` spans in each of several segments, each segment last written `age_days` ago."""
    exporter = LocalStoreExporter(store, max_segment_bytes=1)
    now = time.time()
    written = []
    for n, days in enumerate(age_days):
        exporter.export(spans(count, base=1000 * (n + 1)))
        segment = exporter.segment
        assert segment is not None
        os.utime(segment, (now - days * DAY, now - days * DAY))
        written.append(segment)
    exporter.shutdown()
    return written


def test_prune_removes_segments_older_than_the_age_with_their_side_files(tmp_path: Path) -> None:
    """Segments last written more than 7 days ago go, with their roots and skeleton files."""
    old, middle, new = aged(tmp_path, 3, [10, 8, 1])
    result = prune(tmp_path, parse_retention("7d"))
    assert result.removed == [old, middle] and result.kept == 1
    assert segment_files(tmp_path) == [new] and [f.name for f in root_files(tmp_path)] == [new.name]
    assert sorted(p.stem for p in (tmp_path / "skeleton").iterdir()) == [new.stem]
    assert query("SELECT count(*) AS n FROM records", tmp_path) == [{"n": 3}]


def test_prune_keeps_the_store_under_a_size_oldest_first(tmp_path: Path) -> None:
    """With a size, the oldest segments go until the store fits; the newest stay."""
    written = aged(tmp_path, 5, [4, 3, 2, 1])
    one = sum(f.stat().st_size for f in tmp_path.rglob("*") if f.is_file() and written[0].stem in f.name)
    result = prune(tmp_path, Retention(max_bytes=2 * one + 10))
    assert result.removed == written[:2] and segment_files(tmp_path) == written[2:]


def test_a_segment_written_in_the_last_minute_is_never_removed(tmp_path: Path) -> None:
    """A writer may still append to a recent segment: neither age nor size removes it."""
    (recent,) = aged(tmp_path, 2, [0])
    result = prune(tmp_path, Retention(older_than=0, max_bytes=0))
    assert result.removed == [] and result.active == 1 and segment_files(tmp_path) == [recent]


def test_push_records_forget_removed_segments(tmp_path: Path) -> None:
    """What `mastrace push` remembered of a removed segment is dropped from its record."""
    old, new = aged(tmp_path, 1, [9, 1])
    (tmp_path / "pushed").mkdir()
    record = tmp_path / "pushed" / "x.json"
    record.write_text(
        f'{{"destination": "d", "offsets": {{"{old.name}": 10, "{new.name}": 20}}, "span_ids": []}}'
    )
    prune(tmp_path, parse_retention("7d"))
    assert f'"{new.name}": 20' in record.read_text() and old.name not in record.read_text()


def test_the_prune_command(tmp_path: Path) -> None:
    """`mastrace prune --older-than 7d` says what it removed and keeps the rest; a dry run removes nothing."""
    from mastrace.cli import main

    aged(tmp_path, 2, [30, 0.5])
    out: list[str] = []

    class Out:
        def write(self, text: str) -> None:
            out.append(text)

        def flush(self) -> None:
            pass

    assert main(["prune", "--older-than", "7d", "--dry-run", "--store", str(tmp_path)], stdout=Out()) == 0  # type: ignore[arg-type]
    assert "would remove 1 segment(s)" in out[-1] and len(segment_files(tmp_path)) == 2
    assert main(["prune", "--older-than", "7d", "--store", str(tmp_path)], stdout=Out()) == 0  # type: ignore[arg-type]
    assert "removed 1 segment(s)" in out[-1] and len(segment_files(tmp_path)) == 1
    assert main(["prune", "--store", str(tmp_path)]) == 2  # nothing said about what to keep
    assert main(["prune", "--older-than", "soon", "--store", str(tmp_path)]) == 2


def test_the_retention_setting_is_applied_when_the_writer_starts_a_segment(tmp_path: Path) -> None:
    """`retention="7d"`: on each rotation the writer removes what is older, never its own segment."""
    aged(tmp_path, 1, [30, 20])
    exporter = LocalStoreExporter(tmp_path, max_segment_bytes=1, retention=parse_retention("7d"))
    exporter.export(spans(1, base=77))
    assert len(segment_files(tmp_path)) == 3  # no rotation yet
    exporter.export(spans(1, base=88))  # the first segment is full: a new one starts, the old go
    exporter.shutdown()
    assert len(segment_files(tmp_path)) == 2
    assert query("SELECT count(*) AS n FROM records", tmp_path) == [{"n": 2}]


@pytest.mark.parametrize("how", ["removed", "replaced"])
def test_a_store_folder_removed_under_a_running_process_is_noticed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    """After `rm -rf` (or a new folder in its place), the next batch lands in a new segment there, with
    one warning: the counts `force_flush()` gives are the spans a reader finds."""
    store = tmp_path / "store"
    mastrace.configure(local=store, synchronous=True)
    tracer = mastrace.get_tracer()
    for i in range(100):
        with tracer.span(f"before-{i}"):
            pass
    shutil.rmtree(store)
    if how == "replaced":
        store.mkdir()
    with caplog.at_level(logging.WARNING, logger="mastrace"):
        for i in range(500):
            with tracer.span(f"after-{i}"):
                pass
    result = mastrace.force_flush()
    mastrace.shutdown()
    assert (result.exported, result.failed) == (600, 0)
    assert query("SELECT count(*) AS n FROM records", store) == [{"n": 500}]
    assert len([r for r in caplog.records if "was removed or replaced" in r.getMessage()]) == 1


def test_a_segment_a_running_writer_holds_is_never_removed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A writer idle for an hour (a worker waiting on a model) keeps its segment through another
    writer's retention and `prune`: the spans of the run still going are not removed, and its next
    spans land beside them without a warning."""
    idle = LocalStoreExporter(tmp_path)
    idle.export(spans(3, base=5000))
    held = idle.segment
    assert held is not None
    hour_ago = time.time() - 3600
    os.utime(held, (hour_ago, hour_ago))
    busy = LocalStoreExporter(tmp_path, max_segment_bytes=1, retention=parse_retention("1KB"))
    for n in range(3):
        busy.export(spans(2, base=7000 + 100 * n))
    result = prune(tmp_path, Retention(older_than=60.0, max_bytes=1))
    busy.shutdown()
    assert held.exists() and held not in result.removed and result.active >= 1
    with caplog.at_level(logging.WARNING, logger="mastrace"):
        idle.export(spans(2, base=9000))
    idle.shutdown()
    assert not [r for r in caplog.records if "removed or replaced" in r.getMessage()]
    found = query("SELECT trace_id, count(*) AS n FROM records GROUP BY 1 ORDER BY 1", tmp_path)
    assert [(r["trace_id"], r["n"]) for r in found if r["trace_id"] in (f"{5000:032x}", f"{9000:032x}")] == [
        (f"{5000:032x}", 3),
        (f"{9000:032x}", 2),
    ]
