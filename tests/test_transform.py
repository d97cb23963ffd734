"""Tests for mastrace.pipeline._transform.prepare_span on spans recorded by the real OpenTelemetry SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, Status, StatusCode, Tracer

from mastrace import semconv
from mastrace.pipeline._transform import prepare_span
from mastrace.scrubbing._engine import Scrubber, ScrubbingOptions
from mastrace.tracing._snapshot import Limits, json_schema
from mastrace.tracing._tracer import coerce_attribute

OPENAI_KEY = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8t"
LIMITS = Limits()


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    """An in-memory exporter fed synchronously by a fresh tracer provider."""
    return InMemorySpanExporter()


@pytest.fixture
def tracer(exporter: InMemorySpanExporter) -> Iterator[Tracer]:
    """A tracer from a real SDK provider whose finished spans land in `exporter`."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider.get_tracer("test_transform")
    provider.shutdown()


@pytest.fixture
def scrubber() -> Scrubber:
    """A scrubber with the default options."""
    return Scrubber(ScrubbingOptions())


def _record(tracer: Tracer, exporter: InMemorySpanExporter, attributes: dict[str, Any]) -> ReadableSpan:
    with tracer.start_as_current_span("agent.agent_a.round_1", attributes=attributes):
        pass
    return exporter.get_finished_spans()[-1]


def test_clean_span_is_returned_as_is(
    tracer: Tracer, exporter: InMemorySpanExporter, scrubber: Scrubber
) -> None:
    """A span with small, valid, secret-free attributes is passed through untouched."""
    span = _record(
        tracer, exporter, {"massgen.agent_id": "agent_a", "massgen.round": 1, "massgen.usage.input": 9}
    )
    assert prepare_span(span, scrubber, LIMITS) is span


def test_warm_caches_never_let_a_secret_through(
    tracer: Tracer, exporter: InMemorySpanExporter, scrubber: Scrubber
) -> None:
    """After many clean spans, a secret value under the same ordinary key is still scrubbed."""
    for i in range(3):
        clean = _record(tracer, exporter, {"note": "a plain note", "massgen.round": i})
        assert prepare_span(clean, scrubber, LIMITS) is clean
    span = _record(tracer, exporter, {"note": f"key {OPENAI_KEY}", "massgen.round": 4})
    out = prepare_span(span, scrubber, LIMITS)
    assert OPENAI_KEY not in out.attributes["note"]
    assert out.attributes[semconv.MASTRACE_SCRUBBED] == '["attributes.note"]'


def test_a_string_known_plain_is_still_capped_by_small_limits(
    tracer: Tracer, exporter: InMemorySpanExporter, scrubber: Scrubber
) -> None:
    """A string the scrubber already judged plain is still cut when it passes `max_string_chars`."""
    text = "an ordinary sentence, " * 5
    first = _record(tracer, exporter, {"note": text})
    assert prepare_span(first, scrubber, LIMITS) is first
    second = _record(tracer, exporter, {"note": text})
    out = prepare_span(second, scrubber, Limits(max_string_chars=40))
    assert len(out.attributes["note"]) <= 40 and "…[truncated " in out.attributes["note"]
    assert out.attributes[semconv.MASTRACE_TRUNCATED] is True


def test_a_span_with_events_goes_through_the_full_transform(
    tracer: Tracer, exporter: InMemorySpanExporter, scrubber: Scrubber
) -> None:
    """A span whose attributes are clean but whose event holds a secret is not passed through."""
    with tracer.start_as_current_span("with-event", attributes={"massgen.round": 1}) as live:
        live.add_event("request", {"headers": f"Authorization: Bearer {OPENAI_KEY}"})
    span = exporter.get_finished_spans()[-1]
    out = prepare_span(span, scrubber, LIMITS)
    assert out is not span
    assert OPENAI_KEY not in str(out.events[0].attributes["headers"])


