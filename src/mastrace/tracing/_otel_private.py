"""Every use of the OpenTelemetry SDK's (and Logfire's) private members, in one place.

mastrace reads a few private members for speed (the span's backing attribute dict, the deque behind
events and links, the ContextVar behind the runtime context) and writes a few where no public API
exists (a provider's resource on reconfigure, the global provider in tests). Each has a public
fallback where one exists. `PRIVATE_MEMBERS` lists them; `tests/test_otel_private.py` fails, naming
the member, when an SDK upgrade moves one.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

__all__ = [
    "PRIVATE_MEMBERS",
    "RUNTIME_CONTEXT_VAR",
    "SPAN_KEY",
    "meter_provider_is_set",
    "replace_provider_resource",
    "reset_global_providers",
    "span_attributes",
    "span_is_bare",
    "span_sequence",
]

PRIVATE_MEMBERS: tuple[str, ...] = (
    "opentelemetry.trace._SPAN_KEY",
    "opentelemetry.context._RUNTIME_CONTEXT._current_context",
    "opentelemetry.trace._TRACER_PROVIDER",
    "opentelemetry.trace._TRACER_PROVIDER_SET_ONCE",
    "opentelemetry.metrics._internal._METER_PROVIDER, _METER_PROVIDER_SET_ONCE, _ProxyMeterProvider",
    "ReadableSpan._attributes (BoundedAttributes._dict)",
    "ReadableSpan._events / _links (BoundedList._dq)",
    "TracerProvider._resource, _tracers, _tracers_lock; Tracer._set_resource",
    "logfire._internal.config.GLOBAL_CONFIG._has_set_providers",
)
"""What this module reaches into, for the upgrade test and for readers."""

SPAN_KEY: str = trace._SPAN_KEY  # type: ignore[attr-defined]
"""The key under which a Context holds its current span."""

RUNTIME_CONTEXT_VAR: contextvars.ContextVar[Context] | None
"""The ContextVar the SDK's default runtime context keeps the current Context in (None: custom)."""
try:
    from opentelemetry.context import _RUNTIME_CONTEXT

    RUNTIME_CONTEXT_VAR = _RUNTIME_CONTEXT._current_context  # type: ignore[attr-defined]
except (ImportError, AttributeError):  # pragma: no cover - a custom runtime context
    RUNTIME_CONTEXT_VAR = None


def span_attributes(span: ReadableSpan) -> Mapping[str, Any]:
    """The span's attributes, read from the SDK's backing dict when there is one (do not mutate it).

    `ReadableSpan.attributes` is a read-only proxy over `BoundedAttributes`, which iterates through
    the `Mapping` mixin one call per key; the plain dict behind it is several times faster to walk
    and is what the C JSON encoder serialises directly.
    """
    raw = getattr(span, "_attributes", None)
    if type(raw) is dict:
        return raw
    inner = getattr(raw, "_dict", None)
    if type(inner) is dict:
        return inner
    return dict(span.attributes or {})


def span_sequence(span: ReadableSpan, private: str, public: str) -> Sequence[Any]:
    """The span's events (`_events`, `events`) or links without the tuple copy the public property
    makes per access."""
    raw = getattr(span, private, None)
    if raw is None:
        return getattr(span, public) or ()
    # The SDK's BoundedList wraps a deque whose len() is C-level; its own __len__ is Python.
    return getattr(raw, "_dq", raw)  # type: ignore[no-any-return]


def span_is_bare(span: ReadableSpan) -> bool:
    """Whether the span has neither events nor links (the SDK's `BoundedList`s are tested through the
    deque inside them: their own `__len__` is a Python call)."""
    try:
        return not span._events._dq and not span._links._dq  # type: ignore[attr-defined]
    except AttributeError:  # not the SDK's layout: the public properties
        return not span.events and not span.links


def replace_provider_resource(provider: TracerProvider, resource: Resource) -> None:
    """Give a provider (and the tracers it cached, which hold the resource too) a new resource."""
    lock = getattr(provider, "_tracers_lock", None)
    with lock if lock is not None else contextlib.nullcontext():
        provider._resource = resource
        for tracer in getattr(provider, "_tracers", {}).values():
            if hasattr(tracer, "_set_resource"):
                tracer._set_resource(resource)


def meter_provider_is_set() -> bool:
    """Whether an application (or Logfire) set the global MeterProvider (else it is the API's proxy)."""
    from opentelemetry.metrics import _internal as metrics_internal

    return not isinstance(metrics_internal.get_meter_provider(), metrics_internal._ProxyMeterProvider)


def reset_global_providers() -> None:
    """Forget the global tracer and meter providers; the next `logfire.configure()` installs its own."""
    from opentelemetry.metrics import _internal as metrics_internal
    from opentelemetry.util._once import Once

    trace._TRACER_PROVIDER = None
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    metrics_internal._METER_PROVIDER = None
    metrics_internal._METER_PROVIDER_SET_ONCE = Once()
    logfire_config = sys.modules.get("logfire._internal.config")
    if logfire_config is not None:
        logfire_config.GLOBAL_CONFIG._has_set_providers = False
