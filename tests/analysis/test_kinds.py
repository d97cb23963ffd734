"""Span categories and duration formatting."""

from __future__ import annotations

import pytest

from mastrace.analysis._kinds import format_duration, span_category


@pytest.mark.parametrize(
    ("name", "span_type", "error", "expected"),
    [
        ("coordination.session", "span", False, "session"),
        ("agent.agent_a.round_3", "span", False, "agent"),
        ("agent.agent_a.presentation", "span", False, "agent"),
        ("llm.openai.stream", "span", False, "llm"),
        ("mcp.fs.read", "span", False, "tool"),
        ("Tool execution: x", "span", False, "tool"),
        ("Agent vote: a -> b", "log", False, "event"),
        ("anything", "log", False, "event"),
        ("mcp.fs.read", "span", True, "error"),
        ("agent.helper", "span", False, "other"),
    ],
)
def test_span_category(name: str, span_type: str, error: bool, expected: str) -> None:
    """Each span name maps to its display category; errors override it."""
    assert span_category(name, span_type, error) == expected


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0004, "400µs"),
        (0.0123, "12.3ms"),
        (1.234, "1.23s"),
        (125.0, "2m05.0s"),
        (None, "-"),
    ],
)
def test_format_duration(seconds: float | None, text: str) -> None:
    """Durations print in the most readable unit."""
    assert format_duration(seconds) == text
