"""The tracer facade (`tracing/_tracer.py`): spans, events, attributes, and misuse that must stay harmless."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import enum
import json
import logging
import threading
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import mastrace
from mastrace import semconv
from mastrace.setup import _config
from mastrace.testing import CapturedSpans, capture_spans
from mastrace.tracing._state import STATE

tracer = mastrace.get_tracer()


@pytest.fixture
def quiet_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Capture every log record at DEBUG; the test then asserts tracing logged nothing."""
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="opentelemetry.context")
    yield caplog


def _tracing_records(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith(("opentelemetry", "mastrace"))]


# --- the span API ----------------------------------------------------------------------------------
def test_span_records_name_attributes_and_kind(mastrace_spans: CapturedSpans) -> None:
    """`tracer.span` records its name, initial and later attributes, and kind."""
    with tracer.span("agent.a.round_1", attributes={semconv.MASSGEN_ROUND: 1}, kind=SpanKind.CLIENT) as span:
        span.set_attribute(semconv.MASSGEN_OUTCOME, "vote")
        span.set_attributes({semconv.MASSGEN_VOTED_FOR: "b", semconv.MASSGEN_USAGE_COST: 0.25})
        assert span.name == "agent.a.round_1" and span.is_recording()
    recorded = mastrace_spans.one("agent.a.round_1")
    assert recorded.kind is SpanKind.CLIENT
    assert {
        k: recorded.attributes[k]
        for k in (
            semconv.MASSGEN_ROUND,
            semconv.MASSGEN_OUTCOME,  # type: ignore[index]
            semconv.MASSGEN_VOTED_FOR,
            semconv.MASSGEN_USAGE_COST,
        )
    } == {
        semconv.MASSGEN_ROUND: 1,
        semconv.MASSGEN_OUTCOME: "vote",
        semconv.MASSGEN_VOTED_FOR: "b",
        semconv.MASSGEN_USAGE_COST: 0.25,
    }


def test_span_is_current_inside_and_restored_after(mastrace_spans: CapturedSpans) -> None:
    """Inside the block the span is current; afterwards the previous span is current again."""
    before = trace.get_current_span()
    with tracer.span("outer") as outer:
        assert trace.get_current_span() is outer.otel_span
        with tracer.span("inner") as inner:
            assert trace.get_current_span() is inner.otel_span
        assert trace.get_current_span() is outer.otel_span
    assert trace.get_current_span() is before
    assert mastrace_spans.parent_of(mastrace_spans.one("inner")) is mastrace_spans.one("outer")


def test_async_with_span(mastrace_spans: CapturedSpans) -> None:
    """A span works as an async context manager and nests spans opened inside it."""

    async def main() -> None:
        async with tracer.span("outer"), tracer.span("inner"):
            await asyncio.sleep(0)

    asyncio.run(main())
    assert mastrace_spans.parent_of(mastrace_spans.one("inner")) is mastrace_spans.one("outer")


def test_exception_marks_error_and_propagates(mastrace_spans: CapturedSpans) -> None:
    """An exception leaving the block propagates and the span is ERROR with an exception event."""
    with pytest.raises(KeyError), tracer.span("failing"):
        raise KeyError("missing")
    span = mastrace_spans.one("failing")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "KeyError: 'missing'"
    assert [e.name for e in span.events] == ["exception"]


@pytest.mark.parametrize(
    ("status", "code"),
    [("ok", StatusCode.OK), ("error", StatusCode.ERROR), (StatusCode.ERROR, StatusCode.ERROR)],
)
def test_set_status(status: str | StatusCode, code: StatusCode, mastrace_spans: CapturedSpans) -> None:
    """`set_status` accepts names or StatusCode values; a description is kept for errors."""
    with tracer.span("status") as span:
        span.set_status(status, "went wrong")  # type: ignore[arg-type]
    recorded = mastrace_spans.one("status").status
    assert recorded.status_code is code
    assert recorded.description == ("went wrong" if code is StatusCode.ERROR else None)


def test_add_event_and_record_exception_keep_status(mastrace_spans: CapturedSpans) -> None:
    """Events and recorded exceptions are added without changing the span status."""
    with tracer.span("events") as span:
        span.add_event("chunk", {"index": 1, "tags": {"x"}})
        span.record_exception(ValueError("handled"), {"retry": True})
    recorded = mastrace_spans.one("events")
    assert recorded.status.status_code is StatusCode.UNSET
    assert [e.name for e in recorded.events] == ["chunk", "exception"]
    assert recorded.events[0].attributes == {"index": 1, "tags": '["x"]'}
    assert recorded.events[1].attributes["retry"] is True  # type: ignore[index]


