"""OTLP/JSON as the OpenTelemetry specification writes it, decoded into SDK spans.

OTLP/JSON is the protobuf JSON mapping with a few rules of its own, which senders such as the
OpenTelemetry JavaScript exporter follow: trace and span ids are hex strings (not base64), enums are
integers (names are accepted too), 64-bit integers may be numbers or strings, keys are lowerCamelCase
(the proto field names are accepted too) and unknown fields are ignored. `AnyValue` comes in all its
forms: string, bool, int, double (with `NaN` and the infinities as strings), bytes (base64), array,
key-value list, and empty. Ids in the protobuf JSON mapping's base64 are read too.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from ..tracing._snapshot import loads_json
from ._intake import sequence_value

__all__ = ["OtlpJsonError", "json_spans"]

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_KINDS = {
    1: SpanKind.INTERNAL,
    2: SpanKind.SERVER,
    3: SpanKind.CLIENT,
    4: SpanKind.PRODUCER,
    5: SpanKind.CONSUMER,
}
_KIND_NAMES = {f"SPAN_KIND_{kind.name}": number for number, kind in _KINDS.items()}
_STATUS = {0: StatusCode.UNSET, 1: StatusCode.OK, 2: StatusCode.ERROR}
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class OtlpJsonError(ValueError):
    """A document, or one span of it, that is not OTLP/JSON."""


def _get(obj: Mapping[str, Any], camel: str, snake: str | None = None, default: Any = None) -> Any:
    """`obj[camel]`, else `obj[snake]` (the proto field name, which parsers accept too)."""
    if camel in obj:
        return obj[camel]
    if snake is not None and snake in obj:
        return obj[snake]
    return default


def _list(obj: Mapping[str, Any], camel: str, snake: str | None = None) -> list[Any]:
    value = _get(obj, camel, snake, [])
    if value is None:
        return []
    if not isinstance(value, list):
        raise OtlpJsonError(f"{camel} must be a list")
    return value


def _object(value: Any, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise OtlpJsonError(f"{what} must be an object")
    return value


def _int(value: Any, what: str) -> int:
    """A 64-bit integer given as a number or a decimal string."""
    if isinstance(value, bool):
        raise OtlpJsonError(f"{what} must be an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise OtlpJsonError(f"{what} must be an integer, not {value!r}")


def _id(value: Any, size: int, what: str) -> int:
    """An id of `size` bytes: hex (the OTLP/JSON rule) or base64 (the protobuf JSON mapping)."""
    if value is None or value == "":
        return 0
    if not isinstance(value, str):
        raise OtlpJsonError(f"{what} must be a string")
    raw: bytes | None = None
    if len(value) == 2 * size:
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raw = None
    if raw is None:
        try:
            raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
        except (binascii.Error, ValueError):
            raw = None
    if raw is None or len(raw) != size:
        raise OtlpJsonError(f"{what} {value!r} is not {size} bytes in hex")
    return int.from_bytes(raw, "big")


def _enum(value: Any, names: Mapping[str, int], what: str) -> int:
    if isinstance(value, str) and value in names:
        return names[value]
    if value is None:
        return 0
    return _int(value, what)


def any_value(value: Any) -> Any:
    """The Python value of an OTLP/JSON `AnyValue` (None for an empty one)."""
    if not isinstance(value, dict):
        raise OtlpJsonError('an attribute value must be an object such as {"stringValue": "…"}')
    if "stringValue" in value or "string_value" in value:
        text = _get(value, "stringValue", "string_value")
        return text if isinstance(text, str) else str(text)
    if "boolValue" in value or "bool_value" in value:
        flag = _get(value, "boolValue", "bool_value")
        if not isinstance(flag, bool):
            raise OtlpJsonError("boolValue must be true or false")
        return flag
    if "intValue" in value or "int_value" in value:
        return _int(_get(value, "intValue", "int_value"), "intValue")
    if "doubleValue" in value or "double_value" in value:
        number = _get(value, "doubleValue", "double_value")
        if isinstance(number, str) and number in _FLOATS:
            return _FLOATS[number]
        if isinstance(number, (int, float)) and not isinstance(number, bool):
            return float(number)
        raise OtlpJsonError("doubleValue must be a number")
    if "bytesValue" in value or "bytes_value" in value:
        data = _get(value, "bytesValue", "bytes_value")
        try:
            return base64.b64encode(base64.b64decode(str(data), validate=True)).decode()
        except (binascii.Error, ValueError):
            raise OtlpJsonError("bytesValue must be base64") from None
    if "arrayValue" in value or "array_value" in value:
        items = [
            any_value(v)
            for v in _list(_object(_get(value, "arrayValue", "array_value"), "arrayValue"), "values")
        ]
        return sequence_value([i for i in items if i is not None])
    if "kvlistValue" in value or "kvlist_value" in value:
        pairs = _list(_object(_get(value, "kvlistValue", "kvlist_value"), "kvlistValue"), "values")
        return json.dumps(attributes(pairs), default=str)
    return None  # an empty AnyValue


def attributes(pairs: list[Any]) -> dict[str, Any]:
    """OTLP/JSON `KeyValue`s as a dict (empty values left out)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        if not isinstance(pair, dict) or not isinstance(pair.get("key"), str):
            raise OtlpJsonError("an attribute must be an object with a string key")
        value = any_value(pair.get("value") or {})
        if value is not None:
            out[pair["key"]] = value
    return out


