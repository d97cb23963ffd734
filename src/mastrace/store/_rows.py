"""Turn finished OpenTelemetry spans into NDJSON lines of the local store.

This runs on the export thread for every span, so it is written for speed: the parts that depend
only on the span's resource or instrumentation scope are encoded once and cached by object
identity, fields that are usually empty are left out of the line, and the line itself is one
f-string. Anything a fast path cannot encode (NaN, an unexpected type) goes through a slower,
sanitising path instead of failing the span.

The stored fields and the `records` columns derived from them are described in `_schema.py`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from json.encoder import encode_basestring
from typing import Any, NamedTuple

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from .. import semconv
from ..tracing._otel_private import span_attributes, span_sequence
from ..tracing._snapshot import dumps_json
from ._bound import DEFAULT_MAX_ROW_BYTES, bound_line
from ._schema import SKELETON_BASE

__all__ = ["EncodedBatch", "RowEncoder", "span_to_dict"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_STATUS_NAMES = {StatusCode.UNSET: "UNSET", StatusCode.OK: "OK", StatusCode.ERROR: "ERROR"}
_KIND_NAMES = {kind: kind.name.lower() for kind in SpanKind}
_UNSET, _ERROR, _INTERNAL = StatusCode.UNSET, StatusCode.ERROR, SpanKind.INTERNAL
# Logfire turns these attributes into columns of their own, so they leave `attributes`.
_COLUMN_KEYS = frozenset(
    {
        semconv.LOGFIRE_JSON_SCHEMA,
        semconv.LOGFIRE_MSG,
        semconv.LOGFIRE_SPAN_TYPE,
        semconv.LOGFIRE_TAGS,
        semconv.LOGFIRE_LEVEL_NUM,
    }
)
_CACHE_LIMIT = 256
_BASE = SKELETON_BASE.decode("ascii")
_NOTHING = object()


class EncodedBatch(NamedTuple):
    """One batch of spans as store lines.

    Attributes:
        data: Every encoded line, as UTF-8 NDJSON.
        roots: The lines of the root spans (no parent) among them, in the same order.
        encoded: How many spans were encoded.
        failed: How many spans could not be encoded (they are in neither `data` nor `roots`).
        skeleton: A skeleton line for each line of `data` (see `_schema.SKELETON_FIELDS`), with
            `SKELETON_BASE` where the size of the segment before `data` goes.
        truncated: How many lines were over the row bound and were shrunk to fit (see `_bound`).
    """

    data: bytes
    roots: bytes
    encoded: int
    failed: int
    skeleton: bytes = b""
    truncated: int = 0


def _fields(mapping: Mapping[str, Any]) -> str:
    """`mapping` encoded as JSON object members (no braces), with a leading comma when non-empty."""
    return "," + dumps_json(mapping)[1:-1] if mapping else ""


def _iso(ns: int) -> str:
    return (_EPOCH + timedelta(microseconds=ns // 1000)).isoformat().replace("+00:00", "Z")


def _resource_fields(resource: Any) -> str:
    attrs = dict(resource.attributes) if resource is not None else {}
    fields: dict[str, Any] = {
        "service_namespace": attrs.get("service.namespace"),
        "service_name": attrs.get("service.name"),
        "service_version": attrs.get("service.version"),
        "service_instance_id": attrs.get("service.instance.id"),
        "otel_resource_attributes": attrs,
    }
    pid = attrs.get("process.pid")
    if isinstance(pid, int) and not isinstance(pid, bool):
        fields["process_pid"] = pid
    for key in ("service_namespace", "service_name", "service_version", "service_instance_id"):
        value = fields[key]
        if value is None:
            del fields[key]
        elif not isinstance(value, str):
            fields[key] = str(value)
    return _fields(fields)


def _scope_fields(scope: Any) -> str:
    if scope is None:
        return ""
    fields = {
        "otel_scope_name": scope.name,
        "otel_scope_version": scope.version or None,
        "otel_scope_attributes": dict(scope.attributes or {}) or None,
    }
    return _fields({k: v for k, v in fields.items() if v is not None})


def _event_fields(events: Sequence[Any], extras: dict[str, Any]) -> bool:
    """Add `otel_events` and the last exception's details to `extras`; return whether one exists."""
    encoded = []
    exception = None
    for event in events:
        attrs = dict(event.attributes or {})
        encoded.append({"name": event.name, "timestamp": _iso(event.timestamp), "attributes": attrs})
        if event.name == "exception":
            exception = attrs
    extras["otel_events"] = encoded
    if exception is None:
        return False
    extras["is_exception"] = True
    for column, key in (
        ("exception_type", semconv.EXCEPTION_TYPE),
        ("exception_message", semconv.EXCEPTION_MESSAGE),
        ("exception_stacktrace", semconv.EXCEPTION_STACKTRACE),
    ):
        if key in exception:
            extras[column] = str(exception[key])
    return True