def test_span_context_only_while_started() -> None:
    """`span_context` is None before the span starts and a valid context while it runs."""
    with capture_spans():
        span = tracer.span("ctx")
        assert span.span_context is None
        with span:
            ctx = span.span_context
            assert ctx is not None and ctx.is_valid
            assert ctx == trace.get_current_span().get_span_context()


def test_start_span_is_not_current(mastrace_spans: CapturedSpans) -> None:
    """`tracer.start_span` starts a span without making it current; `end()` records it."""
    with tracer.span("outer") as outer:
        detached = tracer.start_span("background")
        assert trace.get_current_span() is outer.otel_span
        detached.end()
    assert mastrace_spans.parent_of(mastrace_spans.one("background")) is mastrace_spans.one("outer")


def test_links_accept_spans_contexts_and_skip_junk(mastrace_spans: CapturedSpans) -> None:
    """Links may be mastrace spans, OTel spans or span contexts; other values are ignored."""
    with tracer.span("answer") as answer:
        ctx = answer.span_context
        otel_span = answer.otel_span
    with tracer.span("vote", links=[answer, ctx, otel_span, "junk", None]):
        pass
    links = mastrace_spans.one("vote").links
    assert [link.context.span_id for link in links] == [ctx.span_id] * 3  # type: ignore[union-attr]


def test_event_is_a_zero_duration_log_span(mastrace_spans: CapturedSpans) -> None:
    """`tracer.event` records a zero-duration log-style child of the current span."""
    with tracer.span(semconv.SPAN_COORDINATION_SESSION):
        tracer.event("Coordination event: winner_selected", winner="agent_a")
    event = mastrace_spans.one("Coordination event: winner_selected")
    assert event.start_time == event.end_time
    assert mastrace_spans.parent_of(event) is mastrace_spans.one(semconv.SPAN_COORDINATION_SESSION)
    attrs = event.attributes or {}
    assert (
        attrs[semconv.LOGFIRE_SPAN_TYPE],
        attrs[semconv.LOGFIRE_MSG],
        attrs[semconv.LOGFIRE_LEVEL_NUM],
        attrs["winner"],
    ) == ("log", "Coordination event: winner_selected", semconv.LEVEL_INFO, "agent_a")


def test_error_event_has_error_status(mastrace_spans: CapturedSpans) -> None:
    """`tracer.event(..., level="error")` records error level and an ERROR status."""
    tracer.event("backend failed", level="error")
    event = mastrace_spans.one("backend failed")
    assert event.status.status_code is StatusCode.ERROR
    assert event.attributes[semconv.LOGFIRE_LEVEL_NUM] == semconv.LEVEL_ERROR  # type: ignore[index]


def test_get_tracer_is_cached_per_name() -> None:
    """`get_tracer` returns the same tracer for the same name and a different one per name."""
    assert mastrace.get_tracer("x") is mastrace.get_tracer("x")
    assert mastrace.get_tracer("x") is not mastrace.get_tracer("y")


def test_tracer_made_before_configure_records_after_it() -> None:
    """A tracer obtained before `configure()` records once configure has run."""
    early = mastrace.get_tracer("early.component")
    assert isinstance(early.span("before"), mastrace.NoOpSpan)
    with capture_spans() as spans, early.span("after"):
        pass
    assert spans.one("after").instrumentation_scope.name == "early.component"  # type: ignore[union-attr]


# --- attribute values ------------------------------------------------------------------------------
@dataclasses.dataclass
class ModelConfig:
    model: str
    temperature: float


class Color(enum.Enum):
    RED = "red"


class BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"b", "a"}, '["a","b"]'),
        (ModelConfig("gpt-4o", 0.2), '{"model":"gpt-4o","temperature":0.2}'),
        ({"nested": [1, {"x": None}]}, '{"nested":[1,{"x":null}]}'),
        ([1, "two"], '[1,"two"]'),
        (["a", "b"], ("a", "b")),
        (Color.RED, "red"),
    ],
    ids=["set", "dataclass", "dict", "mixed-list", "str-list", "enum"],
)
def test_unsupported_values_are_coerced(
    value: object, expected: object, mastrace_spans: CapturedSpans
) -> None:
    """Values OpenTelemetry refuses become valid attribute values (JSON strings for containers)."""
    with tracer.span("coerced", attributes={"initial": value}) as span:
        span.set_attribute("later", value)
    attrs = mastrace_spans.one("coerced").attributes or {}
    assert (attrs["initial"], attrs["later"]) == (expected, expected)


def test_none_attributes_are_dropped(mastrace_spans: CapturedSpans) -> None:
    """A None value is not recorded, initially or later."""
    with tracer.span("nones", attributes={"initial": None}) as span:
        span.set_attribute("later", None)
    attrs = mastrace_spans.one("nones").attributes or {}
    assert "initial" not in attrs and "later" not in attrs


