"""Convert a trace's spans to OTLP/JSON or to Jaeger's JSON (the format Jaeger UI uploads).

OTLP/JSON follows the `ExportTraceServiceRequest` JSON mapping (hex ids, nanosecond timestamps
as strings). The Jaeger output is the shape of Jaeger's `/api/traces` response:
`{"data": [{"traceID", "spans", "processes"}]}`, which Jaeger UI's "JSON File" upload reads.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from .. import semconv
from ..analysis import SpanRow

__all__ = ["to_jaeger_json", "to_otlp_json"]

_OTLP_KINDS = {"unspecified": 0, "internal": 1, "server": 2, "client": 3, "producer": 4, "consumer": 5}
_OTLP_STATUS = {"UNSET": 0, "OK": 1, "ERROR": 2}


def _event_ns(event: dict[str, Any], fallback_us: int) -> int:
    stamp = event.get("timestamp")
    if isinstance(stamp, str):
        try:
            moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
            return int(moment.timestamp() * 1_000_000) * 1000
        except ValueError:
            pass
    return fallback_us * 1000


def _logfire_attributes(span: SpanRow) -> dict[str, Any]:
    """The attributes as sent, with the Logfire keys the store keeps in columns put back."""
    attrs = dict(span.attributes)
    if span.span_type == "log":
        attrs.setdefault(semconv.LOGFIRE_SPAN_TYPE, "log")
        if span.message is not None:
            attrs.setdefault(semconv.LOGFIRE_MSG, span.message)
    if span.level != 9:
        attrs.setdefault(semconv.LOGFIRE_LEVEL_NUM, span.level)
    return attrs


# -- OTLP/JSON --------------------------------------------------------------------------------------
def _otlp_value(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if (
        isinstance(value, list)
        and value
        and all(type(v) is type(value[0]) for v in value)
        and isinstance(value[0], (bool, int, float, str))
    ):
        return {"arrayValue": {"values": [_otlp_value(v) for v in value]}}
    # Objects and mixed lists were JSON strings when they were recorded: send them back as such.
    return {"stringValue": json.dumps(value, ensure_ascii=False, separators=(",", ":"))}


def _otlp_attributes(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key, value in attrs.items():
        encoded = _otlp_value(value)
        if encoded is not None:
            out.append({"key": key, "value": encoded})
    return out


def _otlp_span(span: SpanRow) -> dict[str, Any]:
    status: dict[str, Any] = {"code": _OTLP_STATUS.get(span.otel_status_code, 0)}
    if span.otel_status_message:
        status["message"] = span.otel_status_message
    out: dict[str, Any] = {
        "traceId": span.trace_id,
        "spanId": span.span_id,
        "name": span.name,
        "kind": _OTLP_KINDS.get(span.otel_kind, 1),
        "startTimeUnixNano": str(span.start_us * 1000),
        "endTimeUnixNano": str(span.end_us * 1000),
        "attributes": _otlp_attributes(_logfire_attributes(span)),
        "events": [
            {
                "timeUnixNano": str(_event_ns(e, span.start_us)),
                "name": str(e.get("name", "")),
                "attributes": _otlp_attributes(e.get("attributes") or {}),
            }
            for e in span.events
        ],
        "links": [
            {
                "traceId": str(link.get("trace_id", "")),
                "spanId": str(link.get("span_id", "")),
                "attributes": _otlp_attributes(link.get("attributes") or {}),
            }
            for link in span.links
        ],
        "status": status,
    }
    if span.parent_span_id:
        out["parentSpanId"] = span.parent_span_id
    return out


def _resource_attributes(span: SpanRow) -> dict[str, Any]:
    attrs = dict(span.resource)
    if span.service_name and "service.name" not in attrs:
        attrs["service.name"] = span.service_name
    return attrs


def to_otlp_json(spans: Sequence[SpanRow]) -> dict[str, Any]:
    """An OTLP/JSON `ExportTraceServiceRequest` holding `spans`, grouped by resource and scope."""
    resources: dict[str, tuple[dict[str, Any], dict[tuple[str, str], list[dict[str, Any]]]]] = {}
    for span in spans:
        attrs = _resource_attributes(span)
        key = json.dumps(attrs, sort_keys=True, default=str)
        _, scopes = resources.setdefault(key, (attrs, {}))
        scopes.setdefault((span.scope_name or "", span.scope_version or ""), []).append(_otlp_span(span))
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _otlp_attributes(attrs)},
                "scopeSpans": [
                    {"scope": {"name": name, **({"version": version} if version else {})}, "spans": items}
                    for (name, version), items in scopes.items()
                ],
            }
            for attrs, scopes in resources.values()
        ]
    }


# -- Jaeger JSON ------------------------------------------------------------------------------------
def _jaeger_tag(key: str, value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return {"key": key, "type": "bool", "value": value}
    if isinstance(value, int):
        return {"key": key, "type": "int64", "value": value}
    if isinstance(value, float):
        return {"key": key, "type": "float64", "value": value}
    if isinstance(value, str):
        return {"key": key, "type": "string", "value": value}
    return {
        "key": key,
        "type": "string",
        "value": json.dumps(value, ensure_ascii=False, separators=(",", ":")),
    }


def _jaeger_tags(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    return [tag for key, value in attrs.items() if (tag := _jaeger_tag(key, value)) is not None]


def _span_tags(span: SpanRow) -> list[dict[str, Any]]:
    extra: dict[str, Any] = {"span.kind": span.otel_kind}
    if span.scope_name:
        extra["otel.scope.name"] = span.scope_name
    if span.scope_version:
        extra["otel.scope.version"] = span.scope_version
    if span.otel_status_code != "UNSET":
        extra["otel.status_code"] = span.otel_status_code
    if span.otel_status_message:
        extra["otel.status_description"] = span.otel_status_message
    if span.is_error:
        extra["error"] = True  # Jaeger UI marks spans with this tag as failed
    return _jaeger_tags({**_logfire_attributes(span), **extra})


def _references(span: SpanRow) -> list[dict[str, str]]:
    refs = []
    if span.parent_span_id:
        refs.append({"refType": "CHILD_OF", "traceID": span.trace_id, "spanID": span.parent_span_id})
        # Jaeger UI takes the first CHILD_OF reference as the parent; links come after it.
        for link in span.links:
            refs.append(
                {
                    "refType": "FOLLOWS_FROM",
                    "traceID": str(link.get("trace_id", "")),
                    "spanID": str(link.get("span_id", "")),
                }
            )
    return refs


def _jaeger_span(span: SpanRow, process_id: str) -> dict[str, Any]:
    return {
        "traceID": span.trace_id,
        "spanID": span.span_id,
        "flags": 1,
        "operationName": span.name,
        "references": _references(span),
        "startTime": span.start_us,
        "duration": max(0, span.end_us - span.start_us),
        "tags": _span_tags(span),
        "logs": [
            {
                "timestamp": _event_ns(e, span.start_us) // 1000,
                "fields": _jaeger_tags({"event": e.get("name", ""), **(e.get("attributes") or {})}),
            }
            for e in span.events
        ],
        "processID": process_id,
        "warnings": None,
    }


def to_jaeger_json(spans: Sequence[SpanRow]) -> dict[str, Any]:
    """Jaeger's JSON trace format for `spans` (one entry in `data` per trace id)."""
    traces: dict[str, tuple[list[dict[str, Any]], dict[str, dict[str, Any]], dict[str, str]]] = {}
    for span in spans:
        items, processes, process_ids = traces.setdefault(span.trace_id, ([], {}, {}))
        attrs = _resource_attributes(span)
        key = json.dumps(attrs, sort_keys=True, default=str)
        if key not in process_ids:
            pid = process_ids[key] = f"p{len(process_ids) + 1}"
            service = str(attrs.pop("service.name", None) or "unknown_service")
            processes[pid] = {"serviceName": service, "tags": _jaeger_tags(attrs)}
        items.append(_jaeger_span(span, process_ids[key]))
    data = [
        {"traceID": trace_id, "spans": items, "processes": processes, "warnings": None}
        for trace_id, (items, processes, _) in traces.items()
    ]
    return {"data": data, "total": 0, "limit": 0, "offset": 0, "errors": None}
