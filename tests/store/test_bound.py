"""The writer's per-row byte bound: no span, however large, gives a line a reader cannot read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

import mastrace
from mastrace.analysis import TraceStore
from mastrace.analysis._store import span_from_line
from mastrace.exceptions import ConfigError
from mastrace.store import LocalStoreExporter, query
from mastrace.store._bound import DEFAULT_MAX_ROW_BYTES, bound_line
from mastrace.store.reader import segment_files

MARKER = "…[truncated "


def lines(store: Path) -> list[bytes]:
    return [line for f in segment_files(store) for line in f.read_bytes().splitlines(keepends=True)]


def finished(build: Any) -> list[ReadableSpan]:
    """The spans `build(tracer)` makes with the raw OpenTelemetry SDK (no mastrace transform)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    build(provider.get_tracer("bound"))
    provider.shutdown()
    return list(memory.get_finished_spans())


def test_the_issue_span_of_35_mb_is_written_under_the_bound_and_read(tmp_path: Path) -> None:
    """`items = ["z" * 50_000] * 700` (within the attribute caps) gives a line under 1 MB, cut visibly."""
    store = tmp_path / "store"
    mastrace.configure(local=store, synchronous=True)
    tracer = mastrace.get_tracer()
    with tracer.span("root"), tracer.span("huge", attributes={"items": ["z" * 50_000] * 700, "k": 1}):
        pass
    mastrace.shutdown()
    written = lines(store)
    assert max(map(len, written)) <= DEFAULT_MAX_ROW_BYTES
    huge = next(json.loads(line) for line in written if b'"huge"' in line)
    items = huge["attributes"]["items"]
    assert huge["attributes"]["mastrace.truncated"] is True and huge["attributes"]["k"] == 1
    assert all(item.startswith("zzz") and MARKER in item for item in items[:-1])  # every item kept, cut
    assert sum(map(len, items)) > 0.9 * DEFAULT_MAX_ROW_BYTES  # the room is used, not thrown away
    assert query("SELECT span_name FROM records ORDER BY span_name", store) == [
        {"span_name": "huge"},
        {"span_name": "root"},
    ]


def test_control_characters_cannot_push_a_line_past_the_bound(tmp_path: Path) -> None:
    """A string of control characters takes six bytes a character in JSON: the bound counts bytes."""
    spans = finished(lambda t: t.start_span("ctl", attributes={"x": ["\x01" * 60_000] * 100}).end())
    exporter = LocalStoreExporter(tmp_path, max_row_bytes=200_000)
    assert exporter.export_counted(spans) == 1 and exporter.truncated_spans == 1
    (line,) = lines(tmp_path)
    assert len(line) <= 200_000
    assert json.loads(line)["attributes"]["mastrace.truncated"] is True


def test_ids_times_status_and_kind_survive_the_cut(tmp_path: Path) -> None:
    """What makes a row a span is never cut: ids, parent, times, level, status and kind."""

    def build(tracer: Any) -> None:
        with tracer.start_as_current_span("parent"):
            span = tracer.start_span("big", attributes={"a": "y" * 300_000})
            span.set_status(Status(StatusCode.ERROR, "e" * 200_000))
            span.add_event("boom", {"payload": "p" * 300_000})
            span.end()

    spans = finished(build)
    exporter = LocalStoreExporter(tmp_path, max_row_bytes=64_000)
    assert exporter.export_counted(spans) == 2
    big = next(json.loads(line) for line in lines(tmp_path) if b'"big"' in line)
    original = next(s for s in spans if s.name == "big")
    assert big["span_id"] == f"{original.context.span_id:016x}"
    assert big["parent_span_id"] == f"{original.parent.span_id:016x}"  # type: ignore[union-attr]
    assert (big["start_ns"], big["end_ns"]) == (original.start_time, original.end_time)
    assert (big["otel_status_code"], big["level"], big["otel_kind"]) == ("ERROR", 17, "internal")
    assert MARKER in big["otel_status_message"] and MARKER in big["attributes"]["a"]


