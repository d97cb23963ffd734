"""`otel_traces` rows: the Collector exporter's schema, the span ↔ row mapping, and URLs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from mastrace import semconv
from mastrace.exceptions import StoreError
from mastrace.store._clickhouse import (
    COLUMN_NAMES,
    ClickHouseWriter,
    attribute_text,
    attribute_value,
    parse_target,
    row_to_span,
    span_to_row,
)

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
T0 = 1_700_000_000_123_456_789


def _span() -> ReadableSpan:
    trace_id, parent_id, span_id = 0xAB << 100, 0x11, 0x22
    return ReadableSpan(
        name="agent.agent_a.round_1",
        context=SpanContext(trace_id, span_id, is_remote=False, trace_flags=_SAMPLED),
        parent=SpanContext(trace_id, parent_id, is_remote=False, trace_flags=_SAMPLED),
        resource=Resource({"service.name": "massgen", "process.pid": 4242}),
        attributes={
            semconv.MASSGEN_USAGE_INPUT: 1200,
            semconv.MASSGEN_USAGE_COST: 0.0125,
            semconv.MASSGEN_IS_WINNER: True,
            semconv.GEN_AI_RESPONSE_FINISH_REASONS: ("stop",),
            semconv.MASTRACE_CONFIG: json.dumps({"model": "m", "n": 3}),
            "custom.count": 7,
        },
        events=[
            Event("exception", {semconv.EXCEPTION_TYPE: "ValueError", "exception.escaped": False}, T0 + 5)
        ],
        links=[Link(SpanContext(0xCD, 0x33, is_remote=True, trace_flags=_SAMPLED), {"why": "vote"})],
        kind=SpanKind.CLIENT,
        status=Status(StatusCode.ERROR, "bad"),
        start_time=T0,
        end_time=T0 + 2_500_000_000,
        instrumentation_scope=InstrumentationScope("mastrace.mixins", "1.0"),
    )


def test_a_span_becomes_the_row_the_collector_writes() -> None:
    """Ids in hex, kind and status as the exporter's enum names, duration in ns, every map value text."""
    row = dict(zip(COLUMN_NAMES, span_to_row(_span()), strict=True))
    assert row["TraceId"] == f"{0xAB << 100:032x}" and row["SpanId"] == f"{0x22:016x}"
    assert row["ParentSpanId"] == f"{0x11:016x}"
    assert row["SpanKind"] == "SPAN_KIND_CLIENT" and row["StatusCode"] == "STATUS_CODE_ERROR"
    assert row["StatusMessage"] == "bad" and row["Duration"] == 2_500_000_000 and row["Timestamp"] == T0
    assert row["ServiceName"] == "massgen" and row["ResourceAttributes"]["process.pid"] == "4242"
    assert row["SpanAttributes"][semconv.MASSGEN_USAGE_INPUT] == "1200"
    assert row["SpanAttributes"][semconv.MASSGEN_IS_WINNER] == "true"
    assert row["SpanAttributes"][semconv.GEN_AI_RESPONSE_FINISH_REASONS] == '["stop"]'
    assert row["Events.Name"] == ["exception"] and row["Events.Timestamp"] == [T0 + 5]
    assert row["Links.SpanId"] == [f"{0x33:016x}"] and row["Links.Attributes"] == [{"why": "vote"}]