def test_raising_repr_is_recorded_as_a_string(
    mastrace_spans: CapturedSpans, quiet_log: pytest.LogCaptureFixture
) -> None:
    """An object whose `__repr__` raises is recorded as a string, without raising or logging."""
    with tracer.span("bad", attributes={"obj": BadRepr()}) as span:
        span.set_attribute("later", BadRepr())
    attrs = mastrace_spans.one("bad").attributes or {}
    assert isinstance(attrs["obj"], str) and isinstance(attrs["later"], str)
    assert "BadRepr" in attrs["obj"]
    assert _tracing_records(quiet_log) == []


def test_json_attributes_declare_their_schema(mastrace_spans: CapturedSpans) -> None:
    """Attributes encoded as JSON are listed in `logfire.json_schema` with their JSON type."""
    with tracer.span("schema", attributes={"config": {"model": "m"}}) as span:
        span.set_attribute("tags", {"x", "y"})
    schema = json.loads(mastrace_spans.one("schema").attributes[semconv.LOGFIRE_JSON_SCHEMA])  # type: ignore[index,arg-type]
    assert schema["properties"] == {"config": {"type": "object"}, "tags": {"type": "array"}}


# --- misuse that must stay harmless ----------------------------------------------------------------
def test_span_exited_in_another_task_is_quiet(
    mastrace_spans: CapturedSpans, quiet_log: pytest.LogCaptureFixture
) -> None:
    """Entering a span in one task and exiting it in another never raises, logs nothing, records it once."""
    span = tracer.span("crossed")

    async def enter() -> None:
        span.__enter__()

    async def leave() -> None:
        span.__exit__(None, None, None)

    async def main() -> trace.Span:
        await asyncio.create_task(enter())
        await asyncio.create_task(leave())
        return trace.get_current_span()

    assert asyncio.run(main()) is trace.INVALID_SPAN
    assert mastrace_spans.names() == ["crossed"]
    assert STATE.counters.get("cross_context_exits") == 1
    assert _tracing_records(quiet_log) == []


def _enter_here_exit_in_thread(name: str) -> list[BaseException]:
    span = tracer.span(name).__enter__()
    errors: list[BaseException] = []

    def finish() -> None:
        try:
            span.__exit__(None, None, None)
        except BaseException as exc:  # pragma: no cover - the caller's assertion reports it
            errors.append(exc)

    thread = threading.Thread(target=finish)
    thread.start()
    thread.join()
    return errors


def test_span_handle_ended_in_a_thread_is_quiet(
    mastrace_spans: CapturedSpans, quiet_log: pytest.LogCaptureFixture
) -> None:
    """A span entered here and exited on another thread never raises, logs nothing, and records it once."""
    errors = contextvars.copy_context().run(_enter_here_exit_in_thread, "handed-over")
    assert errors == []
    assert mastrace_spans.names() == ["handed-over"]
    assert _tracing_records(quiet_log) == []


def test_context_left_by_a_span_ended_elsewhere_is_repaired() -> None:
    """After a span is ended on another thread, the next span here is a sibling of it, not its child."""

    def scenario() -> tuple[trace.Span, trace.Span]:
        with tracer.span("parent") as parent:
            _enter_here_exit_in_thread("handed-over")
            with tracer.span("next"):
                pass
            return parent.otel_span, trace.get_current_span()  # type: ignore[return-value]

    with capture_spans() as spans:
        parent, current_after = contextvars.copy_context().run(scenario)
    assert current_after is parent
    assert spans.parent_of(spans.one("next")) is spans.one("parent")
    assert spans.parent_of(spans.one("handed-over")) is spans.one("parent")


def test_span_ended_twice_is_harmless(
    mastrace_spans: CapturedSpans, quiet_log: pytest.LogCaptureFixture
) -> None:
    """Ending a span by hand inside its block, then leaving the block, records it once without warnings."""
    before = trace.get_current_span()
    with tracer.span("twice") as span:
        span.end()
        span.end()
        span.set_attribute("after_end", 1)
    assert trace.get_current_span() is before
    assert mastrace_spans.names() == ["twice"]
    assert "after_end" not in (mastrace_spans.one("twice").attributes or {})
    assert _tracing_records(quiet_log) == []


# --- configure() -----------------------------------------------------------------------------------
def test_configure_twice_with_same_arguments_is_a_no_op() -> None:
    """A second `configure()` with identical arguments keeps the same pipeline and generation."""
    exporter = InMemorySpanExporter()
    mastrace.configure(local=False, exporters=[exporter], synchronous=True)
    generation, pipeline = STATE.generation, _config._RT.pipeline
    mastrace.configure(local=False, exporters=[exporter], synchronous=True)
    assert (STATE.generation, _config._RT.pipeline) == (generation, pipeline)
    with tracer.span("still-recorded"):
        pass
    assert [s.name for s in exporter.get_finished_spans()] == ["still-recorded"]


