"""OTLP intake: decode an `ExportTraceServiceRequest` and write its spans into the local store.

The spans go through the same transform as in-process export (scrubbing, size caps) and the same
writer, so a span received over OTLP gives the same row as one exported by mastrace itself, with
its own resource attributes. Used by the HTTP and gRPC servers of `mastrace serve`.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as PbStatus
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from ..pipeline._transform import prepare_span
from ..scrubbing._engine import Scrubber
from ..scrubbing._options import ScrubbingOptions
from ..store import LocalStoreExporter
from ..tracing._snapshot import Limits

__all__ = [
    "CONTENT_TYPES",
    "Intake",
    "IntakeError",
    "decode_request",
    "media_type",
    "request_spans",
    "sequence_value",
]

_KINDS = {
    PbSpan.SPAN_KIND_INTERNAL: SpanKind.INTERNAL,
    PbSpan.SPAN_KIND_SERVER: SpanKind.SERVER,
    PbSpan.SPAN_KIND_CLIENT: SpanKind.CLIENT,
    PbSpan.SPAN_KIND_PRODUCER: SpanKind.PRODUCER,
    PbSpan.SPAN_KIND_CONSUMER: SpanKind.CONSUMER,
}
_STATUS = {
    PbStatus.STATUS_CODE_UNSET: StatusCode.UNSET,
    PbStatus.STATUS_CODE_OK: StatusCode.OK,
    PbStatus.STATUS_CODE_ERROR: StatusCode.ERROR,
}
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_CHUNK = 512  # spans converted and written at a time


_DEFAULT_SCRUBBING = ScrubbingOptions()


class IntakeError(ValueError):
    """A request body that is not an OTLP trace export request."""


PROTOBUF = "application/x-protobuf"
JSON = "application/json"
CONTENT_TYPES = frozenset({PROTOBUF, JSON, "application/protobuf"})
"""The media types OTLP/HTTP sends (`application/protobuf` is what some senders write)."""


def media_type(content_type: str | None) -> str:
    """The media type of a `Content-Type` value, lowercased, without its parameters."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def decode_request(body: bytes, content_type: str) -> ExportTraceServiceRequest:
    """Parse an OTLP/HTTP protobuf body (JSON bodies go through `_otlp_json.json_spans`).

    Raises:
        IntakeError: The body is not a valid request.
    """
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except Exception as exc:
        raise IntakeError(
            f"not an OTLP trace export request ({content_type or 'no content type'}): {exc}"
        ) from exc
    return request


def request_spans(request: ExportTraceServiceRequest) -> Iterator[ReadableSpan | IntakeError]:
    """The spans of a decoded request, one by one; a span that is not valid comes as its error."""
    for resource_spans in request.resource_spans:
        resource = Resource(
            _attributes(resource_spans.resource.attributes), resource_spans.schema_url or None
        )
        for scope_spans in resource_spans.scope_spans:
            s = scope_spans.scope
            scope = InstrumentationScope(
                s.name, s.version or None, scope_spans.schema_url or None, _attributes(s.attributes) or None
            )
            for pb in scope_spans.spans:
                try:
                    yield _span(pb, resource, scope)
                except IntakeError as exc:
                    yield exc


_SCALARS = frozenset({"string_value", "bool_value", "int_value", "double_value"})


def sequence_value(items: list[Any]) -> Any:
    """An OTLP array as an attribute value: a tuple when its items are scalars of one type (what
    OpenTelemetry attributes hold), else JSON text."""
    if (
        items
        and all(isinstance(i, (str, bool, int, float)) for i in items)
        and len({type(i) for i in items}) == 1
    ):
        return tuple(items)
    return json.dumps(items, default=str)


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind in _SCALARS:
        return getattr(value, kind)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    if kind == "array_value":
        return sequence_value([_value(v) for v in value.array_value.values])
    if kind == "kvlist_value":
        return json.dumps({kv.key: _value(kv.value) for kv in value.kvlist_value.values}, default=str)
    return None


