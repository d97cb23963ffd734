"""One span of a trace as the analysis reads it (`SpanRow`), from a row of `records` or straight
from a line of a segment file (what `tree` and `view` do for the spans they show)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import semconv
from ..store._schema import STORED_FIELDS
from ..tracing._snapshot import loads_json

__all__ = ["SpanRow", "loads_as", "span_from_line", "span_row"]


@dataclass
class SpanRow:
    """One span of a trace, with JSON columns decoded."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_us: int
    end_us: int
    duration: float
    span_type: str = "span"
    level: int = 9
    message: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)
    is_exception: bool = False
    exception_type: str | None = None
    exception_message: str | None = None
    exception_stacktrace: str | None = None
    otel_status_code: str = "UNSET"
    otel_status_message: str | None = None
    otel_kind: str = "internal"
    scope_name: str | None = None
    scope_version: str | None = None
    service_name: str | None = None
    resource: dict[str, Any] = field(default_factory=dict)
    state: str = ""
    """Empty for a span that ended; `running` for one still open in a running process, `unfinished`
    for one whose process ended first (killed, or exited without ending it): see `open_spans`."""

    @property
    def label(self) -> str:
        """What Logfire shows for the span: its formatted message (`logfire.msg`) when it has one
        that differs from the name (a template such as `Agent restart: {agent_id}`), else the name."""
        return self.message if self.message and self.message != self.name else self.name

    @property
    def is_error(self) -> bool:
        """Whether the span ended in error (error status, exception, or error level)."""
        return self.otel_status_code == "ERROR" or self.is_exception or self.level >= semconv.LEVEL_ERROR


def loads_as(text: str | None, default: Any) -> Any:
    """Parsed JSON of the same shape as `default` (an object or an array), else `default`; a value
    that is parsed already is taken as it is."""
    if isinstance(text, type(default)):
        return text
    if not text or not isinstance(text, str):
        return default
    try:
        value = loads_json(text)
    except (ValueError, RecursionError):
        return default
    return value if isinstance(value, type(default)) else default


def span_row(row: dict[str, Any]) -> SpanRow:
    return SpanRow(
        trace_id=row["trace_id"],
        span_id=row["span_id"],
        parent_span_id=row.get("parent_span_id"),
        name=row.get("span_name") or "",
        start_us=int(row["start_us"]),
        end_us=int(row["end_us"]),
        duration=float(row.get("duration") or 0.0),
        span_type=row.get("span_type") or "span",
        level=int(row.get("level") or 9),
        message=row.get("message"),
        attributes=loads_as(row.get("attributes"), {}),
        events=loads_as(row.get("otel_events"), []),
        links=loads_as(row.get("otel_links"), []),
        is_exception=bool(row.get("is_exception")),
        exception_type=row.get("exception_type"),
        exception_message=row.get("exception_message"),
        exception_stacktrace=row.get("exception_stacktrace"),
        otel_status_code=row.get("otel_status_code") or "UNSET",
        otel_status_message=row.get("otel_status_message"),
        otel_kind=row.get("otel_kind") or "internal",
        scope_name=row.get("otel_scope_name"),
        scope_version=row.get("otel_scope_version"),
        service_name=row.get("service_name"),
        resource=loads_as(row.get("resource"), {}),
    )


_SQL_TYPES = {
    "VARCHAR": str,
    "VARCHAR[]": list,
    "BOOLEAN": bool,
    "BIGINT": int,
    "SMALLINT": int,
    "INTEGER": int,
}
# JSON value type -> the stored fields that the store's writer never gives a value of that type.
_REFUSED: dict[type, frozenset[str]] = {
    kind: frozenset(
        name
        for name, sql_type in STORED_FIELDS.items()
        if sql_type != "JSON" and kind is not type(None) and _SQL_TYPES[sql_type] is not kind
    )
    for kind in (dict, list, str, int, float, bool, type(None))
}


def span_from_line(line: str | bytes) -> SpanRow | None:
    """The span of one line of a segment file, as `TraceStore.spans` reads it through `records`.

    Only lines whose every field has the type the store's writer gives it are read (what `records`
    would make of other lines is DuckDB's to say): None for any other line, and for lines that
    `records` leaves out.
    """
    try:
        fields = loads_json(line)
    except (ValueError, RecursionError):
        return None
    if type(fields) is not dict:
        return None
    for key, value in fields.items():
        if key in _REFUSED[type(value)]:
            return None
    get = fields.get
    trace_id, span_id, parent = get("trace_id"), get("span_id"), get("parent_span_id")
    start, end, tags = get("start_ns"), get("end_ns"), get("tags")
    if (
        trace_id is None
        or len(trace_id) != 32
        or span_id is None
        or len(span_id) != 16
        or not (parent is None or len(parent) == 16)
        or start is None
        or end is None
        or start < 0
        or end < 0
        or (tags is not None and not all(type(tag) is str for tag in tags))
    ):
        return None
    name, message = get("span_name"), get("message")
    attributes, events, links, resource = (
        get("attributes"),
        get("otel_events"),
        get("otel_links"),
        get("otel_resource_attributes"),
    )
    # The defaults are the `records` columns' (see `_schema.COLUMNS`) as `_span_row` reads them;
    # positional, in field order, as this runs for every span a view draws.
    return SpanRow(
        trace_id,
        span_id,
        parent,
        name or "",
        start // 1000,
        end // 1000,
        (end - start) / 1e9,
        get("span_type") or "span",
        get("level") or 9,
        name if message is None else message,
        attributes if type(attributes) is dict else {},
        events if type(events) is list else [],
        links if type(links) is list else [],
        bool(get("is_exception")),
        get("exception_type"),
        get("exception_message"),
        get("exception_stacktrace"),
        get("otel_status_code") or "UNSET",
        get("otel_status_message"),
        get("otel_kind") or "internal",
        get("otel_scope_name"),
        get("otel_scope_version"),
        get("service_name"),
        resource if type(resource) is dict else {},
    )
