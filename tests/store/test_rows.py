"""Row building: finished SDK spans become store lines with Logfire's column semantics."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode, Tracer

from mastrace.store._rows import RowEncoder, span_to_dict

RESOURCE = Resource.create(
    {
        "service.name": "massgen",
        "service.namespace": "research",
        "service.version": "0.9.1",
        "service.instance.id": "instance-1",
        "process.pid": 4242,
        "deployment.environment": "test",
    }
)


@pytest.fixture
def memory() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer(memory: InMemorySpanExporter) -> Iterator[Tracer]:
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield provider.get_tracer("massgen.orchestrator", "1.2.3", attributes={"team": "core"})
    provider.shutdown()


def finished(memory: InMemorySpanExporter, name: str) -> ReadableSpan:
    return next(s for s in memory.get_finished_spans() if s.name == name)


def row_of(memory: InMemorySpanExporter, name: str) -> dict:
    return span_to_dict(finished(memory, name), created_ns=123)


def test_ids_are_lowercase_hex_and_a_root_has_no_parent(tracer: Tracer, memory: InMemorySpanExporter) -> None:
    """Trace and span ids are 32/16 hex digits; a child names its parent and a root stores none."""
    with tracer.start_as_current_span("root") as root, tracer.start_as_current_span("child"):
        pass
    root_row, child_row = row_of(memory, "root"), row_of(memory, "child")
    assert root_row["trace_id"] == f"{root.get_span_context().trace_id:032x}"
    assert len(root_row["span_id"]) == 16
    assert "parent_span_id" not in root_row
    assert child_row["parent_span_id"] == root_row["span_id"]


def test_timestamps_are_stored_as_nanoseconds(tracer: Tracer, memory: InMemorySpanExporter) -> None:
    """Start and end keep the SDK's nanoseconds; created_ns is the export time given."""
    span = tracer.start_span("timed", start_time=1_000_000_000_123)
    span.end(end_time=3_500_000_000_456)
    row = row_of(memory, "timed")
    assert (row["start_ns"], row["end_ns"], row["created_ns"]) == (1_000_000_000_123, 3_500_000_000_456, 123)


def test_a_plain_span_is_info_level_span_kind_with_unset_status(
    tracer: Tracer, memory: InMemorySpanExporter
) -> None:
    """Without errors or Logfire keys a span is level 9, span_type 'span', status UNSET."""
    with tracer.start_as_current_span("plain"):
        pass
    row = row_of(memory, "plain")
    assert (row["level"], row["span_type"], row["otel_status_code"]) == (9, "span", "UNSET")
    assert "is_exception" not in row and "message" not in row


def test_error_status_makes_the_level_error(tracer: Tracer, memory: InMemorySpanExporter) -> None:
    """An ERROR status gives level 17 and keeps the status description."""
    with tracer.start_as_current_span("failing") as span:
        span.set_status(Status(StatusCode.ERROR, "tool refused"))
    row = row_of(memory, "failing")
    assert (row["level"], row["otel_status_code"], row["otel_status_message"]) == (
        17,
        "ERROR",
        "tool refused",
    )


def test_ok_status_is_stored(tracer: Tracer, memory: InMemorySpanExporter) -> None:
    """An OK status is stored as 'OK' with info level."""
    with tracer.start_as_current_span("fine") as span:
        span.set_status(Status(StatusCode.OK))
    row = row_of(memory, "fine")
    assert (row["otel_status_code"], row["level"]) == ("OK", 9)


def test_an_exception_event_sets_the_exception_columns_from_the_last_one(
    tracer: Tracer, memory: InMemorySpanExporter
) -> None:
    """is_exception and exception_* come from the last exception event, and the level is error."""
    with tracer.start_as_current_span("tool", record_exception=False, set_status_on_exception=False) as span:
        span.record_exception(ValueError("first"))
        span.record_exception(PermissionError("denied: /etc/passwd"))
    row = row_of(memory, "tool")
    assert row["is_exception"] is True
    assert (row["exception_type"], row["exception_message"]) == ("PermissionError", "denied: /etc/passwd")
    assert "PermissionError" in row["exception_stacktrace"]
    assert row["level"] == 17 and row["otel_status_code"] == "UNSET"


def test_level_num_attribute_wins_over_error_status(tracer: Tracer, memory: InMemorySpanExporter) -> None:
    """`logfire.level_num` decides the level even when the status is ERROR."""
    with tracer.start_as_current_span("warned", attributes={"logfire.level_num": 13}) as span:
        span.set_status(Status(StatusCode.ERROR))
    assert row_of(memory, "warned")["level"] == 13


def test_a_log_span_type_makes_a_log_record(tracer: Tracer, memory: InMemorySpanExporter) -> None:
    """`logfire.span_type == 'log'` gives span_type 'log' and the message from `logfire.msg`."""
    attrs = {"logfire.span_type": "log", "logfire.msg": "winner is agent1.1", "massgen.winner": "agent_a"}
    with tracer.start_as_current_span("Coordination event: winner_selected", attributes=attrs):
        pass
    row = row_of(memory, "Coordination event: winner_selected")
    assert (row["span_type"], row["message"]) == ("log", "winner is agent1.1")
    assert row["attributes"] == {"massgen.winner": "agent_a"}


