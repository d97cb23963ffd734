"""Fast read access to a finished span's attributes (shared by the transform and the store writer)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["span_attributes"]


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
