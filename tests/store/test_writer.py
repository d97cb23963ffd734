"""LocalStoreExporter: per-process segment files, whole-line appends, rotation and failure handling."""

from __future__ import annotations

import json
import os
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mastrace.exceptions import StoreError
from mastrace.store import LocalStoreExporter, query
from mastrace.store.reader import root_files, roots_complete, segment_files

from .conftest import break_writes

SEGMENT_NAME = re.compile(r"^(?P<host>[\w.]+)-(?P<pid>\d+)-(?P<ns>\d+)-(?P<seq>\d+)\.ndjson$")


@pytest.fixture
def spans() -> Iterator[list[ReadableSpan]]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    for i in range(20):
        with tracer.start_as_current_span(f"span-{i}", attributes={"i": i, "text": "x" * 50}):
            pass
    yield list(memory.get_finished_spans())
    provider.shutdown()


@pytest.fixture
def tree() -> Iterator[list[ReadableSpan]]:
    """Two traces: a root with two children, and a root alone."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("root-1"):
        for name in ("child-a", "child-b"):
            with tracer.start_as_current_span(name):
                pass
    with tracer.start_as_current_span("root-2"):
        pass
    yield list(memory.get_finished_spans())
    provider.shutdown()


def lines_of(path: Path) -> list[str]:
    return path.read_text("utf-8").splitlines(keepends=True)


def test_export_appends_one_line_per_span(tmp_path: Path, spans: list[ReadableSpan]) -> None:
    """A successful export leaves one complete JSON line per span in the current segment."""
    exporter = LocalStoreExporter(tmp_path)
    assert exporter.export(spans[:5]) is SpanExportResult.SUCCESS
    assert exporter.export(spans[5:]) is SpanExportResult.SUCCESS
    assert exporter.segment is not None
    lines = lines_of(exporter.segment)
    assert [json.loads(line)["span_name"] for line in lines] == [s.name for s in spans]
    assert all(line.endswith("\n") for line in lines)
    assert exporter.exported_spans == 20 and exporter.failed_spans == 0


def test_segment_is_named_after_host_pid_time_and_sequence(tmp_path: Path) -> None:
    """Segments live in `segments/` and are named <hostname>-<pid>-<unix_ns>-<seq>.ndjson."""
    exporter = LocalStoreExporter(tmp_path)
    assert exporter.segment is not None and exporter.segment.parent == tmp_path / "segments"
    match = SEGMENT_NAME.match(exporter.segment.name)
    assert match is not None
    assert int(match["pid"]) == os.getpid() and match["seq"] == "1"
    assert match["host"] == re.sub(r"[^\w.]", "_", socket.gethostname())


def test_the_segment_exists_before_the_first_export(tmp_path: Path) -> None:
    """Creating the exporter creates its (empty) segment, so readers can open the store at once."""
    exporter = LocalStoreExporter(tmp_path / "new" / "store")
    assert segment_files(tmp_path / "new" / "store") == [exporter.segment]
    assert query("SELECT count(*) AS n FROM records", tmp_path / "new" / "store") == [{"n": 0}]


def test_warm_up_encodes_and_writes_nothing(tmp_path: Path, tree: list[ReadableSpan]) -> None:
    """`warm_up` runs the encoder over the spans (filling its caches) and leaves every file of the store as
    it was and every count at zero; the next export writes its spans, and only those."""
    exporter = LocalStoreExporter(tmp_path)
    before = {p: p.stat().st_size for p in tmp_path.rglob("*") if p.is_file()}
    exporter.warm_up(tree)
    assert {p: p.stat().st_size for p in tmp_path.rglob("*") if p.is_file()} == before
    assert (exporter.exported_spans, exporter.failed_spans, exporter.truncated_spans) == (0, 0, 0)
    assert exporter._encoder._resources  # what the first export would have built, built
    assert exporter.export(tree[:1]) is SpanExportResult.SUCCESS
    assert query("SELECT span_name FROM records", tmp_path) == [{"span_name": tree[0].name}]


def test_segments_rotate_past_the_size_limit(tmp_path: Path, spans: list[ReadableSpan]) -> None:
    """A segment larger than max_segment_bytes is closed and the next export starts a new one."""
    exporter = LocalStoreExporter(tmp_path, max_segment_bytes=1)
    for span in spans[:4]:
        exporter.export([span])
    files = segment_files(tmp_path)
    assert len(files) == 4
    assert sorted(SEGMENT_NAME.match(f.name)["seq"] for f in files) == ["1", "2", "3", "4"]  # type: ignore[index]
    assert query("SELECT count(*) AS n FROM records", tmp_path) == [{"n": 4}]


def test_two_exporters_in_one_process_write_separate_segments(
    tmp_path: Path, spans: list[ReadableSpan]
) -> None:
    """Two exporters on one store never share a file, and the store shows both."""
    first, second = LocalStoreExporter(tmp_path), LocalStoreExporter(tmp_path)
    first.export(spans[:3])
    second.export(spans[3:5])
    assert first.segment != second.segment
    assert query("SELECT count(*) AS n FROM records", tmp_path) == [{"n": 5}]


def test_concurrent_exports_from_threads_keep_lines_whole(tmp_path: Path, spans: list[ReadableSpan]) -> None:
    """Exports from several threads at once interleave whole batches, never partial lines."""
    exporter = LocalStoreExporter(tmp_path)

    def work() -> None:
        for _ in range(50):
            exporter.export(spans)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert exporter.segment is not None
    lines = lines_of(exporter.segment)
    assert len(lines) == 4 * 50 * len(spans)
    assert all(json.loads(line)["span_name"].startswith("span-") for line in lines)


def test_export_after_shutdown_fails_without_raising(tmp_path: Path, spans: list[ReadableSpan]) -> None:
    """After shutdown, export returns FAILURE and force_flush reports False."""
    exporter = LocalStoreExporter(tmp_path)
    assert exporter.force_flush() is True
    exporter.shutdown()
    assert exporter.export(spans) is SpanExportResult.FAILURE
    assert exporter.force_flush() is False


def test_a_write_failure_returns_failure_and_counts_the_spans(
    tmp_path: Path, spans: list[ReadableSpan], caplog: pytest.LogCaptureFixture
) -> None:
    """When the next segment cannot be created, export returns FAILURE, counts the spans and warns once."""
    exporter = LocalStoreExporter(tmp_path, max_segment_bytes=1)
    exporter.export(spans[:1])
    segments = tmp_path / "segments"
    for path in segments.iterdir():
        path.unlink()
    segments.rmdir()
    segments.write_text("not a folder")
    with caplog.at_level("WARNING", logger="mastrace"):
        assert exporter.export(spans[1:3]) is SpanExportResult.FAILURE
        assert exporter.export(spans[3:4]) is SpanExportResult.FAILURE
    assert exporter.failed_spans == 3
    assert len([r for r in caplog.records if "local store" in r.getMessage()]) == 1


def test_an_unusable_store_path_raises_store_error(tmp_path: Path) -> None:
    """A store path that is a file is reported at construction as StoreError."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StoreError, match="cannot write the local store"):
        LocalStoreExporter(blocker)