def test_other_span_types_stay_spans(tracer: Tracer, memory: InMemorySpanExporter) -> None:
    """Any `logfire.span_type` other than 'log' is stored as a span."""
    with tracer.start_as_current_span("pending", attributes={"logfire.span_type": "pending_span"}):
        pass
    assert row_of(memory, "pending")["span_type"] == "span"


def test_tags_come_from_logfire_tags(tracer: Tracer, memory: InMemorySpanExporter) -> None:
    """`logfire.tags` becomes the tags list and leaves the attributes."""
    with tracer.start_as_current_span("tagged", attributes={"logfire.tags": ("eval", "nightly"), "k": 1}):
        pass
    row = row_of(memory, "tagged")
    assert (row["tags"], row["attributes"]) == (["eval", "nightly"], {"k": 1})


def test_json_strings_in_the_schema_become_nested_json(tracer: Tracer, memory: InMemorySpanExporter) -> None:
    """Attributes that the json schema lists and that hold JSON objects or arrays are stored nested."""
    schema = json.dumps(
        {"type": "object", "properties": {"config": {"type": "object"}, "ids": {}, "note": {}}}
    )
    attrs = {
        "config": json.dumps({"model": "gpt", "limits": {"max_tokens": 100}}),
        "ids": json.dumps(["a", "b"]),
        "note": "{not json",
        "plain": '{"left": "as a string"}',
        "logfire.json_schema": schema,
    }
    with tracer.start_as_current_span("snapshot", attributes=attrs):
        pass
    row = row_of(memory, "snapshot")
    assert row["attributes"]["config"] == {"model": "gpt", "limits": {"max_tokens": 100}}
    assert row["attributes"]["ids"] == ["a", "b"]
    assert row["attributes"]["note"] == "{not json"
    assert row["attributes"]["plain"] == '{"left": "as a string"}'
    assert row["attributes_json_schema"] == schema


def test_primitive_attribute_values_are_kept_as_is(tracer: Tracer, memory: InMemorySpanExporter) -> None:
    """Numbers, booleans, strings and homogeneous sequences keep their JSON types."""
    attrs = {"massgen.round": 2, "massgen.usage.cost": 0.25, "massgen.is_winner": True, "seq": (1, 2, 3)}
    with tracer.start_as_current_span("typed", attributes=attrs):
        pass
    assert row_of(memory, "typed")["attributes"] == {
        "massgen.round": 2,
        "massgen.usage.cost": 0.25,
        "massgen.is_winner": True,
        "seq": [1, 2, 3],
    }


def test_non_finite_floats_still_give_valid_json(tracer: Tracer, memory: InMemorySpanExporter) -> None:
    """NaN and infinities, which JSON cannot hold, are stored as strings."""
    with tracer.start_as_current_span("odd", attributes={"nan": float("nan"), "inf": float("inf"), "ok": 1}):
        pass
    assert row_of(memory, "odd")["attributes"] == {"nan": "NaN", "inf": "Infinity", "ok": 1}


def test_links_are_stored_with_ids_and_attributes(tracer: Tracer, memory: InMemorySpanExporter) -> None:
    """Each link records the linked trace id, span id and link attributes."""
    with tracer.start_as_current_span("Agent answer: agent1.1") as answer:
        pass
    link = Link(answer.get_span_context(), {"massgen.link": "voted_for"})
    with tracer.start_as_current_span("Agent vote: agent_b -> agent1.1", links=[link]):
        pass
    answer_row = row_of(memory, "Agent answer: agent1.1")
    vote_row = row_of(memory, "Agent vote: agent_b -> agent1.1")
    assert vote_row["otel_links"] == [
        {
            "trace_id": answer_row["trace_id"],
            "span_id": answer_row["span_id"],
            "attributes": {"massgen.link": "voted_for"},
        }
    ]


def test_events_are_stored_with_name_iso_timestamp_and_attributes(
    tracer: Tracer, memory: InMemorySpanExporter
) -> None:
    """Events keep their name, attributes and an ISO-8601 UTC timestamp."""
    with tracer.start_as_current_span("stream") as span:
        span.add_event("first_chunk", {"chunk": 1}, timestamp=1_700_000_000_123_456_789)
    assert row_of(memory, "stream")["otel_events"] == [
        {"name": "first_chunk", "timestamp": "2023-11-14T22:13:20.123456Z", "attributes": {"chunk": 1}}
    ]


def test_resource_columns_come_from_the_resource(tracer: Tracer, memory: InMemorySpanExporter) -> None:
    """service_* and process_pid come from resource attributes, and all of them are kept as JSON."""
    with tracer.start_as_current_span("any"):
        pass
    row = row_of(memory, "any")
    assert (row["service_name"], row["service_namespace"], row["service_version"]) == (
        "massgen",
        "research",
        "0.9.1",
    )
    assert (row["service_instance_id"], row["process_pid"]) == ("instance-1", 4242)
    assert row["otel_resource_attributes"]["deployment.environment"] == "test"