def _span(raw: Any, resource: Resource, scope: InstrumentationScope) -> ReadableSpan:
    span = _object(raw, "a span")
    trace_id = _id(_get(span, "traceId", "trace_id"), 16, "traceId")
    span_id = _id(_get(span, "spanId", "span_id"), 8, "spanId")
    if not trace_id or not span_id:
        raise OtlpJsonError("a span with an all-zero or missing trace or span id")
    parent_id = _id(_get(span, "parentSpanId", "parent_span_id"), 8, "parentSpanId")
    start = _int(_get(span, "startTimeUnixNano", "start_time_unix_nano", 0), "startTimeUnixNano")
    end = _int(_get(span, "endTimeUnixNano", "end_time_unix_nano", 0), "endTimeUnixNano") or start
    status = _object(_get(span, "status"), "status")
    code = _STATUS.get(_enum(_get(status, "code"), _STATUS_NAMES, "status.code"), StatusCode.UNSET)
    message = status.get("message")
    events = [
        Event(
            str(_object(e, "an event").get("name", "")),
            attributes(_list(e, "attributes")),
            _int(_get(e, "timeUnixNano", "time_unix_nano", 0), "timeUnixNano"),
        )
        for e in _list(span, "events")
    ]
    links = [
        Link(
            SpanContext(
                _id(_get(lk, "traceId", "trace_id"), 16, "link traceId"),
                _id(_get(lk, "spanId", "span_id"), 8, "link spanId"),
                is_remote=True,
                trace_flags=_SAMPLED,
            ),
            attributes(_list(lk, "attributes")),
        )
        for lk in (_object(link, "a link") for link in _list(span, "links"))
    ]
    return ReadableSpan(
        name=str(span.get("name", "")),
        context=SpanContext(trace_id, span_id, is_remote=False, trace_flags=_SAMPLED),
        parent=SpanContext(trace_id, parent_id, is_remote=True, trace_flags=_SAMPLED) if parent_id else None,
        resource=resource,
        attributes=attributes(_list(span, "attributes")),
        events=events,
        links=links,
        kind=_KINDS.get(_enum(_get(span, "kind"), _KIND_NAMES, "kind"), SpanKind.INTERNAL),
        status=Status(code, str(message) if message and code is StatusCode.ERROR else None),
        start_time=start,
        end_time=end,
        instrumentation_scope=scope,
    )


def json_spans(body: bytes) -> Iterator[ReadableSpan | OtlpJsonError]:
    """The spans of an OTLP/JSON `ExportTraceServiceRequest`, one by one; a span that is not valid
    comes as its error (it is rejected, the others are taken).

    Raises:
        OtlpJsonError: The document itself is not an OTLP/JSON request (checked before any span).
    """
    try:
        document = loads_json(body)
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        raise OtlpJsonError(f"not JSON: {exc}") from None
    groups = _list(_object(document, "the request"), "resourceSpans", "resource_spans")
    for group in groups:
        _object(group, "resourceSpans[]")
    return _spans(groups)


def _spans(groups: list[Any]) -> Iterator[ReadableSpan | OtlpJsonError]:
    for group in groups:
        try:
            resource_raw = _object(group.get("resource"), "resource")
            resource = Resource(
                attributes(_list(resource_raw, "attributes")), _get(group, "schemaUrl", "schema_url") or None
            )
            scopes = _list(group, "scopeSpans", "scope_spans")
        except OtlpJsonError as exc:
            yield exc
            continue
        for scoped in scopes:
            try:
                scoped = _object(scoped, "scopeSpans[]")
                raw_scope = _object(scoped.get("scope"), "scope")
                scope = InstrumentationScope(
                    str(raw_scope.get("name", "")),
                    raw_scope.get("version") or None,
                    _get(scoped, "schemaUrl", "schema_url") or None,
                    attributes(_list(raw_scope, "attributes")) or None,
                )
                spans = _list(scoped, "spans")
            except OtlpJsonError as exc:
                yield exc
                continue
            for raw in spans:
                try:
                    yield _span(raw, resource, scope)
                except OtlpJsonError as exc:
                    yield exc
