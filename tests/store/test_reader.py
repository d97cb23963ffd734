"""The `records` and `roots` views: Logfire's columns and types, live segments, torn lines, errors."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Tracer

from mastrace.exceptions import StoreError
from mastrace.store import (
    COLUMN_NAMES,
    LocalStoreExporter,
    connect,
    default_store_path,
    query,
)
from mastrace.store.reader import root_files, roots_complete, segment_files

EXPECTED_TYPES = {
    "start_timestamp": "TIMESTAMP",
    "end_timestamp": "TIMESTAMP",
    "duration": "DOUBLE",
    "created_at": "TIMESTAMP",
    "trace_id": "VARCHAR",
    "span_id": "VARCHAR",
    "parent_span_id": "VARCHAR",
    "kind": "VARCHAR",
    "level": "SMALLINT",
    "span_name": "VARCHAR",
    "message": "VARCHAR",
    "attributes": "JSON",
    "attributes_json_schema": "VARCHAR",
    "tags": "VARCHAR[]",
    "otel_links": "JSON",
    "otel_events": "JSON",
    "is_exception": "BOOLEAN",
    "exception_type": "VARCHAR",
    "exception_message": "VARCHAR",
    "exception_stacktrace": "VARCHAR",
    "otel_status_code": "VARCHAR",
    "otel_status_message": "VARCHAR",
    "otel_scope_name": "VARCHAR",
    "otel_scope_version": "VARCHAR",
    "otel_scope_attributes": "JSON",
    "service_namespace": "VARCHAR",
    "service_name": "VARCHAR",
    "service_version": "VARCHAR",
    "service_instance_id": "VARCHAR",
    "process_pid": "INTEGER",
    "span_type": "VARCHAR",
    "otel_kind": "VARCHAR",
    "otel_resource_attributes": "JSON",
}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def tracer(store: Path) -> Iterator[Tracer]:
    provider = TracerProvider(resource=Resource.create({"service.name": "svc", "process.pid": 77}))
    provider.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(store)))
    yield provider.get_tracer("reader-test")
    provider.shutdown()


def column_types(path: Path, view: str = "records") -> dict[str, str]:
    with connect(path) as con:
        return {name: sql_type for name, sql_type, *_ in con.execute(f"DESCRIBE {view}").fetchall()}


def write_tree(tracer: Tracer, root: str) -> None:
    with tracer.start_as_current_span(root):
        for child in ("child-a", "child-b"):
            with tracer.start_as_current_span(child):
                pass


def test_the_view_has_logfire_columns_with_explicit_types(store: Path, tracer: Tracer) -> None:
    """`records` exposes every column in Logfire's order with the documented DuckDB types."""
    assert column_types(store) == EXPECTED_TYPES
    assert tuple(EXPECTED_TYPES) == COLUMN_NAMES


def test_a_missing_store_gives_an_empty_records_with_the_same_columns(tmp_path: Path) -> None:
    """Reading a store that does not exist gives zero rows and the full column list."""
    missing = tmp_path / "nothing-here"
    assert column_types(missing) == EXPECTED_TYPES
    assert query("SELECT count(*) AS n FROM records", missing) == [{"n": 0}]
    assert not missing.exists()


def test_default_store_path_honours_mastrace_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """MASTRACE_DIR names the store; relative values resolve against the current directory."""
    monkeypatch.setenv("MASTRACE_DIR", str(tmp_path / "elsewhere"))
    assert default_store_path() == tmp_path / "elsewhere"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MASTRACE_DIR", "relative")
    assert default_store_path() == tmp_path / "relative"