def test_attribute_secrets_are_gone_and_usage_kept(
    tracer: Tracer, exporter: InMemorySpanExporter, scrubber: Scrubber
) -> None:
    """Secrets in attributes are scrubbed while usage keys keep their values."""
    span = _record(
        tracer,
        exporter,
        {
            "llm.api_key": "plain-secret-value",
            "llm.note": f"using {OPENAI_KEY}",
            "massgen.usage.input": 120,
            "gen_ai.usage.input_tokens": 120,
            "gen_ai.request.max_tokens": 4096,
        },
    )
    out = prepare_span(span, scrubber, LIMITS)
    exported = out.to_json()
    assert "plain-secret-value" not in exported and OPENAI_KEY not in exported
    assert out.attributes["massgen.usage.input"] == 120
    assert out.attributes["gen_ai.usage.input_tokens"] == 120
    assert out.attributes["gen_ai.request.max_tokens"] == 4096
    assert json.loads(out.attributes[semconv.MASTRACE_SCRUBBED]) == [
        "attributes['llm.api_key']",
        "attributes['llm.note']",
    ]


def test_nested_json_attribute_is_scrubbed(
    tracer: Tracer, exporter: InMemorySpanExporter, scrubber: Scrubber
) -> None:
    """A config snapshot stored as JSON is scrubbed by key and by value and stays valid JSON."""
    config = {
        "agents": [{"id": "a", "backend": {"api_key": "abc12345", "base_url": "https://u:pw123456@h/v1"}}]
    }
    coerced, _ = coerce_attribute(config)
    span = _record(tracer, exporter, {semconv.MASTRACE_CONFIG: coerced})
    out = prepare_span(span, scrubber, LIMITS)
    backend = json.loads(out.attributes[semconv.MASTRACE_CONFIG])["agents"][0]["backend"]
    assert backend == {
        "api_key": "[Scrubbed due to 'api_key']",
        "base_url": "https://u:[Scrubbed: url_password]@h/v1",
    }


def test_event_attributes_are_scrubbed(
    tracer: Tracer, exporter: InMemorySpanExporter, scrubber: Scrubber
) -> None:
    """Secrets in event attributes are scrubbed and reported with the event's path."""
    with tracer.start_as_current_span("tool") as span:
        span.add_event(
            "request", {"headers": "Authorization: Bearer abcdefgh12345678", "password": "hunter22"}
        )
    out = prepare_span(exporter.get_finished_spans()[0], scrubber, LIMITS)
    exported = out.to_json()
    assert "abcdefgh12345678" not in exported and "hunter22" not in exported
    assert "otel_events[0].attributes.password" in json.loads(out.attributes[semconv.MASTRACE_SCRUBBED])


def test_exception_message_and_stacktrace_are_scrubbed(
    tracer: Tracer, exporter: InMemorySpanExporter, scrubber: Scrubber
) -> None:
    """An exception carrying a key is recorded without the key in its message or stack trace."""
    with tracer.start_as_current_span("llm.openai.stream") as span:
        try:
            raise PermissionError(f"invalid key {OPENAI_KEY}")
        except PermissionError as exc:
            span.record_exception(exc)
    out = prepare_span(exporter.get_finished_spans()[0], scrubber, LIMITS)
    event = out.events[0]
    assert OPENAI_KEY not in out.to_json()
    assert event.attributes["exception.message"] == "invalid key [Scrubbed: openai_key]"
    assert "PermissionError: invalid key [Scrubbed: openai_key]" in event.attributes["exception.stacktrace"]


def test_status_description_is_scrubbed(
    tracer: Tracer, exporter: InMemorySpanExporter, scrubber: Scrubber
) -> None:
    """The error status description loses its secret and keeps its code."""
    with tracer.start_as_current_span("mcp.search.query") as span:
        span.set_status(Status(StatusCode.ERROR, f"401 for {OPENAI_KEY}"))
    out = prepare_span(exporter.get_finished_spans()[0], scrubber, LIMITS)
    assert out.status.status_code is StatusCode.ERROR
    assert out.status.description == "401 for [Scrubbed: openai_key]"


def test_link_attributes_are_scrubbed(
    tracer: Tracer, exporter: InMemorySpanExporter, scrubber: Scrubber
) -> None:
    """Secrets in link attributes are scrubbed and the link target kept."""
    with tracer.start_as_current_span("answer") as answer:
        target = answer.get_span_context()
    with tracer.start_as_current_span("vote", links=[Link(target, {"note": f"k={OPENAI_KEY}"})]):
        pass
    out = prepare_span(exporter.get_finished_spans()[-1], scrubber, LIMITS)
    assert out.links[0].context == target
    assert OPENAI_KEY not in out.to_json()


