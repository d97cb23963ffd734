"""Skeleton files: written beside each segment, read by `tree` and `view`, and never trusted blindly.

A skeleton line says where a span's line starts in its segment, with the span's ids, times and
error flag. These tests check what the writer puts there, and that the reader gives the same trace
as the segments alone whatever happened to the files: a writer killed between its two writes, a
torn line in either file, an offset that points elsewhere, a segment that has no skeleton.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, Status, StatusCode

from mastrace.analysis import TraceStore, render_trace
from mastrace.analysis._prefix import read_prefix
from mastrace.analysis._store import SpanRow, span_from_line
from mastrace.analysis._tree import render_tree
from mastrace.store import LocalStoreExporter, query
from mastrace.store._schema import SKELETON_DIR, SKELETON_FIELDS
from mastrace.store.reader import skeleton_files

from .conftest import break_writes


@pytest.fixture
def spans() -> Iterator[list[ReadableSpan]]:
    """A trace with every kind of field a line can have: errors, events, links, Logfire's columns,
    non-ASCII and odd text, resource attributes."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "skel", "service.version": "1"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.skeleton", "0.1")
    with tracer.start_as_current_span("coordination.session", attributes={"massgen.task": 'é 🚀 "q"'}):
        for i in range(6):
            with tracer.start_as_current_span(f"agent.a{i}.round_0", attributes={"massgen.round": i}) as span:
                span.add_event("note", {"k": "v"})
                with tracer.start_as_current_span(
                    "mcp.search.tool",
                    attributes={"logfire.msg": f"call {i}", "logfire.tags": ("t",), "n": 1.5},
                    links=[Link(span.get_span_context())],
                ):
                    pass
                if i % 3 == 0:
                    try:
                        with tracer.start_as_current_span("llm.openai.stream"):
                            raise TimeoutError("slow\nline")
                    except TimeoutError:
                        pass
                with tracer.start_as_current_span("log", attributes={"logfire.level_num": 17}) as log:
                    log.set_status(Status(StatusCode.OK))
    yield list(memory.get_finished_spans())
    provider.shutdown()


def _store(path: Path, spans: list[ReadableSpan], batch: int = 5) -> LocalStoreExporter:
    exporter = LocalStoreExporter(path)
    for i in range(0, len(spans), batch):
        assert exporter.export(spans[i : i + batch]) is SpanExportResult.SUCCESS
    return exporter


def _skeleton_rows(path: Path) -> list[dict[str, str]]:
    rows = []
    for line in path.read_text("ascii").splitlines():
        rows.append(dict(zip(SKELETON_FIELDS, line.split(","), strict=True)))
    return rows


def _trees(path: Path, limits: tuple[int | None, ...] = (None, 1, 3, 10)) -> list[str]:
    with TraceStore(path) as store:
        tid = store.resolve("latest")
        return [render_trace(store, tid, max_spans=limit) for limit in limits]


def _truth(path: Path, limits: tuple[int | None, ...] = (None, 1, 3, 10)) -> list[str]:
    """What the trees are when read from the segments alone."""
    with TraceStore(path) as store:
        tid = store.resolve("latest")
        everything = store.spans(tid)
        return [render_tree(everything, max_spans=limit) for limit in limits]


def _check_offsets(segment: Path, skeleton: Path) -> list[dict[str, str]]:
    """Assert that every skeleton line describes the span line that starts where it says."""
    data = segment.read_bytes()
    rows = _skeleton_rows(skeleton)
    assert len(rows) == data.count(b"\n")
    for row in rows:
        start = int(row["base"]) + int(row["rel"])
        line = json.loads(data[start : data.index(b"\n", start)])
        assert row["trace_id"] == line["trace_id"]
        assert int(row["span_id"]) == int(line["span_id"], 16)
        assert row["parent"] == (str(int(line["parent_span_id"], 16)) if "parent_span_id" in line else "")
        assert (int(row["start_ns"]), int(row["end_ns"])) == (line["start_ns"], line["end_ns"])
    return rows