def _attributes(pairs: Iterable[KeyValue]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    scalars = _SCALARS
    for kv in pairs:
        v = kv.value
        kind = v.WhichOneof("value")
        value = getattr(v, kind) if kind in scalars else _value(v)
        if value is not None:
            out[kv.key] = value
    return out


def _id(raw: bytes, size: int) -> int:
    if len(raw) != size:
        raise IntakeError(f"an id of {len(raw)} bytes (expected {size})")
    return int.from_bytes(raw, "big")


def _span(pb: PbSpan, resource: Resource, scope: InstrumentationScope) -> ReadableSpan:
    trace_id, span_id = _id(pb.trace_id, 16), _id(pb.span_id, 8)
    if not trace_id or not span_id:
        raise IntakeError("a span with an all-zero trace or span id")
    parent = (
        SpanContext(trace_id, _id(pb.parent_span_id, 8), is_remote=True, trace_flags=_SAMPLED)
        if pb.parent_span_id
        else None
    )
    status = _STATUS.get(pb.status.code, StatusCode.UNSET)
    return ReadableSpan(
        name=pb.name,
        context=SpanContext(trace_id, span_id, is_remote=False, trace_flags=_SAMPLED),
        parent=parent,
        resource=resource,
        attributes=_attributes(pb.attributes),
        events=[Event(e.name, _attributes(e.attributes), e.time_unix_nano) for e in pb.events],
        links=[
            Link(
                SpanContext(_id(lk.trace_id, 16), _id(lk.span_id, 8), is_remote=True, trace_flags=_SAMPLED),
                _attributes(lk.attributes),
            )
            for lk in pb.links
        ],
        kind=_KINDS.get(pb.kind, SpanKind.INTERNAL),
        status=Status(status, (pb.status.message or None) if status is StatusCode.ERROR else None),
        start_time=pb.start_time_unix_nano,
        end_time=pb.end_time_unix_nano or pb.start_time_unix_nano,
        instrumentation_scope=scope,
    )


class Intake:
    """Writes received spans into one local store, scrubbed like in-process export. Thread-safe.

    Args:
        store: The store folder.
        scrubbing: Scrubbing options, or None to write spans as received.
        destination: Where spans go instead of the store: anything with `export_counted(spans)
            -> int` and `shutdown()`, e.g. a `ClickHouseWriter`.
    """

    def __init__(
        self,
        store: str | Path,
        scrubbing: ScrubbingOptions | None = _DEFAULT_SCRUBBING,
        destination: Any = None,
    ) -> None:
        self.store = Path(store)
        self.exporter = destination if destination is not None else LocalStoreExporter(self.store)
        self.scrubber = Scrubber(scrubbing) if scrubbing is not None else None
        self.limits = Limits()
        self._lock = threading.Lock()
        self.received = 0
        self.stored = 0

    def ingest(self, request: ExportTraceServiceRequest) -> tuple[int, str]:
        """Write the request's spans; returns (spans rejected, why) for OTLP's partial success."""
        return self.ingest_spans(request_spans(request))

    def ingest_spans(self, spans: Iterable[ReadableSpan | Exception]) -> tuple[int, str]:
        """Write `spans` (a span that is not valid comes as its error), a chunk at a time so that a
        large request never exists as SDK spans all at once; returns (spans rejected, why)."""
        rejected, reasons = 0, []
        chunk: list[ReadableSpan] = []
        received = stored = 0
        for item in spans:
            if isinstance(item, Exception):
                rejected += 1
                reasons.append(str(item))
                continue
            chunk.append(prepare_span(item, self.scrubber, self.limits))
            if len(chunk) >= _CHUNK:
                received, stored = received + len(chunk), stored + self.exporter.export_counted(chunk)
                chunk = []
        if chunk:
            received, stored = received + len(chunk), stored + self.exporter.export_counted(chunk)
        if received > stored:
            rejected += received - stored
            reasons.append("the destination could not write every span")
        with self._lock:
            self.received += stored + rejected
            self.stored += stored
        return rejected, "; ".join(dict.fromkeys(reasons))

    def close(self) -> None:
        self.exporter.shutdown()
