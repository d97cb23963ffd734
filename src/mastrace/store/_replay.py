"""Store-and-forward: read stored spans back as OpenTelemetry spans, and remember what a
destination acknowledged.

The local store is the durable copy of everything a process traced. `mastrace push` re-sends it to
an OTLP endpoint or Logfire: each stored line becomes a `ReadableSpan` with the same trace and span
ids, parent, name, kind, times, attributes, events, links, status, resource and scope that were
exported the first time (`row_to_span`). Segments are append-only, so what a destination has taken
is a byte offset per segment (`PushState`): a second push starts where the first stopped and
sends nothing twice. A push limited to some traces records the span ids it sent instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from .. import semconv
from ._lines import bounded_lines
from ._manifest import list_store

__all__ = [
    "ENDPOINT_HEADER",
    "PushState",
    "StoredSpan",
    "acked_path",
    "live_acked",
    "read_segment",
    "row_to_span",
    "state_path",
]

PUSHED_DIR = "pushed"
_KINDS = {kind.name.lower(): kind for kind in SpanKind}
_STATUS = {"UNSET": StatusCode.UNSET, "OK": StatusCode.OK, "ERROR": StatusCode.ERROR}
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


@dataclass(frozen=True)
class StoredSpan:
    """One stored line: its segment, where the line ends, and the span it holds."""

    segment: str
    end_offset: int
    trace_id: str
    span_id: str
    start_ns: int
    span: ReadableSpan


def _attribute(value: Any) -> Any:
    """A stored attribute value as an OpenTelemetry one: objects (expanded JSON) back to JSON text."""
    if isinstance(value, (dict, list)) and not (
        isinstance(value, list) and all(isinstance(v, (str, bool, int, float)) for v in value)
    ):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if isinstance(value, list):
        return tuple(value)
    return value


def _attributes(stored: Any) -> dict[str, Any]:
    if not isinstance(stored, Mapping):
        return {}
    return {str(k): _attribute(v) for k, v in stored.items() if v is not None}


def _ns(iso: Any) -> int:
    try:
        moment = datetime.fromisoformat(str(iso).replace("Z", "+00:00"))
    except ValueError:
        return 0
    return int(moment.timestamp() * 1_000_000) * 1000


def row_to_span(row: Mapping[str, Any]) -> ReadableSpan:
    """The span a stored line holds, as it was first exported.

    Logfire's columns (`message`, `level`, `span_type`, `tags`, `attributes_json_schema`) go back
    into their `logfire.*` attributes, and JSON attributes the store expanded into objects become
    JSON text again.

    Raises:
        ValueError: The row lacks a valid id or time (the store's views skip such rows too).
    """
    trace_id, span_id = int(row["trace_id"], 16), int(row["span_id"], 16)
    if not trace_id or not span_id:
        raise ValueError("a span needs non-zero trace and span ids")
    context = SpanContext(trace_id, span_id, is_remote=False, trace_flags=_SAMPLED)
    parent_hex = row.get("parent_span_id")
    parent = (
        SpanContext(trace_id, int(parent_hex, 16), is_remote=False, trace_flags=_SAMPLED)
        if parent_hex
        else None
    )
    attributes = _attributes(row.get("attributes"))
    name = str(row.get("span_name") or "")
    if row.get("span_type") == "log":
        attributes[semconv.LOGFIRE_SPAN_TYPE] = "log"
    message = row.get("message")
    if message is not None:
        attributes[semconv.LOGFIRE_MSG] = str(message)
    if row.get("attributes_json_schema"):
        attributes[semconv.LOGFIRE_JSON_SCHEMA] = str(row["attributes_json_schema"])
    if row.get("tags"):
        attributes[semconv.LOGFIRE_TAGS] = tuple(str(t) for t in row["tags"])
    if row.get("span_type") == "log" and row.get("level") is not None:
        attributes[semconv.LOGFIRE_LEVEL_NUM] = int(row["level"])
    events = [
        Event(str(e.get("name", "")), _attributes(e.get("attributes")), _ns(e.get("timestamp")))
        for e in row.get("otel_events") or ()
        if isinstance(e, Mapping)
    ]
    links = [
        Link(
            SpanContext(
                int(lk["trace_id"], 16), int(lk["span_id"], 16), is_remote=True, trace_flags=_SAMPLED
            ),
            _attributes(lk.get("attributes")),
        )
        for lk in row.get("otel_links") or ()
        if isinstance(lk, Mapping) and lk.get("trace_id") and lk.get("span_id")
    ]
    code = _STATUS.get(str(row.get("otel_status_code") or "UNSET"), StatusCode.UNSET)
    status = Status(code, row.get("otel_status_message") if code is StatusCode.ERROR else None)
    scope_attributes = row.get("otel_scope_attributes")
    scope = InstrumentationScope(
        str(row.get("otel_scope_name") or "mastrace"),
        row.get("otel_scope_version"),
        attributes=scope_attributes if isinstance(scope_attributes, Mapping) else None,
    )
    return ReadableSpan(
        name=name,
        context=context,
        parent=parent,
        resource=Resource(_attributes(row.get("otel_resource_attributes"))),
        attributes=attributes,
        events=events,
        links=links,
        kind=_KINDS.get(str(row.get("otel_kind") or "internal"), SpanKind.INTERNAL),
        status=status,
        start_time=int(row["start_ns"]),
        end_time=int(row["end_ns"]),
        instrumentation_scope=scope,
    )


def read_segment(path: Path, start: int = 0) -> Iterator[StoredSpan | int]:
    """The spans of one segment from byte `start`, each with the offset just past its line.

    Only whole lines are read (a line still being written is left for later), and none is held
    whole when it is longer than readers take (16 MiB). A line that cannot be read as a span yields
    the offset past it (an int) instead, so that it is counted and skipped.
    """
    with path.open("rb") as f:
        for offset, raw in bounded_lines(f, start):
            if raw is None:
                yield offset
                continue
            try:
                row = json.loads(raw)
                span = row_to_span(row)
                yield StoredSpan(
                    path.name, offset, row["trace_id"], row["span_id"], int(row["start_ns"]), span
                )
            except (ValueError, TypeError, KeyError, AttributeError):
                yield offset


def _digest(destination: str) -> str:
    return hashlib.sha256(destination.encode()).hexdigest()[:16]


def state_path(store: Path, destination: str) -> Path:
    """Where what `destination` acknowledged through `mastrace push` is remembered, inside the store."""
    return store / PUSHED_DIR / f"{_digest(destination)}.json"


def acked_path(store: Path, destination: str, writer: str) -> Path:
    """Where a process records the span ids `destination` acknowledged while it ran (`writer`: host-pid)."""
    return store / PUSHED_DIR / f"{_digest(destination)}.acked-{writer}"


ENDPOINT_HEADER = "# endpoint "
"""The first line of a file of live acknowledgements: the endpoint (as configured) it is for."""


def live_acked(
    store: Path,
    destination: str,
    aliases: Iterable[str] = (),
    same: Callable[[str], bool] | None = None,
) -> set[str]:
    """Span ids that `destination` acknowledged when processes exported to it live: from the files
    filed under it or under one of its `aliases`, and from any file whose endpoint `same` says is it
    (the same receiver configured under another name)."""
    ids: set[str] = set()
    folder = store / PUSHED_DIR
    if not folder.is_dir():
        return ids
    digests = {_digest(name) for name in (destination, *aliases)}
    for path in folder.glob("*.acked-*"):
        with contextlib.suppress(OSError):
            text = path.read_text()
            first = text.split("\n", 1)[0]
            ours = path.name.split(".", 1)[0] in digests
            if not ours and same is not None and first.startswith(ENDPOINT_HEADER):
                with contextlib.suppress(Exception):
                    ours = same(first[len(ENDPOINT_HEADER) :].strip())
            if ours:
                ids.update(line for line in text.split() if len(line) == 16)
    return ids


@dataclass
class PushState:
    """What one destination has acknowledged: a byte offset per segment, and single span ids.

    `lines` counts the spans before each offset (what earlier pushes sent there), so that a push can
    say how much was sent before without reading it again; a record from before it was kept has none.
    `compacted` counts the rows sent from compacted files, by the segment they came from (see
    `_replay_compacted`).
    """

    destination: str
    offsets: dict[str, int] = field(default_factory=dict)
    span_ids: set[str] = field(default_factory=set)
    lines: dict[str, int] = field(default_factory=dict)
    compacted: dict[str, int] = field(default_factory=dict)  # rows sent from compacted files, by origin

    @classmethod
    def load(cls, store: Path, destination: str, aliases: Iterable[str] = ()) -> PushState:
        """The record of `destination`, merged with those kept under its `aliases` (earlier
        versions filed a destination under the URL as given)."""
        state = cls(destination)
        for name in dict.fromkeys((destination, *aliases)):
            path = state_path(store, name)
            try:
                data = json.loads(path.read_text())
                offsets = {str(k): int(v) for k, v in (data.get("offsets") or {}).items()}
                span_ids = {str(s) for s in data.get("span_ids") or ()}
                lines = {str(k): int(v) for k, v in (data.get("lines") or {}).items()}
                compacted = {str(k): int(v) for k, v in (data.get("compacted") or {}).items()}
            except FileNotFoundError:
                continue
            except (OSError, ValueError, TypeError, AttributeError) as exc:
                raise ValueError(f"cannot read the push record {path}: {exc}") from exc
            for segment, offset in offsets.items():
                if offset > state.offsets.get(segment, 0):  # the count goes with the offset it is for
                    state.offsets[segment] = offset
                    state.lines.pop(segment, None)
                    if segment in lines:
                        state.lines[segment] = lines[segment]
            state.span_ids |= span_ids
            for origin, rows in compacted.items():
                state.compacted[origin] = max(rows, state.compacted.get(origin, 0))
        return state

    def save(self, store: Path) -> None:
        """Write the record atomically (a crash leaves the old one or the new one, never half)."""
        path = state_path(store, self.destination)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "destination": self.destination,
            "offsets": self.offsets,
            "lines": self.lines,
            "compacted": self.compacted,
            "span_ids": sorted(self.span_ids),
        }
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)


def segment_paths(store: Path) -> list[Path]:
    """The store's NDJSON segments, those a compaction replaced left out (their spans are read from the
    compacted files: see `_replay_compacted`)."""
    return [p for p in list_store(store).segments if p.is_file()]