def test_each_skeleton_line_points_at_its_spans_line(tmp_path: Path, spans: list[ReadableSpan]) -> None:
    exporter = _store(tmp_path, spans)
    assert exporter.segment is not None and exporter.skeleton is not None
    assert exporter.skeleton == tmp_path / SKELETON_DIR / (exporter.segment.stem + ".csv")
    rows = _check_offsets(exporter.segment, exporter.skeleton)
    assert len(rows) == len(spans)
    # the error flag is the `is_error` of the span as `records` reads it
    with TraceStore(tmp_path) as store:
        errors = {s.span_id for s in store.spans(store.resolve("latest")) if s.is_error}
    assert len(errors) >= 4  # exceptions and an error level with an OK status
    assert {f"{int(r['span_id']):016x}" for r in rows if r["err"] == "1"} == errors


def test_offsets_count_bytes_not_characters(tmp_path: Path) -> None:
    """Lines with multi-byte characters and lone surrogates (written as '?') keep later offsets exact."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("root"):
        for text in ("ascii", "日本語 ✓", "lone \ud800 surrogate", "emoji 🚀🚀", "end"):
            with tracer.start_as_current_span(text, attributes={"text": text * 3}):
                pass
    exporter = _store(tmp_path, list(memory.get_finished_spans()), batch=6)  # one batch
    assert exporter.segment is not None and exporter.skeleton is not None
    _check_offsets(exporter.segment, exporter.skeleton)
    assert _trees(tmp_path) == _truth(tmp_path)
    with TraceStore(tmp_path) as store:
        shown = read_prefix(store, store.resolve("latest"), None).shown
    assert [n.span.name for n in shown][1:3] == ["ascii", "日本語 ✓"]


def test_the_shown_spans_are_read_as_records_reads_them(tmp_path: Path, spans: list[ReadableSpan]) -> None:
    """Spans read at their offsets (parsed in Python) equal the spans DuckDB reads through `records`."""
    _store(tmp_path, spans)
    with TraceStore(tmp_path) as store:
        tid = store.resolve("latest")
        expected = {s.span_id: s for s in store.spans(tid)}
        read_by_duckdb = []
        spans_of = store.spans
        store.spans = lambda *a, **k: read_by_duckdb.append(k) or spans_of(*a, **k)  # type: ignore[method-assign]
        shown = {n.span.span_id: n.span for n in read_prefix(store, tid, None).shown}
    assert shown == expected
    assert read_by_duckdb == []  # every line was read at its offset
    kinds = {s.name: s for s in shown.values()}
    assert kinds["mcp.search.tool"].links and kinds["mcp.search.tool"].message == "call 5"
    assert kinds["llm.openai.stream"].is_exception and kinds["llm.openai.stream"].exception_stacktrace
    assert kinds["log"].level == 17 and kinds["coordination.session"].resource["service.name"] == "skel"


@pytest.mark.parametrize(
    "line",
    [
        '{"trace_id":"' + "a" * 32 + '","span_id":"' + "b" * 16 + '","start_ns":1,"end_ns":2,"level":"17"}',
        '{"trace_id":"'
        + "a" * 32
        + '","span_id":"'
        + "b" * 16
        + '","start_ns":1,"end_ns":2,"is_exception":1}',
        '{"trace_id":"' + "a" * 32 + '","span_id":"' + "b" * 16 + '","start_ns":1.5,"end_ns":2}',
        '{"trace_id":"' + "a" * 32 + '","span_id":"' + "b" * 16 + '","start_ns":1,"end_ns":2,"tags":[1]}',
        '{"trace_id":"' + "a" * 32 + '","span_id":"b","start_ns":1,"end_ns":2}',
        '{"trace_id":"' + "a" * 32 + '","span_id":"' + "b" * 16 + '","start_ns":1}',
        '{"trace_id":"' + "a" * 32 + '","span_id":"' + "b" * 16 + '","start_ns":1,"end_ns":2',
        "[1, 2]",
    ],
)
def test_lines_the_writer_never_writes_are_left_to_duckdb(line: str) -> None:
    assert span_from_line(line) is None


def test_a_plain_line_reads_with_the_records_defaults() -> None:
    line = '{"trace_id":"' + "a" * 32 + '","span_id":"' + "b" * 16 + '","start_ns":1000,"end_ns":3000}'
    row = span_from_line(line)
    assert row == SpanRow("a" * 32, "b" * 16, None, "", 1, 3, 2e-06)


def test_spans_whose_lines_have_not_landed_are_left_out(tmp_path: Path, spans: list[ReadableSpan]) -> None:
    """A writer killed between its skeleton write and its segment write (or a reader arriving between
    them) leaves skeleton lines past the end of the segment: the reader ignores them."""
    exporter = _store(tmp_path, spans)
    expected = _truth(tmp_path)
    assert exporter.skeleton is not None and exporter.segment is not None
    size = exporter.segment.stat().st_size
    ghost = "0,{base},{tid},12345,{parent},1,2,0\n".format(
        base=size, tid=_skeleton_rows(exporter.skeleton)[0]["trace_id"], parent=""
    )
    with open(exporter.skeleton, "a", encoding="ascii") as file:
        file.write(ghost)
    assert _trees(tmp_path) == expected


def test_a_torn_last_segment_line_is_left_out(tmp_path: Path, spans: list[ReadableSpan]) -> None:
    """The last span line cut short (a writer killed mid-write): its skeleton line is dropped, as
    `records` drops the line."""
    exporter = _store(tmp_path, spans)
    assert exporter.segment is not None
    exporter.shutdown()
    data = exporter.segment.read_bytes()
    exporter.segment.write_bytes(data[:-40])
    with TraceStore(tmp_path) as store:
        tid = store.resolve("latest")
        assert len(store.spans(tid)) == len(spans) - 1
        prefix = read_prefix(store, tid, None)
    assert prefix.total == len(spans) - 1
    assert _trees(tmp_path) == _truth(tmp_path)


@pytest.mark.parametrize("cut", [1, 2, 3, 10, 25, 40])
def test_a_torn_skeleton_line_is_skipped(tmp_path: Path, spans: list[ReadableSpan], cut: int) -> None:
    """A skeleton line cut anywhere never gives a wrong span: without its newline it is still whole;
    cut further, the skeleton no longer describes the segment's last line, whose JSON is then read:
    every span is there, as the segments say."""
    exporter = _store(tmp_path, spans)
    assert exporter.skeleton is not None
    exporter.shutdown()
    text = exporter.skeleton.read_text("ascii")
    exporter.skeleton.write_text(text[:-cut], "ascii")
    with TraceStore(tmp_path) as store:
        tid = store.resolve("latest")
        everything = {s.span_id: s for s in store.spans(tid)}
        prefix = read_prefix(store, tid, None)
    assert prefix.total == len(spans)
    # every span shown is exactly the stored one
    assert all(node.span == everything[node.span.span_id] for node in prefix.shown)


def test_an_offset_that_points_elsewhere_falls_back_to_duckdb(
    tmp_path: Path, spans: list[ReadableSpan]
) -> None:
    """Skeleton lines that do not match their segment (edited, or from another file) are checked
    before use: the spans are read through `records` instead, and still come out right."""
    exporter = _store(tmp_path, spans)
    assert exporter.skeleton is not None
    exporter.shutdown()
    rows = [r.split(",") for r in exporter.skeleton.read_text("ascii").splitlines()]
    # each line's offset is its neighbour's (or 3: inside a line), as if another file's skeleton
    offsets = [r[:2] for r in rows]
    shifted = [[*offsets[(i + 1) % len(rows)], *r[2:]] for i, r in enumerate(rows)]
    shifted[0][:2] = ["0", "3"]
    exporter.skeleton.write_text("".join(",".join(r) + "\n" for r in shifted), "ascii")
    with TraceStore(tmp_path) as store:
        tid = store.resolve("latest")
        expected = {s.span_id: s for s in store.spans(tid)}
        shown = {n.span.span_id: n.span for n in read_prefix(store, tid, None).shown}
    assert shown == expected


@pytest.mark.parametrize("drop", ["all", "some"])
def test_segments_without_a_skeleton_are_read_from_their_json(
    tmp_path: Path, spans: list[ReadableSpan], drop: str
) -> None:
    """A store written before skeleton files existed, or one segment that lost its skeleton."""
    exporter = LocalStoreExporter(tmp_path, max_segment_bytes=2_000)
    for i in range(0, len(spans), 3):
        exporter.export(spans[i : i + 3])
    exporter.shutdown()
    expected = _truth(tmp_path)
    skeletons = sorted((tmp_path / SKELETON_DIR).iterdir())
    assert len(skeletons) > 3
    for path in skeletons if drop == "all" else skeletons[::2]:
        path.unlink()
    paired, alone = skeleton_files(tmp_path)
    assert len(alone) == (len(skeletons) if drop == "all" else (len(skeletons) + 1) // 2)
    assert len(paired) + len(alone) == len(skeletons)
    assert _trees(tmp_path) == expected


def test_a_failed_skeleton_write_gives_up_the_file_and_keeps_the_spans(
    tmp_path: Path, spans: list[ReadableSpan], caplog: pytest.LogCaptureFixture
) -> None:
    """When the skeleton file cannot be written the spans still count as stored, the file is deleted
    (readers then parse that segment), and the next segment gets a skeleton of its own."""
    exporter = LocalStoreExporter(tmp_path)
    assert exporter.skeleton is not None and exporter._skeleton_fd is not None
    given_up = exporter.skeleton
    break_writes(exporter._skeleton_fd)
    with caplog.at_level("WARNING", logger="mastrace"):
        assert exporter.export(spans[:7]) is SpanExportResult.SUCCESS
        assert exporter.export(spans[7:]) is SpanExportResult.SUCCESS
    assert (exporter.exported_spans, exporter.failed_spans) == (len(spans), 0)
    assert not given_up.exists()
    assert exporter.skeleton is not None and len(_skeleton_rows(exporter.skeleton)) == len(spans) - 7
    assert len([r for r in caplog.records if "skeleton file" in r.getMessage()]) == 1
    exporter.shutdown()
    assert query("SELECT count(*) AS n FROM records", tmp_path) == [{"n": len(spans)}]
    assert _trees(tmp_path) == _truth(tmp_path)


def test_a_failed_segment_write_keeps_a_skeleton_the_reader_can_trust(
    tmp_path: Path, spans: list[ReadableSpan]
) -> None:
    """The disk fills up in the middle of a batch: the skeleton lines of the lines that did not
    land whole are dropped by the reader, so the tree holds exactly what `records` holds."""
    exporter = LocalStoreExporter(tmp_path)
    assert exporter.export(spans[:6]) is SpanExportResult.SUCCESS
    assert exporter.segment is not None and exporter._fd is not None
    segment, fd = exporter.segment, exporter._fd
    real_write = os.write
    calls = []

    def short_write(target: int, data: bytes | memoryview) -> int:
        if target == fd:
            calls.append(len(data))
            if len(calls) == 1:
                return real_write(target, bytes(data)[: len(data) // 2])  # half a batch, then a torn line
            raise OSError(28, "No space left on device")
        return real_write(target, data)

    os.write = short_write  # type: ignore[assignment]
    try:
        assert exporter.export(spans[6:]) is SpanExportResult.FAILURE
    finally:
        os.write = real_write  # type: ignore[assignment]
    exporter.shutdown()
    assert not segment.read_bytes().endswith(b"\n")
    stored = query("SELECT count(*) AS n FROM records", tmp_path)[0]["n"]
    assert stored == exporter.exported_spans < len(spans)
    with TraceStore(tmp_path) as store:
        tid = store.resolve("latest")
        assert read_prefix(store, tid, None).total == stored
    assert _trees(tmp_path) == _truth(tmp_path)


def test_a_line_longer_than_a_read_chunk(tmp_path: Path) -> None:
    """Lines are read at their offset in chunks until their newline, however long they are."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(tmp_path)))
    tracer = provider.get_tracer("t")
    with (
        tracer.start_as_current_span("root", attributes={"big": "x" * 300_000}),
        tracer.start_as_current_span("child", attributes={"big": "y" * 70_000}),
    ):
        pass
    provider.shutdown()
    with TraceStore(tmp_path) as store:
        shown = read_prefix(store, store.resolve("latest"), None).shown
    assert [len(n.span.attributes["big"]) for n in shown] == [300_000, 70_000]
    # the last line is whole even when the segment's end is searched back over several chunks
    (tmp_path / "segments").joinpath("x.ndjson").write_bytes(b"z" * 200_000)
    paired, alone = skeleton_files(tmp_path)
    assert [p.name for p in alone] == ["x.ndjson"] and len(paired) == 1