def test_default_store_path_is_dot_mastrace_in_the_working_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without MASTRACE_DIR the store is ./.mastrace."""
    monkeypatch.chdir(tmp_path)
    assert default_store_path() == tmp_path / ".mastrace"


def test_query_without_a_path_reads_the_default_store(monkeypatch: pytest.MonkeyPatch, store: Path) -> None:
    """`query(sql)` reads the store that MASTRACE_DIR points to."""
    monkeypatch.setenv("MASTRACE_DIR", str(store))
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(store)))
    with provider.get_tracer("t").start_as_current_span("in-default-store"):
        pass
    assert query("SELECT span_name FROM records") == [{"span_name": "in-default-store"}]


def test_rows_read_back_with_python_types(store: Path, tracer: Tracer) -> None:
    """Timestamps are naive UTC datetimes, duration is seconds, tags a list, JSON a string."""
    span = tracer.start_span("timed", start_time=1_700_000_000_000_000_000, attributes={"k": "v"})
    span.end(end_time=1_700_000_002_500_000_000)
    (row,) = query("SELECT * FROM records", store)
    assert row["start_timestamp"] == datetime.datetime(2023, 11, 14, 22, 13, 20)
    assert row["end_timestamp"] == datetime.datetime(2023, 11, 14, 22, 13, 22, 500000)
    assert row["duration"] == 2.5
    assert (row["tags"], row["attributes"], row["otel_events"]) == ([], '{"k":"v"}', "[]")
    assert (row["kind"], row["message"], row["is_exception"]) == ("span", "timed", False)
    assert (row["service_name"], row["process_pid"]) == ("svc", 77)


def test_dotted_attribute_names_are_json_keys(store: Path, tracer: Tracer) -> None:
    """`->>` and `->` treat a dotted attribute name as one key, and JSON numbers cast to int."""
    attrs = {"massgen.agent_id": "agent_a", "massgen.usage.input": 1234}
    with tracer.start_as_current_span("agent.agent_a.round_0", attributes=attrs):
        pass
    sql = (
        "SELECT attributes->>'massgen.agent_id' AS agent, (attributes->'massgen.usage.input')::int AS tokens "
        "FROM records"
    )
    assert query(sql, store) == [{"agent": "agent_a", "tokens": 1234}]


def test_segments_created_after_connect_are_seen(store: Path) -> None:
    """The view matches segment files per query, so a writer started later shows up."""
    first = LocalStoreExporter(store)
    con = connect(store)
    try:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(store)))
        with provider.get_tracer("t").start_as_current_span("late"):
            pass
        assert len(segment_files(store)) == 2 and first.segment in segment_files(store)
        assert con.execute("SELECT span_name FROM records").fetchall() == [("late",)]
    finally:
        con.close()


def test_a_torn_last_line_is_skipped(store: Path, tracer: Tracer) -> None:
    """A line cut short (a writer killed mid-write) is ignored and the complete lines are read."""
    with tracer.start_as_current_span("complete"):
        pass
    (segment,) = segment_files(store)
    whole = segment.read_bytes()
    with segment.open("ab") as handle:
        handle.write(whole[: len(whole) // 2])
    assert query("SELECT span_name FROM records", store) == [{"span_name": "complete"}]


def test_time_filters_against_now_use_utc(store: Path, tracer: Tracer) -> None:
    """The session time zone is UTC, so Logfire's `now() - interval` filters find fresh spans."""
    with tracer.start_as_current_span("fresh") as span:
        span.record_exception(RuntimeError("just now"))
    sql = (
        "WITH recent AS ( SELECT * FROM records WHERE start_timestamp > now() - interval '1 hour' ) "
        "SELECT span_name FROM recent WHERE is_exception"
    )
    assert query(sql, store) == [{"span_name": "fresh"}]


def test_query_accepts_parameters(store: Path, tracer: Tracer) -> None:
    """Positional parameters are passed to DuckDB."""
    for name in ("a", "b"):
        with tracer.start_as_current_span(name):
            pass
    assert query("SELECT span_name FROM records WHERE span_name = ?", store, ["b"]) == [{"span_name": "b"}]


@pytest.mark.parametrize(
    "sql",
    [
        "SELEC broken",  # parser error
        "SELECT no_such_column FROM records",  # binder error
        "SELECT 'x'::INTEGER",  # conversion error
        "SELECT * FROM no_such_table",  # catalog error
    ],
)
def test_duckdb_errors_become_store_errors(store: Path, tracer: Tracer, sql: str) -> None:
    """Every kind of DuckDB failure reaches the caller as StoreError, chained to the original."""
    with pytest.raises(StoreError) as info:
        query(sql, store)
    assert isinstance(info.value.__cause__, duckdb.Error)