def test_thousands_of_attributes_and_items_are_cut_to_the_bound(tmp_path: Path) -> None:
    """Numbers cannot be shortened: a list of numbers loses its last items instead."""
    attributes = {f"a{i}": list(range(4096)) for i in range(128)}
    spans = finished(lambda t: t.start_span("many", attributes=attributes).end())
    LocalStoreExporter(tmp_path).export(spans)
    (line,) = lines(tmp_path)
    row = json.loads(line)
    assert len(line) <= DEFAULT_MAX_ROW_BYTES
    kept = [row["attributes"][f"a{i}"] for i in range(128)]
    assert all(items == list(range(len(items))) for items in kept)  # a prefix of each, in order
    assert len(line) > 0.9 * DEFAULT_MAX_ROW_BYTES


@pytest.mark.parametrize("bound", [100, 4095, 9 * 1024 * 1024, 1.5, "1MB", True])
def test_a_bound_out_of_range_is_refused(tmp_path: Path, bound: Any) -> None:
    """The bound is a whole number of bytes from 4 KiB to 8 MiB (half of what readers take)."""
    with pytest.raises(ConfigError, match="max_row_bytes"):
        LocalStoreExporter(tmp_path, max_row_bytes=bound)


def test_configure_passes_the_bound_to_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`MASTRACE_MAX_ROW_BYTES` bounds what configure()'s local store writes."""
    monkeypatch.setenv("MASTRACE_MAX_ROW_BYTES", "8192")
    mastrace.configure(local=tmp_path, synchronous=True)
    with mastrace.get_tracer().span("s", attributes={"text": "t" * 60_000}):
        pass
    mastrace.shutdown()
    (line,) = lines(tmp_path)
    assert len(line) <= 8192 and MARKER in json.loads(line)["attributes"]["text"]


def test_a_line_that_is_not_a_row_is_dropped_not_written() -> None:
    """`bound_line` only shrinks rows; anything else (it never comes from the row builder) gives nothing."""
    assert bound_line("[1, 2, 3]\n" * 10_000, 4096) == ""
    assert bound_line("not json " * 10_000, 4096) == ""


# -- any shape of attribute gives a line the reader reads ----------------------------------------
_text = st.text(st.characters(codec="utf-8") | st.sampled_from('\x00\x01\x1f"\\\u2028é😀'), max_size=3_000)
_scalar = st.none() | st.booleans() | st.integers() | st.floats() | _text
_json = st.recursive(
    _scalar,
    lambda children: st.lists(children, max_size=30) | st.dictionaries(_text, children, max_size=15),
    max_leaves=200,
)
_attribute = (
    _text
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=True)
    | st.lists(_text, max_size=200)
    | st.lists(st.integers(-(2**63), 2**63 - 1), max_size=2_000)
    | _json.map(lambda v: json.dumps(v, allow_nan=True))
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(
    attributes=st.dictionaries(st.text(min_size=1, max_size=300), _attribute, min_size=1, max_size=40),
    bound=st.sampled_from([4096, 10_000, 65_536]),
    events=st.lists(st.tuples(_text, st.dictionaries(_text, _text, max_size=5)), max_size=20),
)
def test_every_written_row_is_readable_whatever_its_attributes(
    tmp_path_factory: pytest.TempPathFactory, attributes: dict[str, Any], bound: int, events: list[Any]
) -> None:
    """Whatever attributes and events a span has, its line fits the bound and every reader reads it."""
    store = tmp_path_factory.mktemp("bound")
    schema = json.dumps({"type": "object", "properties": {k: {"type": "object"} for k in attributes}})

    def build(tracer: Any) -> None:
        span = tracer.start_span("shape", attributes={**attributes, "logfire.json_schema": schema})
        for name, attrs in events:
            span.add_event(name, attrs)
        span.end()

    spans = finished(build)
    exporter = LocalStoreExporter(store, max_row_bytes=bound)
    assert exporter.export_counted(spans) == 1
    (line,) = lines(store)
    assert len(line) <= bound
    assert span_from_line(line) is not None  # what tree and view read at a line's offset
    with TraceStore(store) as traces:
        assert traces.health().skipped == 0
        (row,) = traces.rows("SELECT span_id, CAST(attributes AS VARCHAR) AS a FROM records")
        assert row["span_id"] == f"{spans[0].context.span_id:016x}"
        decoded = json.loads(row["a"])
        if exporter.truncated_spans:
            assert decoded["mastrace.truncated"] is True
        else:
            assert set(attributes) <= set(decoded)  # nothing lost from a line that fitted