def test_it_works_as_the_exporter_of_a_tracer_provider(tmp_path: Path) -> None:
    """Spans ended under a provider with this exporter are queryable right away."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(tmp_path)))
    with provider.get_tracer("t").start_as_current_span("coordination.session"):
        pass
    provider.shutdown()
    assert query("SELECT span_name FROM records", tmp_path) == [{"span_name": "coordination.session"}]


def test_a_malformed_span_fails_the_export_but_the_rest_is_written(
    tmp_path: Path, spans: list[ReadableSpan]
) -> None:
    """A span that cannot be encoded is counted as failed; the batch's other spans are still stored."""
    exporter = LocalStoreExporter(tmp_path)
    result = exporter.export([ReadableSpan(name="broken", context=None), *spans[:3]])
    assert result is SpanExportResult.FAILURE
    assert (exporter.exported_spans, exporter.failed_spans) == (3, 1)
    assert query("SELECT count(*) AS n FROM records", tmp_path) == [{"n": 3}]


def test_root_spans_are_also_written_to_the_roots_file(tmp_path: Path, tree: list[ReadableSpan]) -> None:
    """The lines of root spans go to roots/<segment name> too, identical to their segment lines."""
    exporter = LocalStoreExporter(tmp_path)
    assert exporter.export(tree) is SpanExportResult.SUCCESS
    assert exporter.segment is not None and exporter.roots == tmp_path / "roots" / exporter.segment.name
    roots = lines_of(exporter.roots)
    assert [json.loads(line)["span_name"] for line in roots] == ["root-1", "root-2"]
    assert roots == [line for line in lines_of(exporter.segment) if '"parent_span_id"' not in line]