@pytest.mark.parametrize("folder", ["it's a store", "runs[1]*?"])
def test_store_paths_with_quotes_or_glob_characters_are_read(tmp_path: Path, folder: str) -> None:
    """Quotes and glob characters in the store path neither break the SQL nor match other folders."""
    decoy = TracerProvider()
    decoy.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(tmp_path / "runs1ab")))
    with decoy.get_tracer("t").start_as_current_span("decoy"):
        pass
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(tmp_path / folder)))
    with provider.get_tracer("t").start_as_current_span("mine"):
        pass
    assert query("SELECT span_name FROM records", tmp_path / folder) == [{"span_name": "mine"}]


def test_roots_has_the_columns_of_records(store: Path, tracer: Tracer) -> None:
    """`roots` exposes the same columns with the same types as `records`."""
    assert column_types(store, "roots") == EXPECTED_TYPES


def test_roots_holds_exactly_the_root_spans_of_records(store: Path, tracer: Tracer) -> None:
    """Every row of `roots` is a row of `records` without a parent, and every such row is in it."""
    write_tree(tracer, "first")
    write_tree(tracer, "second")
    in_roots = query("SELECT * FROM roots ORDER BY span_name", store)
    in_records = query("SELECT * FROM records WHERE parent_span_id IS NULL ORDER BY span_name", store)
    assert [r["span_name"] for r in in_roots] == ["first", "second"]
    assert in_roots == in_records
    assert roots_complete(store)


def test_a_store_without_roots_files_gives_an_empty_roots(store: Path, tracer: Tracer) -> None:
    """A store written before roots files existed reads as an empty `roots`, and is not complete."""
    write_tree(tracer, "legacy")
    for path in root_files(store):
        path.unlink()
    (store / "roots").rmdir()
    assert query("SELECT count(*) AS n FROM roots", store) == [{"n": 0}]
    assert query("SELECT count(*) AS n FROM records", store) == [{"n": 3}]
    assert not roots_complete(store)


def test_roots_are_incomplete_while_any_segment_lacks_its_roots_file(store: Path, tracer: Tracer) -> None:
    """One segment without a roots file (an older writer) makes `roots_complete` false."""
    write_tree(tracer, "new")
    assert roots_complete(store)
    legacy = store / "segments" / "oldhost-1-1-1.ndjson"
    legacy.write_bytes((segment_files(store)[0]).read_bytes())
    assert not roots_complete(store)


def test_roots_are_incomplete_when_a_segment_was_deleted(store: Path, tracer: Tracer) -> None:
    """A roots file that outlived its segment makes `roots_complete` false, as `roots` lists too much."""
    write_tree(tracer, "pruned")
    for segment in segment_files(store):
        segment.unlink()
    assert query("SELECT count(*) AS n FROM roots", store) == [{"n": 1}]
    assert not roots_complete(store)


def test_roots_files_created_after_connect_are_seen(store: Path, tracer: Tracer) -> None:
    """Like segments, roots files are matched per query, so a later writer's roots show up."""
    write_tree(tracer, "early")
    con = connect(store)
    try:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(store)))
        write_tree(provider.get_tracer("t"), "late")
        assert len(root_files(store)) == 2
        rows = con.execute("SELECT span_name FROM roots ORDER BY span_name").fetchall()
        assert rows == [("early",), ("late",)]
    finally:
        con.close()


def test_a_missing_store_gives_an_empty_roots(tmp_path: Path) -> None:
    """A store that does not exist has an empty `roots` with the full column list."""
    missing = tmp_path / "nothing-here"
    assert column_types(missing, "roots") == EXPECTED_TYPES
    assert query("SELECT count(*) AS n FROM roots", missing) == [{"n": 0}]
    assert roots_complete(missing)