def _link_list(links: Sequence[Any]) -> list[dict[str, Any]]:
    return [
        {
            "trace_id": f"{link.context.trace_id:032x}",
            "span_id": f"{link.context.span_id:016x}",
            "attributes": dict(link.attributes or {}),
        }
        for link in links
    ]


class RowEncoder:
    """Encodes `ReadableSpan`s as store lines, caching the per-resource and per-scope parts.

    It may be shared between threads: at worst two threads build the same cache entry.

    Args:
        max_row_bytes: The most bytes a line may take (see `_bound`); a longer one is shrunk.
    """

    def __init__(self, max_row_bytes: int = DEFAULT_MAX_ROW_BYTES) -> None:
        self.max_row_bytes = max_row_bytes
        self._resources: dict[int, tuple[Any, str]] = {}
        self._scopes: dict[int, tuple[Any, str]] = {}
        self._schemas: dict[str, tuple[str, ...]] = {}
        # The scope and resource of the previous span and their encoded fields: consecutive spans
        # nearly always share both, and two identity tests cost less than two cache look-ups.
        self._last: tuple[Any, Any, str] = (_NOTHING, _NOTHING, "")
        # Likewise the trace id: formatting 128 bits as hex costs more than comparing them.
        self._last_trace: tuple[int, str] = (-1, "")

    def encode(self, spans: Iterable[ReadableSpan], created_ns: int) -> tuple[bytes, int]:
        """Encode `spans` as UTF-8 NDJSON; return the bytes and how many spans could not be encoded."""
        batch = self.encode_batch(spans, created_ns)
        return batch.data, batch.failed

    def encode_batch(self, spans: Iterable[ReadableSpan], created_ns: int) -> EncodedBatch:
        """Encode `spans` as UTF-8 NDJSON, keeping the lines of root spans apart as well."""
        lines: list[str] = []
        roots: list[str] = []
        skeleton: list[str] = []
        failed = truncated = 0
        position = 0
        encode = self._encode
        limit = self.max_row_bytes
        created = str(created_ns)  # the same for the whole batch
        for span in spans:
            try:
                text, bones = encode(span, created_ns, created, position)
                # Lone surrogates cannot be UTF-8; "replace" keeps the JSON valid (they sit inside strings).
                size = len(text) if text.isascii() else len(text.encode("utf-8", "replace"))
                if size > limit:  # rare: shrunk so that every reader can read it (its skeleton holds)
                    text = bound_line(text, limit)
                    size = len(text.encode("utf-8", "replace"))
                    truncated += 1
            except Exception:
                failed += 1
                continue
            if not text:
                failed += 1
                continue
            lines.append(text)
            skeleton.append(bones)
            position += size
            if span.parent is None:
                roots.append(text)
        return EncodedBatch(
            "".join(lines).encode("utf-8", "replace"),
            "".join(roots).encode("utf-8", "replace"),
            len(lines),
            failed,
            "".join(skeleton).encode("ascii"),
            truncated,
        )

    def line(self, span: ReadableSpan, created_ns: int) -> str:
        """One NDJSON line (with its newline) for `span`, within the row bound."""
        text = self._encode(span, created_ns, str(created_ns), 0)[0]
        if len(text.encode("utf-8", "replace")) > self.max_row_bytes:
            text = bound_line(text, self.max_row_bytes)
        return text

    def _encode(self, span: ReadableSpan, created_ns: int, created: str, position: int) -> tuple[str, str]:
        """`span`'s line, and its skeleton line for a line at `position` in its batch (`created` is
        `created_ns` as text)."""
        ctx = span.context
        parent = span.parent
        attrs = span_attributes(span)
        extras: dict[str, Any] = {}
        level = None
        span_type = "span"
        if not _COLUMN_KEYS.isdisjoint(attrs):
            attrs, level, span_type = self._logfire_columns(attrs, extras)
        events = span_sequence(span, "_events", "events")
        has_exception = _event_fields(events, extras) if events else False
        links = span_sequence(span, "_links", "links")
        if links:
            extras["otel_links"] = _link_list(links)
        status = span.status
        code = status.status_code
        if status.description:
            extras["otel_status_message"] = status.description
        if level is None:
            level = semconv.LEVEL_ERROR if has_exception or code is _ERROR else semconv.LEVEL_INFO
        # Identity tests: enum members hash in Python, which costs more than the rest of the line.
        code_name = "UNSET" if code is _UNSET else _STATUS_NAMES.get(code, "UNSET")
        kind = span.kind
        kind_name = "internal" if kind is _INTERNAL else _KIND_NAMES.get(kind, "internal")
        # Ids as hex through `to_bytes` (a third of the time of a format spec), each number formatted
        # once for both lines; an id beyond 64 bits fails the span rather than writing a bad line.
        if parent is None:
            parent_id = parent_field = ""
        else:
            parent_id = str(parent.span_id)
            parent_field = f'"parent_span_id":"{parent.span_id.to_bytes(8, "big").hex()}",'
        start = span.start_time or created_ns
        end = span.end_time or start
        start_text, end_text = str(start), str(end)
        scope, resource = span.instrumentation_scope, span.resource
        last = self._last
        tail = last[2] if last[0] is scope and last[1] is resource else self._tail(scope, resource)
        trace_id = ctx.trace_id
        last_trace = self._last_trace
        if last_trace[0] == trace_id:
            trace_hex = last_trace[1]
        else:
            trace_hex = trace_id.to_bytes(16, "big").hex()
            self._last_trace = (trace_id, trace_hex)
        span_id = ctx.span_id
        error = has_exception or code is _ERROR or level >= semconv.LEVEL_ERROR
        return (
            f'{{"trace_id":"{trace_hex}","span_id":"{span_id.to_bytes(8, "big").hex()}",'
            f'{parent_field}"start_ns":{start_text},"end_ns":{end_text},"created_ns":{created},'
            f'"span_name":{encode_basestring(span.name)},"level":{level},"span_type":"{span_type}",'
            f'"otel_kind":"{kind_name}","otel_status_code":"{code_name}","attributes":{dumps_json(attrs)}'
            f"{_fields(extras) if extras else ''}{tail}}}\n"
        ), (
            f"{position},{_BASE},{trace_hex},{span_id},{parent_id},{start_text},{end_text},"
            f"{1 if error else 0}\n"
        )

    def _tail(self, scope: Any, resource: Any) -> str:
        """The encoded scope and resource fields, remembered for the next span."""
        tail = self._scope(scope) + self._resource(resource)
        self._last = (scope, resource, tail)  # one assignment: other threads see all or nothing
        return tail

    def _logfire_columns(
        self, attrs: Mapping[str, Any], extras: dict[str, Any]
    ) -> tuple[dict[str, Any], int | None, str]:
        """Move Logfire's column attributes into `extras`; expand JSON strings named in the schema."""
        out = {k: v for k, v in attrs.items() if k not in _COLUMN_KEYS}
        level = attrs.get(semconv.LOGFIRE_LEVEL_NUM)
        if level is not None:
            try:
                level = int(level)
            except (TypeError, ValueError):
                level = None
        span_type = "log" if attrs.get(semconv.LOGFIRE_SPAN_TYPE) == "log" else "span"
        msg = attrs.get(semconv.LOGFIRE_MSG)
        if msg is not None:
            extras["message"] = str(msg)
        tags = attrs.get(semconv.LOGFIRE_TAGS)
        if tags:
            extras["tags"] = [str(t) for t in ((tags,) if isinstance(tags, str) else tags)]
        schema = attrs.get(semconv.LOGFIRE_JSON_SCHEMA)
        if isinstance(schema, str):
            extras["attributes_json_schema"] = schema
            for key in self._schema_keys(schema):
                value = out.get(key)
                if type(value) is str and value[:1] in ("{", "["):
                    with contextlib.suppress(ValueError, RecursionError):
                        out[key] = json.loads(value)
        return out, level, span_type

    def _schema_keys(self, schema: str) -> tuple[str, ...]:
        keys = self._schemas.get(schema)
        if keys is None:
            try:
                properties = json.loads(schema).get("properties") or {}
                keys = tuple(properties) if isinstance(properties, dict) else ()
            except (ValueError, AttributeError):
                keys = ()
            if len(self._schemas) >= _CACHE_LIMIT:
                self._schemas.clear()
            self._schemas[schema] = keys
        return keys

    def _resource(self, resource: Any) -> str:
        entry = self._resources.get(id(resource))
        if entry is None or entry[0] is not resource:
            # Keeping the object in the entry stops its id from being reused while cached.
            if len(self._resources) >= _CACHE_LIMIT:
                self._resources.clear()
            entry = self._resources[id(resource)] = (resource, _resource_fields(resource))
        return entry[1]

    def _scope(self, scope: Any) -> str:
        entry = self._scopes.get(id(scope))
        if entry is None or entry[0] is not scope:
            if len(self._scopes) >= _CACHE_LIMIT:
                self._scopes.clear()
            entry = self._scopes[id(scope)] = (scope, _scope_fields(scope))
        return entry[1]


def span_to_dict(span: ReadableSpan, created_ns: int = 0) -> dict[str, Any]:
    """The stored fields of `span` as a dict: exactly what one line of a segment file holds."""
    result: dict[str, Any] = json.loads(RowEncoder().line(span, created_ns))
    return result
