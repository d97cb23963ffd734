"""Test helpers: capture mastrace spans in memory and assert on them.

Installed as a pytest plugin: the `mastrace_spans` fixture gives a `CapturedSpans` for the test,
and `assert_tree()` compares the captured span tree with an indented outline.

Example:
    >>> import mastrace
    >>> from mastrace.testing import assert_tree, capture_spans
    >>> with capture_spans() as spans:
    ...     with mastrace.get_tracer().span("coordination.session"):
    ...         with mastrace.get_tracer().span("agent.a.round_0", {"massgen.outcome": "answer"}):
    ...             pass
    >>> spans.names()
    ['agent.a.round_0', 'coordination.session']
    >>> assert_tree(spans, '''
    ...     coordination.session
    ...       agent.*.round_0 [massgen.outcome=answer]
    ... ''')
"""

from __future__ import annotations

import difflib
import json
import re
import textwrap
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = ["CapturedSpans", "assert_tree", "capture_spans", "mastrace_spans"]


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
                with suppress(ValueError):
                    value = json.loads(value)
            out[key] = value
        return out

    def tree(self) -> str:
        """The captured spans as an indented outline (children in start order), for `assert_tree`."""
        return "\n".join(_render_plain(_forest(self.spans), 0))

    def clear(self) -> None:
        """Forget the spans captured so far."""
        self.exporter.clear()


class _KeepOpen(SpanExporter):
    """The capture's exporter as a destination: a `configure()` of the code under test rebuilds the
    destinations and shuts the old ones down, which must not close the capture."""

    def __init__(self, inner: InMemorySpanExporter) -> None:
        self.inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.inner.export(spans)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


# Destinations a capture turns off unless asked for: a test records in memory, nowhere else.
_CAPTURE_DEFAULTS: dict[str, Any] = {
    "local": False,
    "otlp": False,
    "logfire": False,
    "console": False,
    "sample_rate": 1.0,
}


@contextmanager
def capture_spans(**configure_kwargs: Any) -> Iterator[CapturedSpans]:
    """Record the spans of the block in memory, synchronously, whatever the code under test configures.

    Keyword arguments go to `mastrace.configure()`. By default nothing leaves the process: the local
    store, OTLP, Logfire and the console are off (pass `local=True` and so on to keep one) and every
    trace is kept. These settings win over a `mastrace.configure()` call made by the code under test
    (an application that configures itself on start): its spans are captured all the same, its
    other arguments (service name, scrubbing) apply, and its `mastrace.shutdown()` only flushes.
    """
    from .setup._config import configure, pin_capture, shutdown

    exporter = InMemorySpanExporter()
    pin = {**_CAPTURE_DEFAULTS, **configure_kwargs, "synchronous": True}
    pin["exporters"] = (_KeepOpen(exporter), *configure_kwargs.get("exporters", ()))
    pin_capture(pin)
    try:
        configure()
        yield CapturedSpans(exporter)
    finally:
        pin_capture(None)
        shutdown(timeout=2.0)


# --- assert_tree ---------------------------------------------------------------------------------
_INDENT = 2
_ELLIPSIS = "..."
_CHECKS = re.compile(r"^(?P<name>.*?)\s*\[(?P<checks>[^\[\]]*)\]$")
_CHECK = re.compile(r'\s*(?P<key>[^=,\s]+)\s*(?:=\s*(?P<value>"(?:[^"\\]|\\.)*"|[^,]*?))?\s*(?:,|$)')


@dataclass
class _Expected:
    pattern: str
    checks: dict[str, str | None] = field(default_factory=dict)
    children: list[_Expected] = field(default_factory=list)

    @property
    def is_ellipsis(self) -> bool:
        return self.pattern == _ELLIPSIS


@dataclass
class _Actual:
    span: ReadableSpan
    children: list[_Actual] = field(default_factory=list)


def assert_tree(
    spans: CapturedSpans | Iterable[ReadableSpan], outline: str, *, ordered: bool = False
) -> None:
    """Assert that the spans form the tree described by an indented outline.

    Each line of the outline is a span name, indented by two spaces per level under its parent.
    `*` in a name matches any text. A trailing `[key=value, other]` checks attributes: `key=value`
    compares the attribute's text (`*` allowed; booleans are `true`/`false`; quote values that
    contain a comma), a bare `key` only requires the attribute. A line `...` allows any further
    spans at its level. Spans whose parent was not captured are roots.

    Args:
        spans: A `CapturedSpans` or finished spans (for example `CapturedSpans.spans`).
        outline: The expected tree.
        ordered: Require siblings in start order; by default their order does not matter.

    Raises:
        AssertionError: The trees differ; the message is a unified diff of expected vs actual.
        ValueError: The outline is malformed (for example an odd indentation).

    Example:
        >>> assert_tree(spans, '''
        ...     coordination.session
        ...       agent.a.round_0 [massgen.outcome=answer]
        ...       agent.b.round_*
        ... ''')  # doctest: +SKIP
    """
    captured = spans.spans if isinstance(spans, CapturedSpans) else list(spans)
    expected = _parse_outline(outline)
    want = _render_expected(expected, 0)
    got = _render_aligned(expected, _forest(captured), 0, ordered)
    if want == got:
        return
    diff = "\n".join(
        difflib.unified_diff(want, got, "expected", "actual", n=max(len(want), len(got)), lineterm="")
    )
    raise AssertionError(f"span tree differs from the outline (- expected, + actual):\n{diff}")


