"""Scrub the attributes Logfire's scrubber passes over as safe.

Logfire's scrubber copies a set of keys unexamined (`BaseScrubber.SAFE_KEYS`): GenAI message content
(`gen_ai.input.messages`, `gen_ai.output.messages`, `gen_ai.system_instructions`,
`gen_ai.tool.definitions`), `exception.message` and others. mastrace's scrubbing callback is never
called for them, so a secret in a captured tool call's arguments or tool result would reach Logfire
while the local store and OTLP have it scrubbed. When mastrace configures Logfire, the scrubber
Logfire built for that call is given one more step: after its own pass, those keys of the span and
of its events go through mastrace's scrubber (which keeps what its policy keeps, such as token counts).
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import Event
from opentelemetry.util.types import Attributes

from ..scrubbing._engine import Scrubber
from ..scrubbing._shared import SharedScrubber
from ..tracing._errors import warn_once

__all__ = ["scrub_logfire_safe_keys"]


def scrub_logfire_safe_keys(logfire: Any, shared: SharedScrubber) -> None:
    """Make the scrubber of Logfire's current configuration also scrub the keys it calls safe."""
    try:
        from logfire._internal.scrubbing import BaseScrubber

        scrubber = logfire.DEFAULT_LOGFIRE_INSTANCE.config.scrubber
        own_scrub_span = scrubber.scrub_span
        keys = frozenset(k for k in BaseScrubber.SAFE_KEYS if not k.startswith("logfire."))
    except Exception:  # another Logfire release: say so once rather than fail configure()
        warn_once(
            "logfire.safe_keys",
            "mastrace: this logfire release is not one mastrace knows; attributes Logfire deems safe "
            "(such as captured GenAI messages) are sent to Logfire as recorded",
        )
        return

    def scrub_span(span: dict[str, Any]) -> None:
        own_scrub_span(span)
        ours = shared.get()
        attributes = span.get("attributes") or {}
        if not keys.isdisjoint(attributes):
            span["attributes"] = _scrubbed(ours, attributes, keys, ("attributes",))
        events = span.get("events") or ()
        if any(e.attributes and not keys.isdisjoint(e.attributes) for e in events):
            span["events"] = [
                Event(
                    e.name,
                    _scrubbed(ours, e.attributes or {}, keys, ("events", i, "attributes")),
                    e.timestamp,
                )
                if e.attributes and not keys.isdisjoint(e.attributes)
                else e
                for i, e in enumerate(events)
            ]

    scrubber.scrub_span = scrub_span


def _scrubbed(ours: Scrubber, attributes: Any, keys: frozenset[str], root: tuple[Any, ...]) -> Attributes:
    picked = {k: v for k, v in attributes.items() if k in keys}
    cleaned, _ = ours.scrub_attributes(picked, root)
    return {**attributes, **cleaned}
