"""ClickHouse's `otel_traces`, the OpenTelemetry Collector `clickhouse` exporter's table, both ways.

One table, whichever way a span got there: the Collector's exporter writes it (any OTel SDK → the
Collector), and so do `mastrace serve --to clickhouse://…` and `mastrace push --to clickhouse://…`
(`ClickHouseWriter`); `--source clickhouse://…` reads it (`mastrace.analysis._clickhouse`).
Everything goes through ClickHouse's own client, `clickhouse-connect`: over HTTP to a server, or
to chDB (ClickHouse's engine in-process) for `chdb:///path`.

The exporter's schema, and how a span maps onto it:

- `Timestamp` DateTime64(9) is the start, `Duration` UInt64 nanoseconds; ids are lower-case hex,
  `ParentSpanId` is empty for a root span;
- `SpanKind` is `SPAN_KIND_INTERNAL`…, `StatusCode` `STATUS_CODE_UNSET|OK|ERROR`;
- `ServiceName` is the resource's `service.name`; `ResourceAttributes` and `SpanAttributes` are
  `Map(LowCardinality(String), String)`: every value is a string there (the exporter writes ints as
  decimals, doubles as Go prints them, bools as `true`/`false`, arrays and maps as JSON). Reading
  back, `attribute_value` restores the types that mastrace's semantic conventions give a key
  (`semconv.INT_KEYS`, `FLOAT_KEYS`, `BOOL_KEYS`, `ARRAY_KEYS`); other values stay text, and a JSON
  text (a config snapshot) stays the JSON text it was;
- `Events` (`Timestamp`, `Name`, `Attributes`) and `Links` (`TraceId`, `SpanId`, `TraceState`,
  `Attributes`) are `Nested`, i.e. parallel arrays.

This module imports neither DuckDB nor the analysis: the write path (serve's intake, push) uses it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Final
from urllib.parse import parse_qs, unquote, urlsplit

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from .. import semconv
from ..exceptions import StoreError

__all__ = [
    "COLUMN_NAMES",
    "DEFAULT_TABLE",
    "ClickHouseTarget",
    "ClickHouseWriter",
    "attribute_text",
    "attribute_value",
    "create_table_sql",
    "is_clickhouse_url",
    "parse_target",
    "row_to_span",
    "span_to_row",
]

DEFAULT_TABLE: Final = "otel_traces"
DEFAULT_DATABASE: Final = "default"
_SCHEMES: Final = ("clickhouse", "clickhouses", "chdb")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=timezone.utc)
_KIND_TEXT: Final = {kind: f"SPAN_KIND_{kind.name}" for kind in SpanKind}
_KIND_OF: Final = {text: kind for kind, text in _KIND_TEXT.items()}
_STATUS_TEXT: Final = {code: f"STATUS_CODE_{code.name}" for code in StatusCode}
_STATUS_OF: Final = {text: code for code, text in _STATUS_TEXT.items()}

# The exporter's columns, in its order (Events and Links as the arrays `Nested` stores).
COLUMN_NAMES: Final = (
    "Timestamp",
    "TraceId",
    "SpanId",
    "ParentSpanId",
    "TraceState",
    "SpanName",
    "SpanKind",
    "ServiceName",
    "ResourceAttributes",
    "ScopeName",
    "ScopeVersion",
    "SpanAttributes",
    "Duration",
    "StatusCode",
    "StatusMessage",
    "Events.Timestamp",
    "Events.Name",
    "Events.Attributes",
    "Links.TraceId",
    "Links.SpanId",
    "Links.TraceState",
    "Links.Attributes",
)

_DDL: Final = """\
CREATE TABLE IF NOT EXISTS {table} (
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ParentSpanId String CODEC(ZSTD(1)),
    TraceState String CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion String CODEC(ZSTD(1)),
    SpanAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    Duration UInt64 CODEC(ZSTD(1)),
    StatusCode LowCardinality(String) CODEC(ZSTD(1)),
    StatusMessage String CODEC(ZSTD(1)),
    Events Nested (
        Timestamp DateTime64(9),
        Name LowCardinality(String),
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    Links Nested (
        TraceId String,
        SpanId String,
        TraceState String,
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_key mapKeys(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_value mapValues(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_duration Duration TYPE minmax GRANULARITY 1
) ENGINE = MergeTree
PARTITION BY toDate(Timestamp)
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp))
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1"""


def create_table_sql(database: str, table: str) -> str:
    """The Collector exporter's `CREATE TABLE IF NOT EXISTS` for `database`.`table` (no TTL)."""
    return _DDL.format(table=f"`{database}`.`{table}`")


@dataclass(frozen=True)
class ClickHouseTarget:
    """Where `otel_traces` lives: a ClickHouse server over HTTP(S), or a chDB folder.

    Attributes:
        url: The URL as given, with any password left out (safe to print and to file under).
        database: The database of the table.
        table: The table (default `otel_traces`).
        chdb_path: The chDB folder, or None for a server.
        host, port, username, password, secure: How to reach a server.
    """

    url: str
    database: str
    table: str
    chdb_path: str | None = None
    host: str = ""
    port: int = 8123
    username: str = "default"
    password: str = ""
    secure: bool = False

    @property
    def qualified(self) -> str:
        """`database`.`table`, quoted for SQL."""
        return f"`{self.database}`.`{self.table}`"

    def client(self, timeout: float | None = None) -> Any:
        """A `clickhouse-connect` client for this target.

        Raises:
            StoreError: clickhouse-connect (or chdb for `chdb://`) is not installed, or the server
                cannot be reached.
        """
        try:
            import clickhouse_connect
        except ModuleNotFoundError:
            raise StoreError(
                "ClickHouse needs the clickhouse extra: pip install 'mastrace[clickhouse]'"
            ) from None
        # The client logs a connection failure at ERROR as well as raising it: with no handler of the
        # application's, Python would print that on stderr beside mastrace's one-line message.
        logger = logging.getLogger("clickhouse_connect")
        if not logger.handlers:
            logger.addHandler(logging.NullHandler())
        try:
            if self.chdb_path is not None:
                return clickhouse_connect.get_client(dsn=f"chdb://{self.chdb_path}")
            timeouts: dict[str, Any] = {} if timeout is None else {"send_receive_timeout": timeout}
            return clickhouse_connect.get_client(
                host=self.host,
                port=self.port,
                username=self.username,
                password=self.password,
                secure=self.secure,
                database=self.database,
                **timeouts,
            )
        except ImportError:
            raise StoreError("chdb:// needs chDB installed: pip install chdb") from None
        except Exception as exc:  # the client's errors differ by backend
            raise StoreError(f"cannot reach ClickHouse at {self.url}: {_first_line(exc)}") from exc


def is_clickhouse_url(text: str | None) -> bool:
    """Whether `text` names ClickHouse (`clickhouse://`, `clickhouses://`, `chdb://`)."""
    return bool(text) and str(text).strip().lower().split(":", 1)[0] in _SCHEMES


def parse_target(text: str) -> ClickHouseTarget:
    """Read `clickhouse://user:pass@host:port/db?table=otel_traces` (`clickhouses://` for HTTPS) or
    `chdb:///path?database=db&table=otel_traces`.

    The password may instead come from `$CLICKHOUSE_PASSWORD`, which keeps it off the command line.

    Raises:
        StoreError: Not such a URL, or a database or table name that is not a plain identifier.
    """
    parts = urlsplit(text.strip())
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise StoreError(f"{text!r} is not a clickhouse://, clickhouses:// or chdb:// URL")
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    table = query.get("table", DEFAULT_TABLE)
    if scheme == "chdb":
        path = unquote((parts.netloc or "") + parts.path)
        if not path or path == "/":
            raise StoreError(f"{text!r} names no chDB folder: give chdb:///path/to/folder")
        database = query.get("database", DEFAULT_DATABASE)
        _check_names(text, database, table)
        return ClickHouseTarget(f"chdb://{path}?table={table}", database, table, chdb_path=path)
    if not parts.hostname:
        raise StoreError(f"{text!r} names no ClickHouse host")
    database = unquote(parts.path.strip("/")) or query.get("database", DEFAULT_DATABASE)
    _check_names(text, database, table)
    secure = scheme == "clickhouses"
    try:
        port = parts.port or (8443 if secure else 8123)
    except ValueError:
        raise StoreError(f"{text!r} has a port that is not a number") from None
    username = unquote(parts.username) if parts.username else "default"
    password = unquote(parts.password) if parts.password else os.environ.get("CLICKHOUSE_PASSWORD", "")
    shown = f"{scheme}://{username}@{parts.hostname}:{port}/{database}?table={table}"
    return ClickHouseTarget(
        shown,
        database,
        table,
        host=parts.hostname,
        port=port,
        username=username,
        password=password,
        secure=secure,
    )


def _check_names(text: str, *names: str) -> None:
    for name in names:
        if not _NAME.match(name):
            raise StoreError(f"{text!r}: {name!r} is not a plain database or table name")


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:500] if lines else type(exc).__name__


# -- values ------------------------------------------------------------------------------------------
def attribute_text(value: Any) -> str:
    """An attribute value as the Collector's exporter writes it into a map: text."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "+Inf" if value > 0 else "-Inf"
        return repr(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, (list, tuple)):
        return json.dumps(list(value), ensure_ascii=False, separators=(",", ":"), default=str)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def attribute_value(key: str, text: str) -> Any:
    """A map value read back, typed as mastrace's semantic conventions type `key`; else the text."""
    try:
        if key in semconv.INT_KEYS:
            number = float(text)
            return int(number) if number.is_integer() else number
        if key in semconv.FLOAT_KEYS:
            return float(text)
    except ValueError:
        return text
    if key in semconv.BOOL_KEYS and text in ("true", "false"):
        return text == "true"
    if key in semconv.ARRAY_KEYS and text[:1] == "[":
        try:
            items = json.loads(text)
        except ValueError:
            return text
        if isinstance(items, list) and all(isinstance(i, (str, bool, int, float)) for i in items):
            return tuple(items)
    return text


def _typed(mapping: Mapping[str, str] | None) -> dict[str, Any]:
    return {str(k): attribute_value(str(k), str(v)) for k, v in (mapping or {}).items()}


def _texts(mapping: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(k): attribute_text(v) for k, v in (mapping or {}).items() if v is not None}


# -- rows --------------------------------------------------------------------------------------------
def span_to_row(span: ReadableSpan) -> list[Any]:
    """`span` as one `otel_traces` row (in `COLUMN_NAMES` order), as the Collector's exporter writes it."""
    ctx = span.context
    if ctx is None:
        raise ValueError("a span without a context")
    start = span.start_time or 0
    end = span.end_time or start
    resource = dict(span.resource.attributes) if span.resource is not None else {}
    scope = span.instrumentation_scope
    events = list(span.events or ())
    links = list(span.links or ())
    state = ctx.trace_state.to_header() if ctx.trace_state else ""
    return [
        start,
        f"{ctx.trace_id:032x}",
        f"{ctx.span_id:016x}",
        f"{span.parent.span_id:016x}" if span.parent is not None else "",
        state,
        span.name,
        _KIND_TEXT.get(span.kind, "SPAN_KIND_INTERNAL"),
        str(resource.get("service.name", "")),
        _texts(resource),
        scope.name if scope is not None else "",
        (scope.version or "") if scope is not None else "",
        _texts(span.attributes),
        max(0, end - start),
        _STATUS_TEXT.get(span.status.status_code, "STATUS_CODE_UNSET"),
        span.status.description or "",
        [e.timestamp for e in events],
        [e.name for e in events],
        [_texts(e.attributes) for e in events],
        [f"{lk.context.trace_id:032x}" for lk in links],
        [f"{lk.context.span_id:016x}" for lk in links],
        [lk.context.trace_state.to_header() if lk.context.trace_state else "" for lk in links],
        [_texts(lk.attributes) for lk in links],
    ]


def row_to_span(row: Mapping[str, Any], cache: dict[Any, Any] | None = None) -> ReadableSpan:
    """The span an `otel_traces` row holds (keys as `COLUMN_NAMES`, `Timestamp` as epoch ns).

    With `cache` (a dict kept between calls), rows of one resource and scope share one `Resource`
    and one `InstrumentationScope`, which the store's row builder then encodes once.

    Raises:
        ValueError: The row's trace or span id is not hex (a row no span could have written).
    """
    trace_id, span_id = int(row["TraceId"], 16), int(row["SpanId"], 16)
    context = SpanContext(trace_id, span_id, is_remote=False, trace_flags=_SAMPLED)
    parent_hex = row.get("ParentSpanId") or ""
    parent = (
        SpanContext(trace_id, int(parent_hex, 16), is_remote=False, trace_flags=_SAMPLED)
        if parent_hex
        else None
    )
    start = int(row["Timestamp"])
    events = [
        Event(str(name), _typed(attrs), int(ts))
        for ts, name, attrs in zip(
            row.get("Events.Timestamp") or (),
            row.get("Events.Name") or (),
            row.get("Events.Attributes") or (),
            strict=False,
        )
    ]
    links = [
        Link(SpanContext(int(t, 16), int(s, 16), is_remote=True, trace_flags=_SAMPLED), _typed(attrs))
        for t, s, attrs in zip(
            row.get("Links.TraceId") or (),
            row.get("Links.SpanId") or (),
            row.get("Links.Attributes") or (),
            strict=False,
        )
        if t and s
    ]
    code = _STATUS_OF.get(str(row.get("StatusCode") or ""), StatusCode.UNSET)
    message = str(row.get("StatusMessage") or "") or None
    resource = _resource(row, cache)
    scope = _scope(str(row.get("ScopeName") or ""), str(row.get("ScopeVersion") or "") or None, cache)
    return ReadableSpan(
        name=str(row.get("SpanName") or ""),
        context=context,
        parent=parent,
        resource=resource,
        attributes=_typed(row.get("SpanAttributes")),
        events=events,
        links=links,
        kind=_KIND_OF.get(str(row.get("SpanKind") or ""), SpanKind.INTERNAL),
        status=Status(code, message if code is StatusCode.ERROR else None),
        start_time=start,
        end_time=start + int(row.get("Duration") or 0),
        instrumentation_scope=scope,
    )


_CACHED = 256


def _resource(row: Mapping[str, Any], cache: dict[Any, Any] | None) -> Resource:
    raw = row.get("ResourceAttributes") or {}
    key = ("resource", str(row.get("ServiceName") or ""), tuple(sorted(raw.items())))
    found = cache.get(key) if cache is not None else None
    if found is None:
        attributes = _typed(raw)
        if key[1] and "service.name" not in attributes:
            attributes["service.name"] = key[1]
        found = Resource(attributes)
        if cache is not None:
            if len(cache) >= _CACHED:
                cache.clear()
            cache[key] = found
    return found


def _scope(name: str, version: str | None, cache: dict[Any, Any] | None) -> InstrumentationScope:
    key = ("scope", name, version)
    found = cache.get(key) if cache is not None else None
    if found is None:
        found = InstrumentationScope(name, version)
        if cache is not None:
            if len(cache) >= _CACHED:
                cache.clear()
            cache[key] = found
    return found


def _datetime64(ns: int) -> str:
    """Epoch nanoseconds as DateTime64(9) text (UTC), exact to the nanosecond."""
    seconds, fraction = divmod(ns, 1_000_000_000)
    return f"{_EPOCH + timedelta(seconds=seconds):%Y-%m-%d %H:%M:%S}.{fraction:09d}"


def _json_row(row: list[Any]) -> str:
    named = dict(zip(COLUMN_NAMES, row, strict=True))
    named["Timestamp"] = _datetime64(named["Timestamp"])
    named["Events.Timestamp"] = [_datetime64(ns) for ns in named["Events.Timestamp"]]
    return json.dumps(named, ensure_ascii=False, separators=(",", ":"))


# -- writing -----------------------------------------------------------------------------------------
class ClickHouseWriter:
    """Inserts spans into `otel_traces`, creating the table (the Collector's DDL) when it is missing.

    It has the two methods `serve`'s intake asks of a destination (`export_counted`, `shutdown`),
    and `send` for `mastrace push`.

    Args:
        target: Where the table is.
        create: Create the database and table when missing.
    """

    def __init__(self, target: ClickHouseTarget, *, create: bool = True) -> None:
        self.target = target
        self.client = target.client()
        if create:
            self._run(f"CREATE DATABASE IF NOT EXISTS `{target.database}`")
            self._run(create_table_sql(target.database, target.table))

    def _run(self, sql: str) -> None:
        try:
            self.client.command(sql)
        except Exception as exc:
            raise StoreError(f"ClickHouse at {self.target.url} refused: {_first_line(exc)}") from exc

    def send(self, spans: Iterable[ReadableSpan]) -> int:
        """Insert `spans` in one insert; returns how many rows were written.

        The rows go as `JSONEachRow` text: the client's typed insert would import pandas when it is
        installed (seconds, on the first insert), and ClickHouse parses this format at least as fast.

        Raises:
            StoreError: ClickHouse refused the insert.
        """
        lines = [_json_row(span_to_row(span)) for span in spans]
        if not lines:
            return 0
        try:
            self.client.raw_insert(
                self.target.qualified,
                list(COLUMN_NAMES),
                "\n".join(lines).encode("utf-8", "replace"),
                fmt="JSONEachRow",
            )
        except Exception as exc:
            raise StoreError(
                f"ClickHouse at {self.target.url} refused an insert: {_first_line(exc)}"
            ) from exc
        return len(lines)

    def export_counted(self, spans: Sequence[ReadableSpan]) -> int:
        """`send`, counting a refused insert as no span written (serve answers the sender so)."""
        try:
            return self.send(spans)
        except StoreError:
            return 0

    def shutdown(self) -> None:
        """Close the client."""
        with contextlib.suppress(Exception):
            self.client.close()