def _parse_outline(outline: str) -> list[_Expected]:
    roots: list[_Expected] = []
    stack: list[_Expected] = []
    for number, raw in enumerate(textwrap.dedent(outline).splitlines(), 1):
        if not raw.strip():
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        depth, rest = divmod(indent, _INDENT)
        if rest or depth > len(stack):
            raise ValueError(f"outline line {number}: indent by {_INDENT} spaces per level: {raw!r}")
        node = _parse_line(raw.strip())
        del stack[depth:]
        (stack[-1].children if stack else roots).append(node)
        stack.append(node)
    return roots


def _parse_line(text: str) -> _Expected:
    match = _CHECKS.match(text)
    if match is None:
        return _Expected(text)
    checks: dict[str, str | None] = {}
    for item in _CHECK.finditer(match["checks"]):
        value = item["value"]
        if value is not None and value.startswith('"'):
            value = json.loads(value)
        checks[item["key"]] = value
    return _Expected(match["name"], checks)


def _forest(spans: Sequence[ReadableSpan]) -> list[_Actual]:
    nodes = {s.context.span_id: _Actual(s) for s in spans if s.context is not None}
    roots: list[_Actual] = []
    for node in nodes.values():
        parent = node.span.parent
        target = nodes.get(parent.span_id) if parent is not None else None
        (target.children if target is not None else roots).append(node)
    for node in nodes.values():
        node.children.sort(key=_start_key)
    roots.sort(key=_start_key)
    return roots


def _start_key(node: _Actual) -> tuple[int, str]:
    return node.span.start_time or 0, node.span.name


def _glob(pattern: str, text: str) -> bool:
    regex = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(regex, text, re.DOTALL) is not None


def _attr_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_attr_text(v) for v in value)
    return str(value)


def _rendered_checks(exp: _Expected, span: ReadableSpan) -> dict[str, str | None]:
    attrs = span.attributes or {}
    out: dict[str, str | None] = {}
    for key, want in exp.checks.items():
        if key not in attrs:
            out[key] = "<missing>"
        elif want is None:
            out[key] = None
        else:
            text = _attr_text(attrs[key])
            out[key] = want if _glob(want, text) else text
    return out


def _line(depth: int, name: str, checks: dict[str, str | None]) -> str:
    text = " " * (_INDENT * depth) + name
    if checks:
        parts = [k if v is None else f"{k}={json.dumps(v) if ',' in v else v}" for k, v in checks.items()]
        text += f" [{', '.join(parts)}]"
    return text


def _render_expected(nodes: list[_Expected], depth: int) -> list[str]:
    lines: list[str] = []
    for node in nodes:
        lines.append(_line(depth, node.pattern, node.checks))
        lines.extend(_render_expected(node.children, depth + 1))
    return lines


def _render_plain(nodes: list[_Actual], depth: int) -> list[str]:
    lines: list[str] = []
    for node in nodes:
        lines.append(_line(depth, node.span.name, {}))
        lines.extend(_render_plain(node.children, depth + 1))
    return lines


def _matches(exp: _Expected, act: _Actual, *, deep: bool, checks: bool = True) -> bool:
    if not _glob(exp.pattern, act.span.name):
        return False
    if checks and _rendered_checks(exp, act.span) != exp.checks:
        return False
    return not deep or _render_expected(exp.children, 0) == _render_aligned(
        exp.children, act.children, 0, False
    )


def _align(expected: list[_Expected], actual: list[_Actual], ordered: bool) -> list[_Actual | None]:
    """Pair each expected node with an actual sibling: best full match first, then looser ones."""
    wanted = [e for e in expected if not e.is_ellipsis]
    if ordered:
        return [actual[i] if i < len(actual) else None for i in range(len(wanted))]
    pairs: list[_Actual | None] = [None] * len(wanted)
    free = list(actual)
    for level in ({"deep": True}, {"deep": False}, {"deep": False, "checks": False}):
        for i, exp in enumerate(wanted):
            if pairs[i] is None:
                found = next((a for a in free if _matches(exp, a, **level)), None)
                if found is not None:
                    pairs[i] = found
                    free.remove(found)
    return pairs


def _render_aligned(expected: list[_Expected], actual: list[_Actual], depth: int, ordered: bool) -> list[str]:
    pairs = _align(expected, actual, ordered)
    used = {id(a) for a in pairs if a is not None}
    lines: list[str] = []
    paired = iter(pairs)
    for exp in expected:
        if exp.is_ellipsis:
            lines.append(_line(depth, _ELLIPSIS, {}))
            continue
        act = next(paired)
        if act is None:
            continue
        name = exp.pattern if _glob(exp.pattern, act.span.name) else act.span.name
        lines.append(_line(depth, name, _rendered_checks(exp, act.span)))
        lines.extend(_render_aligned(exp.children, act.children, depth + 1, ordered))
    if not any(e.is_ellipsis for e in expected):
        extra = [a for a in actual if id(a) not in used]
        lines.extend(_render_plain(extra, depth))
    return lines


try:  # the pytest plugin part: only when pytest is importable
    import pytest

    @pytest.fixture
    def mastrace_spans() -> Iterator[CapturedSpans]:
        """Capture the spans the test produces, in memory, scrubbed, even when the code under test
        calls `mastrace.configure()` itself (see `capture_spans`)."""
        with capture_spans() as captured:
            yield captured

except ImportError:  # pragma: no cover
    pass
