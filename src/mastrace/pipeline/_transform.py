"""The export-thread transform: scrub, coerce and cap a finished span before any exporter sees it.

`prepare_span` runs once per span per destination, off the caller's thread. Spans whose
attributes are small, valid and secret-free are returned as they are; otherwise a new
`ReadableSpan` carries the cleaned attributes, events, links and status, plus
`mastrace.scrubbed` (the paths that were scrubbed) and `mastrace.truncated`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from itertools import islice
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import Link, Status, StatusCode

from .. import semconv
from ..scrubbing._engine import Scrubber, ScrubTrail
from ..scrubbing._options import JsonPath
from ..tracing._errors import log_internal_error
from ..tracing._otel_private import span_attributes, span_is_bare
from ..tracing._snapshot import (
    _INT_MAX,
    _INT_MIN,
    Limits,
    cap_json,
    cap_string,
    coerce_value,
    dumps_json,
    schema_for,
    utf8_safe,
)

__all__ = ["coerce_value", "prepare_span"]

_SHORT = 8  # shorter strings hold no secret shape
_SCREENED = 1_024
_SPAN_ROOT: JsonPath = ("attributes",)
_UNTOUCHED = frozenset({semconv.MASTRACE_SCRUBBED, semconv.MASTRACE_TRUNCATED})
_MESSAGE_KEYS = frozenset({semconv.LOGFIRE_MSG, semconv.LOGFIRE_MSG_TEMPLATE})


def prepare_span(span: ReadableSpan, scrubber: Scrubber | None, limits: Limits) -> ReadableSpan:
    """Return `span` with secrets scrubbed, values made valid OTel types, and sizes capped.

    Ids, kind, times, scope and the `logfire.*` keys are kept as they are, except that free text
    (the span name, event names, `logfire.msg`) is scrubbed of secret-shaped values; resource
    attributes are scrubbed like span attributes. When nothing needs changing the span itself is
    returned. Never raises: when scrubbing itself fails, the span leaves with its ids and times but
    without its text (`_withheld`), and the failure is logged once.

    Args:
        span: A finished span.
        scrubber: The scrubber to apply, or None to only coerce and cap.
        limits: Size limits for strings, JSON strings, sequences and attribute counts.
    """
    try:
        resource = clean_resource(span.resource, scrubber)
        if resource is span.resource and _untouched(span, scrubber, limits):
            return span
        return _Cleaner(scrubber, limits).span(span, resource)
    except Exception as exc:
        log_internal_error("prepare_span", exc)
        return span if scrubber is None else _withheld(span, exc)


_MAX_CACHED_RESOURCES = 64


def clean_resource(resource: Resource, scrubber: Scrubber | None) -> Resource:
    """`resource` with its attributes scrubbed (`OTEL_RESOURCE_ATTRIBUTES` can carry a secret).

    A process has one or a few resources, each shared by every span: each is scrubbed once and
    remembered, and returned as it is when nothing in it is secret.
    """
    if scrubber is None:
        return resource
    cache = scrubber.resources
    known = cache.get(id(resource))
    if known is not None and known[0] is resource:
        return known[1]
    attributes = resource.attributes
    cleaned_attributes, _ = scrubber.scrub_attributes(attributes, ("resource",))
    changed = any(cleaned_attributes[key] is not value for key, value in attributes.items())
    cleaned = Resource(cleaned_attributes, resource.schema_url) if changed else resource
    if len(cache) >= _MAX_CACHED_RESOURCES:
        cache.clear()
    cache[id(resource)] = (resource, cleaned)
    return cleaned


def _withheld(span: ReadableSpan, exc: BaseException) -> ReadableSpan:
    """A copy of `span` that keeps its ids, times and status code but none of its text.

    Used when scrubbing itself failed: a span that could not be checked must not leave as it is.
    """
    return ReadableSpan(
        name="[Scrubbed: span could not be checked]",
        context=span.context,
        parent=span.parent,
        resource=Resource({}, span.resource.schema_url),
        attributes={semconv.MASTRACE_SCRUBBED: f"<scrubbing failed: {type(exc).__name__}>"},
        kind=span.kind,
        status=Status(span.status.status_code),
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def _untouched(span: ReadableSpan, scrubber: Scrubber | None, limits: Limits) -> bool:
    """Whether `_Cleaner` would return `span` as it is: the common case, tested without one.

    Only spans without events, links or a status description qualify; their attributes are
    checked inline, as `_plain` and `Scrubber.key_match` would, using the scrubber's caches.
    """
    if not span_is_bare(span) or span.status.description:
        return False
    if scrubber is not None and not (span.name in scrubber.plain_texts or scrubber.is_plain_text(span.name)):
        return False
    attrs = span_attributes(span)
    if len(attrs) > limits.max_attributes:
        return False
    short = min(limits.max_string_chars, _SCREENED)
    if scrubber is None:
        return all(_plain(value, short, None) for value in attrs.values())
    keys, texts = scrubber.plain_keys, scrubber.plain_texts
    for key, value in attrs.items():
        t = type(value)
        if t is str:
            if len(value) >= _SHORT and not (
                len(value) <= short
                and utf8_safe(value)
                and (
                    value in texts
                    or scrubber.is_plain_text(value)
                    or (key not in _MESSAGE_KEYS and scrubber.is_plain_json(value))
                )
            ):
                return False
        elif t is int:
            if not _INT_MIN <= value <= _INT_MAX:
                return False
        elif t is tuple:  # finish reasons, model names, ids: texts, each tested as `_plain` tests one
            if not value or len(value) > limits.max_sequence_items:
                return False
            for item in value:  # each one capped and made UTF-8-safe, however short
                if type(item) is not str or not utf8_safe(item) or not _plain(item, short, scrubber):
                    return False
        elif t is not float and t is not bool:
            return False
        if key not in keys and scrubber.key_match(key) is not None:
            return False
    return True


def _plain(value: Any, short: int, scrubber: Scrubber | None) -> bool:
    """Whether `value` is a valid, small, secret-free attribute value (a quick, conservative test)."""
    t = type(value)
    if t is bool or t is float:
        return True
    if t is int:
        return bool(_INT_MIN <= value <= _INT_MAX)
    if t is str:
        return len(value) < _SHORT or (
            len(value) <= short and utf8_safe(value) and (scrubber is None or scrubber.is_plain_text(value))
        )
    return False


class _Cleaner:
    """One pass over one span: remembers what was scrubbed, cut, and turned into JSON."""

    __slots__ = ("json_texts", "limits", "schema", "scrubber", "trail", "truncated")

    def __init__(self, scrubber: Scrubber | None, limits: Limits) -> None:
        self.scrubber = scrubber
        self.limits = limits
        self.trail = ScrubTrail()
        self.truncated = False
        self.json_texts: dict[str, str] = {}
        self.schema = ""

    # -- span -------------------------------------------------------------------------------------
    def span(self, span: ReadableSpan, resource: Resource) -> ReadableSpan:
        current = span_attributes(span)
        schema = current.get(semconv.LOGFIRE_JSON_SCHEMA)
        self.schema = schema if isinstance(schema, str) else ""
        attrs = self.attributes(current, _SPAN_ROOT)
        events = self.events(span.events)
        links = self.links(span.links)
        status = self.status(span.status)
        name = self.text_value(span.name, ("span_name",))
        unchanged = attrs is None and events is None and links is None and status is None
        if unchanged and name == span.name and resource is span.resource:
            return span
        attributes = dict(span.attributes or {}) if attrs is None else attrs
        self.annotate(attributes)
        return ReadableSpan(
            name=name,
            context=span.context,
            parent=span.parent,
            resource=resource,
            attributes=_with_dropped(attributes, span.dropped_attributes),
            events=_events_like(span, events),
            links=_links_like(span, links),
            kind=span.kind,
            instrumentation_info=getattr(span, "_instrumentation_info", None),
            status=span.status if status is None else status,
            start_time=span.start_time,
            end_time=span.end_time,
            instrumentation_scope=span.instrumentation_scope,
        )

    def text_value(self, value: Any, path: JsonPath) -> Any:
        """A free-text value (a name, a message) with secret shapes scrubbed; other types as they are."""
        if self.scrubber is None or not isinstance(value, str) or self.scrubber.is_plain_text(value):
            return value
        return self.scrubber._scrub_text(value, path, self.trail)  # records the path in the trail

    def events(self, events: Sequence[Event]) -> list[Event] | None:
        changed = False
        out: list[Event] = []
        for i, event in enumerate(events):
            attrs = self.attributes(event.attributes or {}, ("otel_events", i, "attributes"))
            name = self.text_value(event.name, ("otel_events", i, "name"))
            if attrs is None and name == event.name:
                out.append(event)
                continue
            changed = True
            new_attrs = _with_dropped(
                attrs if attrs is not None else dict(event.attributes or {}), event.dropped_attributes
            )
            out.append(Event(name, new_attrs, event.timestamp))
        return out if changed else None

    def links(self, links: Sequence[Link]) -> list[Link] | None:
        changed = False
        out: list[Link] = []
        for i, link in enumerate(links):
            attrs = self.attributes(link.attributes or {}, ("otel_links", i, "attributes"))
            if attrs is None:
                out.append(link)
                continue
            changed = True
            out.append(Link(link.context, _with_dropped(attrs, link.dropped_attributes)))
        return out if changed else None

    def status(self, status: Status) -> Status | None:
        description = status.description
        if not description:
            return None
        new = description
        if self.scrubber is not None:
            new = self.scrubber.scrub_attribute("otel_status_message", new, (), self.trail)
        new = self.text(str(new))
        return None if new is description else Status(StatusCode.ERROR, new)

    # -- attributes -------------------------------------------------------------------------------
    def attributes(self, attrs: Mapping[str, Any], root: JsonPath) -> dict[str, Any] | None:
        """The cleaned attributes, or None when every value can stay as it is."""
        out: dict[str, Any] | None = None
        if len(attrs) > self.limits.max_attributes:
            out = dict(islice(attrs.items(), self.limits.max_attributes))
            self.truncated = True
        scrubber = self.scrubber
        short = min(self.limits.max_string_chars, _SCREENED)
        for key, value in attrs.items() if out is None else list(out.items()):
            if _plain(value, short, scrubber) and (scrubber is None or scrubber.key_match(key) is None):
                continue  # the common case: a small valid value under an ordinary key
            new = self.value(key, value, root)
            if new is value and new is not None:
                continue
            if out is None:
                out = dict(attrs)
            if new is None:
                del out[key]
            else:
                out[key] = new
        return out

    def value(self, key: str, value: Any, root: JsonPath) -> Any:
        if key in _MESSAGE_KEYS:  # free text shown as the record's message: scrubbed by value shape
            return self.text_value(value, (*root, key))
        if key.startswith("logfire.") or key in _UNTOUCHED:
            return value
        coerced, is_json = coerce_value(value)
        if coerced is None:
            return None
        if self.scrubber is not None:
            scrubbed = self.scrubber.scrub_attribute(key, coerced, root, self.trail)
            if scrubbed is not coerced:  # a callback may hand back anything
                coerced, was_json = coerce_value(scrubbed)
                is_json = is_json or was_json
                if coerced is None:
                    return None
        if type(coerced) is str:
            capped = self.text(coerced, json_ok=True)
            reshaped = is_json or (capped is not coerced and f'"{key}"' in self.schema)
            if reshaped and root == _SPAN_ROOT and capped[:1] in "{[":
                self.json_texts[key] = capped  # new or reshaped JSON: logfire.json_schema must follow
            coerced = capped
        elif type(coerced) is tuple:
            coerced = self.sequence(coerced)
        return coerced

    def sequence(self, items: tuple[Any, ...]) -> tuple[Any, ...]:
        limit = self.limits.max_sequence_items
        if len(items) > limit:
            items = items[:limit]
            self.truncated = True
        if any(isinstance(v, str) for v in items):
            new = tuple(self.text(v) if isinstance(v, str) else v for v in items)
            if any(a is not b for a, b in zip(new, items, strict=True)):
                return new
        return items

    def text(self, s: str, *, json_ok: bool = False) -> str:
        """`s` capped to the limits and encodable as UTF-8; `s` itself when already fine."""
        limits = self.limits
        if len(s) > limits.max_string_chars:
            if json_ok and s[:1] in "{[":
                s, cut = cap_json(s, limits.max_json_chars, string_limit=limits.max_string_chars)
            else:
                s, cut = cap_string(s, limits.max_string_chars), True
            self.truncated = self.truncated or cut
        if not s.isascii():
            try:
                s.encode("utf-8")
            except UnicodeEncodeError:  # lone surrogates, e.g. from os.fsdecode
                s = s.encode("utf-8", "replace").decode("utf-8")
        return s

    # -- span-level annotations -------------------------------------------------------------------
    def annotate(self, attributes: dict[str, Any]) -> None:
        if self.trail.paths:
            attributes[semconv.MASTRACE_SCRUBBED] = _merge_scrubbed(
                attributes.get(semconv.MASTRACE_SCRUBBED), self.trail.paths
            )
        if self.truncated:
            attributes[semconv.MASTRACE_TRUNCATED] = True
        if self.json_texts:
            attributes[semconv.LOGFIRE_JSON_SCHEMA] = _merge_schema(
                attributes.get(semconv.LOGFIRE_JSON_SCHEMA), self.json_texts
            )


def _merge_scrubbed(existing: Any, paths: list[str]) -> str:
    previous: list[Any] = []
    if isinstance(existing, str):
        try:
            loaded = json.loads(existing)
            previous = loaded if isinstance(loaded, list) else []
        except ValueError:
            previous = []
    return dumps_json(previous + [p for p in paths if p not in previous])


def _merge_schema(existing: Any, texts: Mapping[str, str]) -> str:
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    if isinstance(existing, str):
        try:
            loaded = json.loads(existing)
            if isinstance(loaded, dict) and isinstance(loaded.get("properties"), dict):
                schema = loaded
        except ValueError:
            pass
    properties = schema["properties"]
    for key, text in texts.items():
        properties[key] = {**properties.get(key, {}), **schema_for(text)}
    return dumps_json(schema)


def _with_dropped(attrs: dict[str, Any], dropped: int) -> Any:
    """Keep the count of attributes the SDK dropped, which only `BoundedAttributes` can carry."""
    if not dropped:
        return attrs
    bounded = BoundedAttributes(maxlen=None, attributes=attrs, immutable=True)
    bounded.dropped = dropped
    return bounded


def _events_like(span: ReadableSpan, events: list[Event] | None) -> Sequence[Event]:
    if events is None:
        return getattr(span, "_events", span.events)
    return _bounded_list(events, span.dropped_events)


def _links_like(span: ReadableSpan, links: list[Link] | None) -> Sequence[Link]:
    if links is None:
        return getattr(span, "_links", span.links)
    return _bounded_list(links, span.dropped_links)


def _bounded_list(items: list[Any], dropped: int) -> Sequence[Any]:
    if not dropped:
        return items
    bounded = BoundedList.from_seq(None, items)
    bounded.dropped = dropped
    return bounded