def test_identity_and_timing_are_preserved(
    tracer: Tracer, exporter: InMemorySpanExporter, scrubber: Scrubber
) -> None:
    """The new span keeps the original's name, ids, parent, kind, times, resource and scope."""
    with (
        tracer.start_as_current_span("coordination.session"),
        tracer.start_as_current_span("agent.a.round_0", attributes={"password": "hunter22"}),
    ):
        pass
    span = exporter.get_finished_spans()[0]
    out = prepare_span(span, scrubber, LIMITS)
    assert out is not span
    assert (out.name, out.context, out.parent, out.kind) == (span.name, span.context, span.parent, span.kind)
    assert (out.start_time, out.end_time) == (span.start_time, span.end_time)
    assert out.resource is span.resource and out.instrumentation_scope == span.instrumentation_scope


def test_long_strings_are_capped_and_flagged(tracer: Tracer, exporter: InMemorySpanExporter) -> None:
    """An oversized string is cut with a visible marker and the span is flagged truncated."""
    span = _record(tracer, exporter, {"massgen.task": "t" * 200_000})
    out = prepare_span(span, None, Limits(max_string_chars=1_000))
    assert len(out.attributes["massgen.task"]) <= 1_000
    assert "…[truncated " in out.attributes["massgen.task"]
    assert out.attributes[semconv.MASTRACE_TRUNCATED] is True


def test_long_json_stays_valid(tracer: Tracer, exporter: InMemorySpanExporter, scrubber: Scrubber) -> None:
    """An oversized JSON attribute is capped to valid JSON."""
    coerced, _ = coerce_attribute({"prompt": "p" * 500_000, "model": "gpt-4o"})
    span = _record(tracer, exporter, {"mastrace.args": coerced})
    out = prepare_span(span, scrubber, Limits(max_string_chars=1_000, max_json_chars=5_000))
    text = out.attributes["mastrace.args"]
    assert len(text) <= 5_000
    assert json.loads(text)["model"] == "gpt-4o"


def test_invalid_values_are_coerced() -> None:
    """Values the OTel types do not allow become strings, JSON strings or are dropped."""
    span = ReadableSpan(
        "s",
        attributes={"d": {"a": 1}, "mixed": (1, "a"), "big": 2**70, "raw": b"\xff", "none": None, "ok": 1.5},
    )
    out = prepare_span(span, None, LIMITS)
    assert dict(out.attributes) == {
        "d": '{"a":1}',
        "mixed": '[1,"a"]',
        "big": str(2**70),
        "raw": "<1 bytes: ff>",
        "ok": 1.5,
        semconv.LOGFIRE_JSON_SCHEMA: json_schema({"d": "{", "mixed": "["}),
    }


def test_logfire_keys_are_untouched(
    tracer: Tracer, exporter: InMemorySpanExporter, scrubber: Scrubber
) -> None:
    """Logfire rendering keys keep their exact values; only the free-text message is scrubbed."""
    attrs = {
        semconv.LOGFIRE_MSG: "password=hunter22",
        semconv.LOGFIRE_JSON_SCHEMA: json_schema(["x"]),
        "x": "{}",
    }
    span = _record(tracer, exporter, {**attrs, "password": "hunter22"})
    out = prepare_span(span, scrubber, LIMITS)
    assert "hunter22" not in out.attributes[semconv.LOGFIRE_MSG]
    assert out.attributes[semconv.LOGFIRE_MSG].startswith("password=")
    assert out.attributes[semconv.LOGFIRE_JSON_SCHEMA] == attrs[semconv.LOGFIRE_JSON_SCHEMA]