def test_configure_with_different_arguments_reconfigures() -> None:
    """A second `configure()` with other arguments sends later spans to the new destinations only."""
    first, second = InMemorySpanExporter(), InMemorySpanExporter()
    mastrace.configure(local=False, exporters=[first], synchronous=True)
    with tracer.span("one"):
        pass
    generation = STATE.generation
    mastrace.configure(local=False, exporters=[second], synchronous=True)
    with tracer.span("two"):
        pass
    assert STATE.generation > generation
    assert [s.name for s in first.get_finished_spans()] == ["one"]
    assert [s.name for s in second.get_finished_spans()] == ["two"]


def test_reconfigured_service_name_reaches_existing_tracers() -> None:
    """After `configure(service_name=...)` changes, spans of a tracer used before carry the new name."""
    first, second = InMemorySpanExporter(), InMemorySpanExporter()
    mastrace.configure(local=False, exporters=[first], synchronous=True, service_name="first")
    with tracer.span("one"):
        pass
    mastrace.configure(local=False, exporters=[second], synchronous=True, service_name="second")
    with tracer.span("two"):
        pass
    assert [s.name for s in second.get_finished_spans()] == ["two"]
    assert second.get_finished_spans()[0].resource.attributes["service.name"] == "second"


def test_out_of_order_exit_does_not_leave_the_ended_outer_span_current() -> None:
    """A generator's span closed after the span around it ended restores the outer span's parent."""

    async def stream():  # an undecorated generator: its span exits after "round" has ended
        with mastrace.get_tracer().span("llm"):
            yield 1
            yield 2

    async def main() -> None:
        gen = stream()
        with mastrace.get_tracer().span("round"):
            await anext(gen)
        await gen.aclose()
        with mastrace.get_tracer().span("next"):
            pass

    with capture_spans() as spans:
        asyncio.run(main())
        assert spans.one("next").parent is None
        assert spans.parent_of(spans.one("llm")) is spans.one("round")


def test_a_single_link_is_accepted_without_a_list() -> None:
    """`links=span` works like `links=[span]`."""
    with capture_spans() as spans:
        tracer = mastrace.get_tracer()
        with tracer.span("answer") as answer:
            pass
        with tracer.span("vote", links=answer):
            pass
        links = spans.one("vote").links
        assert [link.context.span_id for link in links] == [answer.span_context.span_id]


def test_inject_env_repairs_a_context_left_by_a_span_ended_elsewhere() -> None:
    """After a span entered here is exited by another task, the child process gets its parent."""

    async def body():
        with mastrace.get_tracer().span("inner"):
            yield 1
            yield 2

    async def main() -> dict[str, str]:
        with mastrace.get_tracer().span("outer") as outer:
            gen = body()
            await anext(gen)
            await asyncio.create_task(gen.aclose())
            env = mastrace.inject_env({})
            return {"traceparent": env["TRACEPARENT"], "outer": f"{outer.span_context.span_id:016x}"}

    with capture_spans():
        found = asyncio.run(main())
    assert found["traceparent"].split("-")[2] == found["outer"]


def test_a_wall_clock_set_back_inside_a_span_cannot_make_its_duration_negative(
    mastrace_spans: CapturedSpans, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Durations come from the monotonic clock: the wall clock set back an hour mid-span changes
    nothing, where the raw SDK stores about -3600 s."""
    import time

    import opentelemetry.sdk.trace as sdk_trace

    real = time.time_ns
    raw = sdk_trace.TracerProvider().get_tracer("raw").start_span("raw")
    with mastrace.get_tracer().span("monotonic"):
        for module in (time, sdk_trace):  # the clock as the standard library and the SDK read it
            monkeypatch.setattr(module, "time_ns", lambda: real() - 3_600 * 10**9)
    raw.end()
    for module in (time, sdk_trace):
        monkeypatch.setattr(module, "time_ns", real)
    (span,) = mastrace_spans.spans
    assert span.end_time is not None and span.start_time is not None
    assert 0 <= span.end_time - span.start_time < 60 * 10**9
    assert raw.end_time is not None and raw.start_time is not None  # type: ignore[attr-defined]
    assert raw.end_time - raw.start_time < -3_000 * 10**9  # type: ignore[attr-defined]


def test_a_span_given_its_own_times_keeps_them(mastrace_spans: CapturedSpans) -> None:
    """An explicit start and end time is stored as given (no monotonic correction)."""
    handle = mastrace.get_tracer().start_span("given")
    handle.end()
    span = mastrace.get_tracer().span("explicit").start(start_time=1_000, attach=False)
    span.end(end_time=5_000)
    stored = {s.name: (s.start_time, s.end_time) for s in mastrace_spans.spans}
    assert stored["explicit"] == (1_000, 5_000)