def test_scope_columns_come_from_the_instrumentation_scope(
    tracer: Tracer, memory: InMemorySpanExporter
) -> None:
    """The tracer's name, version and attributes fill the otel_scope_* fields."""
    with tracer.start_as_current_span("any"):
        pass
    row = row_of(memory, "any")
    assert (row["otel_scope_name"], row["otel_scope_version"]) == ("massgen.orchestrator", "1.2.3")
    assert row["otel_scope_attributes"] == {"team": "core"}


def test_span_kind_is_stored_in_lowercase(tracer: Tracer, memory: InMemorySpanExporter) -> None:
    """OpenTelemetry's span kind is stored as 'client', 'internal', ..."""
    with tracer.start_as_current_span("call", kind=SpanKind.CLIENT):
        pass
    with tracer.start_as_current_span("inner"):
        pass
    assert (row_of(memory, "call")["otel_kind"], row_of(memory, "inner")["otel_kind"]) == (
        "client",
        "internal",
    )


def test_spans_of_different_resources_keep_their_own_service(memory: InMemorySpanExporter) -> None:
    """The per-resource cache never hands one resource's columns to another's spans."""
    encoder = RowEncoder()
    for service in ("alpha", "beta", "alpha"):
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        provider.add_span_processor(SimpleSpanProcessor(memory))
        with provider.get_tracer("t").start_as_current_span(f"from-{service}"):
            pass
    services = [json.loads(encoder.line(s, 0))["service_name"] for s in memory.get_finished_spans()]
    assert services == ["alpha", "beta", "alpha"]


def test_encode_writes_one_complete_line_per_span(tracer: Tracer, memory: InMemorySpanExporter) -> None:
    """A batch encodes to UTF-8 NDJSON with one newline-terminated line per span."""
    for i in range(3):
        with tracer.start_as_current_span(f"s{i}", attributes={"text": "naïve ✓"}):
            pass
    data, failed = RowEncoder().encode(memory.get_finished_spans(), 0)
    lines = data.decode("utf-8").splitlines(keepends=True)
    assert failed == 0 and len(lines) == 3 and all(line.endswith("}\n") for line in lines)
    assert json.loads(lines[0])["attributes"] == {"text": "naïve ✓"}


def test_lone_surrogates_are_replaced_so_the_line_stays_utf8(
    tracer: Tracer, memory: InMemorySpanExporter
) -> None:
    """A string that cannot be UTF-8 is repaired instead of breaking the batch."""
    with tracer.start_as_current_span("bad-text", attributes={"text": "a\ud800b"}):
        pass
    data, failed = RowEncoder().encode(memory.get_finished_spans(), 0)
    assert failed == 0
    assert json.loads(data)["attributes"] == {"text": "a\ufffdb"}  # U+FFFD, as everywhere else


def test_a_span_that_cannot_be_encoded_is_counted_not_raised(
    tracer: Tracer, memory: InMemorySpanExporter
) -> None:
    """A malformed span is skipped and counted while the rest of the batch is encoded."""
    with tracer.start_as_current_span("good"):
        pass
    broken = ReadableSpan(name="broken", context=None)
    data, failed = RowEncoder().encode([broken, *memory.get_finished_spans()], 0)
    assert failed == 1
    assert [json.loads(line)["span_name"] for line in data.splitlines()] == ["good"]


def test_encode_batch_also_gives_the_lines_of_root_spans(
    tracer: Tracer, memory: InMemorySpanExporter
) -> None:
    """`encode_batch` returns every line, and the root spans' lines again, in order; failures in neither."""
    with tracer.start_as_current_span("root-1"), tracer.start_as_current_span("child"):
        pass
    with tracer.start_as_current_span("root-2"):
        pass
    broken = ReadableSpan(name="broken", context=None)
    batch = RowEncoder().encode_batch([broken, *memory.get_finished_spans()], 0)
    names = [json.loads(line)["span_name"] for line in batch.data.splitlines()]
    roots = [json.loads(line)["span_name"] for line in batch.roots.splitlines()]
    assert (names, roots) == (["child", "root-1", "root-2"], ["root-1", "root-2"])
    assert (batch.encoded, batch.failed) == (3, 1)


def test_non_finite_numbers_are_spelled_like_everywhere_else() -> None:
    """The store, config snapshots and attribute JSON agree: "NaN", "Infinity", "-Infinity"."""
    import math

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from mastrace.pipeline._snapshots_on_spans import _serialise
    from mastrace.tracing._snapshot import dumps_json

    value = {"a": math.nan, "b": math.inf, "c": -math.inf}
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span("s", attributes=value):
        pass
    data, _ = RowEncoder().encode(memory.get_finished_spans(), 0)
    row = data.decode("utf-8").splitlines()[0]
    assert '"attributes":{"a":"NaN","b":"Infinity","c":"-Infinity"}' in row
    assert dumps_json(value) == _serialise(value) == '{"a":"NaN","b":"Infinity","c":"-Infinity"}'