def test_a_row_reads_back_as_the_span_with_semconv_types() -> None:
    """Read back, keys mastrace types get their type; others (and JSON texts) stay text."""
    original = _span()
    back = row_to_span(dict(zip(COLUMN_NAMES, span_to_row(original), strict=True)))
    assert back.context == original.context and back.parent == original.parent
    assert (back.name, back.kind, back.start_time, back.end_time) == (
        original.name,
        original.kind,
        original.start_time,
        original.end_time,
    )
    assert back.status.status_code is StatusCode.ERROR and back.status.description == "bad"
    attrs = dict(back.attributes or {})
    assert attrs[semconv.MASSGEN_USAGE_INPUT] == 1200 and attrs[semconv.MASSGEN_USAGE_COST] == 0.0125
    assert attrs[semconv.MASSGEN_IS_WINNER] is True
    assert attrs[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert attrs[semconv.MASTRACE_CONFIG] == json.dumps({"model": "m", "n": 3})
    assert attrs["custom.count"] == "7"  # a key mastrace does not type stays the exporter's text
    assert dict(back.resource.attributes)["process.pid"] == 4242
    (event,) = back.events
    assert event.timestamp == T0 + 5 and dict(event.attributes or {})["exception.escaped"] is False
    (link,) = back.links
    assert link.context.span_id == 0x33 and dict(link.attributes or {}) == {"why": "vote"}


@pytest.mark.parametrize(
    ("key", "text", "value"),
    [
        (semconv.GEN_AI_USAGE_INPUT_TOKENS, "12", 12),
        (semconv.GEN_AI_REQUEST_TEMPERATURE, "0.5", 0.5),
        (semconv.GEN_AI_USAGE_INPUT_TOKENS, "not a number", "not a number"),
        (semconv.MASTRACE_INTERRUPTED, "yes", "yes"),
        ("any.key", "42", "42"),
    ],
)
def test_attribute_values_are_typed_only_where_semconv_says(key: str, text: str, value: object) -> None:
    """A text that is not what its key's type reads stays the text: nothing is lost or guessed."""
    assert attribute_value(key, text) == value and type(attribute_value(key, text)) is type(value)


def test_attribute_text_writes_values_as_the_exporter_does() -> None:
    """Ints as decimals, bools as true/false, floats round-trip, arrays as JSON."""
    assert [attribute_text(v) for v in (3, True, 0.1, "x", (1, 2), float("nan"))] == [
        "3",
        "true",
        "0.1",
        "x",
        "[1,2]",
        "NaN",
    ]


@pytest.mark.parametrize(
    ("url", "database", "table", "where"),
    [
        ("clickhouse://u:p%40ss@h:9123/db?table=t", "db", "t", ("h", 9123, "u", "p@ss", False)),
        ("clickhouses://h/", "default", "otel_traces", ("h", 8443, "default", "", True)),
        ("clickhouse://h", "default", "otel_traces", ("h", 8123, "default", "", False)),
    ],
)
def test_clickhouse_urls(url: str, database: str, table: str, where: tuple[object, ...]) -> None:
    """Host, port (8123/8443 by default), user, password, database and table from the URL; the
    password is never in the URL the target shows."""
    target = parse_target(url)
    assert (target.database, target.table) == (database, table)
    assert (target.host, target.port, target.username, target.password, target.secure) == where
    assert "p@ss" not in target.url and "p%40ss" not in target.url


@pytest.mark.parametrize("url", ["chdb://", "clickhouse:///db", "clickhouse://h/db?table=a-b", "http://h"])
def test_bad_clickhouse_urls_are_store_errors(url: str) -> None:
    with pytest.raises(StoreError):
        parse_target(url)


def test_the_table_mastrace_creates_is_the_collectors(tmp_path: Path) -> None:
    """The DDL creates the exporter's columns with its types, and the writer fills every one; a row
    inserted as the Collector writes it (plain SQL, all values text) reads back as a span."""
    pytest.importorskip("chdb")
    writer = ClickHouseWriter(parse_target(f"chdb://{tmp_path / 'ch'}?table=otel_traces"))
    try:
        described = {
            name: kind
            for name, kind, *_ in writer.client.query("DESCRIBE TABLE `default`.`otel_traces`").result_rows
        }
        assert tuple(described) == COLUMN_NAMES
        assert described["Timestamp"] == "DateTime64(9)" and described["Duration"] == "UInt64"
        assert described["SpanAttributes"] == "Map(LowCardinality(String), String)"
        assert described["Events.Attributes"] == "Array(Map(LowCardinality(String), String))"
        assert writer.send([_span()]) == 1
        writer.client.command(
            "INSERT INTO otel_traces (Timestamp, TraceId, SpanId, ParentSpanId, SpanName, SpanKind, "
            "ServiceName, SpanAttributes, Duration, StatusCode) VALUES ('2023-11-14 22:13:20.5', "
            "'0af7651916cd43dd8448eb211c80319c', 'b7ad6b7169203331', '', 'GET /', 'SPAN_KIND_SERVER', 'web', "
            "map('gen_ai.usage.input_tokens', '9', 'http.route', '/'), 1500, 'STATUS_CODE_OK')"
        )
        rows = writer.client.query(
            "SELECT toUnixTimestamp64Nano(Timestamp) AS Timestamp, * EXCEPT (Timestamp) FROM otel_traces "
            "WHERE ServiceName = 'web'"
        ).named_results()
        (span,) = [row_to_span(r) for r in rows]
        assert span.name == "GET /" and span.kind is SpanKind.SERVER and span.parent is None
        assert span.status.status_code is StatusCode.OK and span.end_time - span.start_time == 1500
        assert dict(span.attributes or {}) == {"gen_ai.usage.input_tokens": 9, "http.route": "/"}
    finally:
        writer.shutdown()
