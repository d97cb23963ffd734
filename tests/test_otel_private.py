"""The OpenTelemetry SDK's private members mastrace relies on are still where `_otel_private` reads
them. An SDK upgrade that moves one fails here, naming it, instead of slowing mastrace down silently
(the public fallbacks) or breaking nesting."""

from __future__ import annotations

import contextvars
import importlib.metadata
from typing import Any

import pytest
from opentelemetry import context, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

from mastrace.tracing import _otel_private as private

SDK = importlib.metadata.version("opentelemetry-sdk")


def _finished_span(*, event: bool = True, link: bool = False) -> Any:
    tracer = TracerProvider().get_tracer("private-members")
    links = [trace.Link(tracer.start_span("other").get_span_context())] if link else None
    span = tracer.start_span("s", attributes={"k": "v"}, links=links)
    if event:
        span.add_event("e")
    span.end()
    return span


def test_the_context_internals_are_where_they_were() -> None:
    assert isinstance(getattr(trace, "_SPAN_KEY", None), str), f"opentelemetry.trace._SPAN_KEY moved ({SDK})"
    var = getattr(getattr(context, "_RUNTIME_CONTEXT", None), "_current_context", None)
    assert isinstance(var, contextvars.ContextVar), f"_RUNTIME_CONTEXT._current_context moved ({SDK})"
    assert private.RUNTIME_CONTEXT_VAR is var and private.SPAN_KEY == trace._SPAN_KEY  # type: ignore[attr-defined]
    # Setting the variable is what attaching a context does: the public API sees it.
    token = var.set(trace.set_span_in_context(trace.NonRecordingSpan(trace.INVALID_SPAN_CONTEXT)))
    try:
        assert isinstance(trace.get_current_span(), trace.NonRecordingSpan)
    finally:
        var.reset(token)


def test_the_span_internals_are_where_they_were() -> None:
    span = _finished_span()
    raw = getattr(span, "_attributes", None)
    assert type(getattr(raw, "_dict", None)) is dict, f"ReadableSpan._attributes._dict moved ({SDK})"
    assert private.span_attributes(span) is raw._dict  # type: ignore[union-attr,arg-type]  # the fast path is taken
    events = getattr(span, "_events", None)
    assert hasattr(events, "_dq"), f"ReadableSpan._events._dq moved ({SDK})"
    assert [e.name for e in private.span_sequence(span, "_events", "events")] == ["e"]  # type: ignore[arg-type]
    assert hasattr(getattr(span, "_links", None), "_dq"), f"ReadableSpan._links._dq moved ({SDK})"
    assert not private.span_is_bare(span)  # it has an event
    bare = _finished_span(event=False)
    assert private.span_is_bare(bare)
    assert not private.span_is_bare(_finished_span(event=False, link=True))
    # Another layout (a span rebuilt as a plain ReadableSpan) is read through the public properties.
    assert private.span_is_bare(ReadableSpan("copy", bare.context))


def test_the_provider_internals_are_where_they_were() -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "before"}))
    tracer = provider.get_tracer("t")
    for member in ("_resource", "_tracers", "_tracers_lock"):
        assert hasattr(provider, member), f"TracerProvider.{member} moved ({SDK})"
    assert hasattr(tracer, "_set_resource"), f"Tracer._set_resource moved ({SDK})"
    private.replace_provider_resource(provider, Resource.create({"service.name": "after"}))
    span = tracer.start_span("s")
    span.end()
    assert span.resource.attributes["service.name"] == "after"  # type: ignore[attr-defined]


def test_the_global_provider_internals_are_where_they_were(monkeypatch: pytest.MonkeyPatch) -> None:
    for member in ("_TRACER_PROVIDER", "_TRACER_PROVIDER_SET_ONCE"):
        assert hasattr(trace, member), f"opentelemetry.trace.{member} moved ({SDK})"
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", trace._TRACER_PROVIDER)  # type: ignore[attr-defined]
    monkeypatch.setattr(trace, "_TRACER_PROVIDER_SET_ONCE", trace._TRACER_PROVIDER_SET_ONCE)  # type: ignore[attr-defined]
    private.reset_global_providers()
    first, second = TracerProvider(), TracerProvider()
    trace.set_tracer_provider(first)
    trace.set_tracer_provider(second)  # refused: set once
    assert trace.get_tracer_provider() is first


def test_logfire_keeps_the_flag_that_lets_it_install_a_provider_again() -> None:
    from logfire._internal import config

    assert hasattr(config.GLOBAL_CONFIG, "_has_set_providers"), (
        "logfire's GLOBAL_CONFIG._has_set_providers moved"
    )