def test_a_sandboxed_store_reads_its_skeleton(tmp_path: Path, spans: list[ReadableSpan]) -> None:
    """`TraceStore(sandbox=True)` (SQL that may not read other files) still reads skeleton files."""
    _store(tmp_path, spans).shutdown()
    with TraceStore(tmp_path, sandbox=True) as store:
        tid = store.resolve("latest")
        assert render_trace(store, tid) == render_tree(store.spans(tid))


def test_the_tree_of_a_copied_store_is_read_from_its_own_files(
    tmp_path: Path, spans: list[ReadableSpan]
) -> None:
    """Skeleton lines name no path: a store moved or copied elsewhere reads the same."""
    _store(tmp_path / "a", spans).shutdown()
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    shutil.rmtree(tmp_path / "a")
    assert _trees(tmp_path / "b") == _truth(tmp_path / "b")


def test_a_trace_id_shared_by_no_skeleton_line_is_not_found(
    tmp_path: Path, spans: list[ReadableSpan]
) -> None:
    from mastrace.exceptions import StoreError

    _store(tmp_path, spans).shutdown()
    with TraceStore(tmp_path) as store, pytest.raises(StoreError, match="no trace"):
        read_prefix(store, "f" * 32, 10)


def test_a_skeleton_file_that_cannot_be_read_falls_back_to_the_segments(
    tmp_path: Path, spans: list[ReadableSpan], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A skeleton file listed but gone when DuckDB reads it (or unreadable) costs speed, not the tree;
    a folder where a skeleton file should be is no skeleton."""
    from mastrace.analysis import _prefix

    exporter = LocalStoreExporter(tmp_path, max_segment_bytes=2_000)
    for i in range(0, len(spans), 3):
        exporter.export(spans[i : i + 3])
    exporter.shutdown()
    expected = _truth(tmp_path)
    first, second, *_ = sorted((tmp_path / SKELETON_DIR).iterdir())
    second.unlink()
    second.mkdir()
    assert len(skeleton_files(tmp_path)[1]) == 1
    listed = skeleton_files

    def listed_then_gone(paths: object) -> tuple[list[object], list[Path]]:
        paired, alone = listed(paths)  # type: ignore[arg-type]
        first.unlink()
        return list(paired), alone

    monkeypatch.setattr(_prefix, "skeleton_files", listed_then_gone)
    assert _trees(tmp_path, limits=(None,)) == expected[:1]


def test_a_line_appended_by_hand_is_drawn_too(tmp_path: Path, spans: list[ReadableSpan]) -> None:
    """A span line added to a segment by anyone but its writer has no skeleton line: the segment is
    then read from its JSON, and `tree` shows that span too."""
    exporter = _store(tmp_path, spans)
    exporter.shutdown()
    assert exporter.segment is not None
    last = json.loads(exporter.segment.read_text().splitlines()[-1])
    with exporter.segment.open("a") as f:
        f.write(json.dumps({**last, "span_id": "00000000000000aa", "span_name": "added by hand"}) + "\n")
    assert skeleton_files(tmp_path)[0] == []
    with TraceStore(tmp_path) as store:
        assert "added by hand" in render_trace(store, store.resolve("latest"), max_spans=None)