def test_dropped_attribute_count_is_kept(scrubber: Scrubber) -> None:
    """The number of attributes the SDK dropped survives the rebuild."""
    from opentelemetry.sdk.trace import SpanLimits

    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=2))
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span(
        "s", attributes={"a": 1, "b": 2, "password": "hunter22"}
    ):
        pass
    span = exporter.get_finished_spans()[0]
    out = prepare_span(span, scrubber, LIMITS)
    assert out.dropped_attributes == span.dropped_attributes == 1
    provider.shutdown()


def test_internal_failure_withholds_the_text(
    tracer: Tracer,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A failure inside the transform is logged; the span keeps its ids and times but no text."""

    class BrokenScrubber(Scrubber):
        def scrub_attribute(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("scrubber bug")

    monkeypatch.setenv("MASTRACE_RAISE_INTERNAL", "0")
    span = _record(tracer, exporter, {"password": "hunter22"})
    out = prepare_span(span, BrokenScrubber(), LIMITS)
    assert out.context == span.context and out.start_time == span.start_time
    assert out.end_time == span.end_time
    assert "hunter22" not in repr(dict(out.attributes or {})) and out.name != span.name
    assert dict(out.attributes or {}) == {"mastrace.scrubbed": "<scrubbing failed: RuntimeError>"}
    assert "internal error in prepare_span" in caplog.text


def _is_valid_otel_value(value: Any) -> bool:
    if type(value) in (str, bool, float):
        return True
    if type(value) is int:
        return -(2**63) <= value < 2**63
    if type(value) is tuple:
        kinds = {type(v) for v in value if v is not None}
        return (
            len(kinds) <= 1
            and kinds <= {str, bool, int, float}
            and all(_is_valid_otel_value(v) for v in value if v is not None)
        )
    return False


_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text(max_size=30)
    | st.binary(max_size=10)
    | st.sampled_from([OPENAI_KEY, "password=hunter22", "Bearer abcdefgh12345678"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(["a", "api_key", "input_tokens", "x"]), children, max_size=4)
        | st.frozensets(st.integers(), max_size=4)
        | st.tuples(children)
    ),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.dictionaries(
        st.sampled_from(["k1", "k2", "secret", "massgen.usage.input"]), _values, max_size=4
    )
)
def test_arbitrary_values_yield_valid_attributes(
    values: dict[str, Any], tracer: Tracer, exporter: InMemorySpanExporter, scrubber: Scrubber
) -> None:
    """Whatever goes through coerce_attribute comes out of prepare_span as valid OTel attribute values."""
    attributes = {k: coerced for k, v in values.items() if (coerced := coerce_attribute(v)[0]) is not None}
    span = _record(tracer, exporter, attributes)
    out = prepare_span(span, scrubber, Limits(max_string_chars=200, max_json_chars=400))
    assert all(_is_valid_otel_value(v) for v in out.attributes.values()), dict(out.attributes)
    assert OPENAI_KEY not in out.to_json() and "hunter22" not in out.to_json()
    for key in json.loads(out.attributes.get(semconv.LOGFIRE_JSON_SCHEMA, '{"properties": {}}'))[
        "properties"
    ]:
        json.loads(out.attributes[key])


def test_span_name_message_and_event_names_are_scrubbed(
    tracer: Tracer, exporter: InMemorySpanExporter, scrubber: Scrubber
) -> None:
    """Free text outside attribute values (span name, `logfire.msg`, event names) loses its secrets."""
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    with tracer.start_as_current_span(f"call https://bob:hunter2pass@db.example.com with {key}") as span:
        span.set_attribute(semconv.LOGFIRE_MSG, f"retrying with Bearer abcdefgh12345678 key={key}")
        span.add_event(f"token {key}")
    prepared = prepare_span(exporter.get_finished_spans()[0], scrubber, Limits())
    text = prepared.to_json()
    assert key not in text and "hunter2pass" not in text and "abcdefgh12345678" not in text
    assert prepared.name.startswith("call https://bob:[Scrubbed")
    scrubbed = json.loads((prepared.attributes or {})[semconv.MASTRACE_SCRUBBED])
    assert "span_name" in scrubbed and "otel_events[0].name" in scrubbed


def test_plain_span_names_keep_the_fast_path(
    tracer: Tracer, exporter: InMemorySpanExporter, scrubber: Scrubber
) -> None:
    """A span whose name holds no secret shape is returned as it is."""
    with tracer.start_as_current_span("agent.agent_a.round_0"):
        pass
    span = exporter.get_finished_spans()[0]
    assert prepare_span(span, scrubber, Limits()) is span


def _usage_json(**extra: Any) -> str:
    """An LLM call's `mastrace.usage` text: JSON longer than the scrubber remembers by value."""
    usage = {"cost": 0.0, "units": {"unpriced_calls": 1}, "provider": "openai", "category": None}
    usage.update({"component_name": None, "kind": "llm"})
    kinds = ("input", "output", "total", "cached_input", "cache_creation_input", "reasoning", "audio")
    usage.update({f"{kind}_tokens": 10 for kind in kinds})
    text = json.dumps({**usage, **extra}, separators=(",", ":"))
    assert len(text) > 256
    return text


def test_an_llm_span_keeps_the_fast_path(
    tracer: Tracer, exporter: InMemorySpanExporter, scrubber: Scrubber
) -> None:
    """Finish reasons, model names (tuples of text) and a long plain usage JSON leave the span as it is."""
    attrs = {
        "gen_ai.response.finish_reasons": ("stop", "length"),
        "mastrace.cost.unknown_models": ("my-finetune-2026-01-01",),
        "mastrace.usage": _usage_json(),
    }
    span = _record(tracer, exporter, attrs)
    assert prepare_span(span, scrubber, LIMITS) is span
    assert prepare_span(span, scrubber, LIMITS) is span  # and again, from what the scrubber remembered


@pytest.mark.parametrize(
    "attrs",
    [
        {"gen_ai.response.finish_reasons": ("stop", f"key {OPENAI_KEY}")},
        {"ids": ("a", "b\ud800")},  # a lone surrogate in a short item
        {"ids": ("x" * 300,)},  # an item over the string limit below
        {"mastrace.usage": _usage_json(note=f"key {OPENAI_KEY}")},
        {"mastrace.usage": _usage_json(api_key="hunter22-hunter22")},
        {"mastrace.usage": _usage_json(note="x" * 2_000)},  # over the JSON limit below
        {semconv.LOGFIRE_MSG: _usage_json(note=f"Bearer {OPENAI_KEY}")},
    ],
)
def test_the_fast_path_leaves_nothing_to_the_full_pass(
    tracer: Tracer, exporter: InMemorySpanExporter, scrubber: Scrubber, attrs: dict[str, Any]
) -> None:
    """Secrets in tuple items or long JSON, surrogates and oversized items still get scrubbed or capped."""
    span = _record(tracer, exporter, attrs)
    for _ in range(2):  # the second time with warm caches
        out = prepare_span(span, scrubber, Limits(max_string_chars=256, max_json_chars=1_000))
        text = out.to_json()
        assert out is not span
        assert OPENAI_KEY not in text and "hunter22-hunter22" not in text and "\\ud800" not in text


_TEXTS = st.sampled_from(
    ["stop", "length", "tool_calls", "gpt-4o-mini-2024", OPENAI_KEY, "password=hunter22"]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    items=st.lists(_TEXTS | st.text(max_size=12), max_size=4).map(tuple),
    extra=st.dictionaries(st.sampled_from(["note", "token", "model"]), _TEXTS | st.integers(), max_size=2),
    key=st.sampled_from(["gen_ai.response.finish_reasons", "mastrace.usage", "secret", semconv.LOGFIRE_MSG]),
)
def test_a_span_the_fast_path_keeps_is_one_the_full_pass_keeps(
    items: tuple[str, ...],
    extra: dict[str, Any],
    key: str,
    tracer: Tracer,
    exporter: InMemorySpanExporter,
    scrubber: Scrubber,
) -> None:
    """Whatever tuples and long JSON hold, the quick test passes a span only when the full pass would."""
    from mastrace.pipeline._transform import _Cleaner, _untouched

    span = _record(tracer, exporter, {"items": items, key: _usage_json(**extra)} if items else {key: "x"})
    limits = Limits(max_string_chars=300)
    if _untouched(span, scrubber, limits):
        assert _Cleaner(scrubber, limits).span(span, span.resource) is span
