"""Test helpers: capture mastrace spans in memory and assert on them.

Installed as a pytest plugin: the `mastrace_spans` fixture gives a `CapturedSpans` for the test.

Example:
    >>> import mastrace
    >>> from mastrace.testing import capture_spans
    >>> with capture_spans() as spans:
    ...     with mastrace.get_tracer().span("coordination.session"):
    ...         pass
    >>> spans.names()
    ['coordination.session']
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = ["CapturedSpans", "capture_spans", "mastrace_spans"]


class CapturedSpans:
    """Finished spans captured in memory, in the order they ended, after scrubbing."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter

    @property
    def spans(self) -> list[ReadableSpan]:
        """Every finished span so far."""
        return list(self.exporter.get_finished_spans())

    def names(self) -> list[str]:
        """The names of the finished spans, in end order."""
        return [s.name for s in self.spans]

    def by_name(self, name: str) -> list[ReadableSpan]:
        """All finished spans called `name`."""
        return [s for s in self.spans if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        """The single finished span called `name` (AssertionError when there are 0 or several)."""
        found = self.by_name(name)
        assert len(found) == 1, f"expected one span {name!r}, found {len(found)}: {self.names()}"
        return found[0]

    def parent_of(self, span: ReadableSpan) -> ReadableSpan | None:
        """The captured parent of `span`, or None for a root (or a parent not captured)."""
        if span.parent is None:
            return None
        pid = span.parent.span_id
        return next((s for s in self.spans if s.context is not None and s.context.span_id == pid), None)

    def attributes(self, name: str) -> dict[str, Any]:
        """The attributes of the single span called `name`, JSON strings decoded."""
        out: dict[str, Any] = {}
        for key, value in (self.one(name).attributes or {}).items():
            if isinstance(value, str) and value[:1] in "{[":
                try:
                    value = json.loads(value)
                except ValueError:
                    pass
            out[key] = value
        return out

    def clear(self) -> None:
        """Forget the spans captured so far."""
        self.exporter.clear()


@contextmanager
def capture_spans(**configure_kwargs: Any) -> Iterator[CapturedSpans]:
    """Configure mastrace to export into memory (synchronously) for the duration of the block.

    Keyword arguments go to `mastrace.configure()`; by default the local store is off.
    """
    from ._config import configure, shutdown

    exporter = InMemorySpanExporter()
    configure_kwargs.setdefault("local", False)
    configure(exporters=[exporter], synchronous=True, **configure_kwargs)
    try:
        yield CapturedSpans(exporter)
    finally:
        shutdown(timeout=2.0)


try:  # the pytest plugin part: only when pytest is importable
    import pytest

    @pytest.fixture
    def mastrace_spans() -> Iterator[CapturedSpans]:
        """Capture the spans the test produces (mastrace configured in memory, scrubbing on)."""
        with capture_spans() as captured:
            yield captured

except ImportError:  # pragma: no cover
    pass