def test_the_roots_file_exists_before_the_first_export(tmp_path: Path) -> None:
    """A new segment's roots file is created with it, empty, so a reader never misses it."""
    exporter = LocalStoreExporter(tmp_path)
    assert root_files(tmp_path) == [exporter.roots]
    assert exporter.roots is not None and exporter.roots.read_bytes() == b""
    assert roots_complete(tmp_path)


def test_roots_files_rotate_with_their_segments(tmp_path: Path, spans: list[ReadableSpan]) -> None:
    """Every segment started by rotation gets its own roots file of the same name."""
    exporter = LocalStoreExporter(tmp_path, max_segment_bytes=1)
    for span in spans[:3]:
        exporter.export([span])
    assert [f.name for f in root_files(tmp_path)] == [f.name for f in segment_files(tmp_path)]
    assert [len(lines_of(f)) for f in root_files(tmp_path)] == [1, 1, 1]


def test_a_failed_roots_write_gives_up_the_roots_file_and_keeps_the_spans(
    tmp_path: Path, tree: list[ReadableSpan], caplog: pytest.LogCaptureFixture
) -> None:
    """When the roots file cannot be written, the spans still count as stored and the file is deleted."""
    exporter = LocalStoreExporter(tmp_path)
    assert exporter.roots is not None and exporter._roots_fd is not None
    given_up = exporter.roots
    break_writes(exporter._roots_fd)
    with caplog.at_level("WARNING", logger="mastrace"):
        assert exporter.export(tree) is SpanExportResult.SUCCESS
        assert exporter.export(tree) is SpanExportResult.SUCCESS
    assert (exporter.exported_spans, exporter.failed_spans) == (8, 0)
    assert not given_up.exists() and not roots_complete(tmp_path)
    assert sum(map(len, map(lines_of, segment_files(tmp_path)))) == 8  # the tree twice
    assert query("SELECT count(*) AS n FROM records", tmp_path) == [{"n": 4}]  # each span shown once
    assert len([r for r in caplog.records if "roots file" in r.getMessage()]) == 1
    assert exporter.roots is not None and len(lines_of(exporter.roots)) == 2  # the next segment's


def test_an_unusable_roots_folder_does_not_stop_the_writer(tmp_path: Path, spans: list[ReadableSpan]) -> None:
    """If the roots folder cannot be created, spans are still stored and readers are told to scan."""
    (tmp_path / "roots").write_text("not a folder")
    exporter = LocalStoreExporter(tmp_path)
    assert exporter.export(spans[:2]) is SpanExportResult.SUCCESS
    assert exporter.roots is None and not roots_complete(tmp_path)
    assert query("SELECT count(*) AS n FROM records", tmp_path) == [{"n": 2}]


def test_a_failed_segment_write_also_gives_up_its_roots_file(
    tmp_path: Path, tree: list[ReadableSpan]
) -> None:
    """After a failed segment write its roots file is deleted, since it may lack roots that landed."""
    exporter = LocalStoreExporter(tmp_path)
    assert exporter.roots is not None and exporter._fd is not None
    roots = exporter.roots
    break_writes(exporter._fd)
    assert exporter.export(tree) is SpanExportResult.FAILURE
    assert exporter.failed_spans == 4 and not roots.exists()
    assert not roots_complete(tmp_path)
