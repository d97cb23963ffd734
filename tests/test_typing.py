"""mastrace.typing: the public aliases resolve and the scrub callback type is the one configure() calls."""

from __future__ import annotations

import mastrace
from mastrace import typing as mt
from mastrace.testing import capture_spans


def test_every_public_alias_resolves() -> None:
    """Each name in `mastrace.typing.__all__` is importable from the module."""
    assert all(getattr(mt, name, None) is not None for name in mt.__all__)


def test_a_scrub_callback_receives_a_scrub_match() -> None:
    """A callback typed `ScrubCallback` is handed a `ScrubMatch` and can keep the value."""
    seen: list[object] = []

    def keep(match: mt.ScrubMatch) -> object:
        seen.append(match)
        return match.value

    callback: mt.ScrubCallback = keep
    options = mastrace.ScrubbingOptions(callback=callback)
    with (
        capture_spans(scrubbing=options) as spans,
        mastrace.get_tracer().span("s", attributes={"password": "not-really-secret"}),
    ):
        pass
    assert spans.one("s").attributes["password"] == "not-really-secret"
    assert seen and isinstance(seen[0], mt.ScrubMatch)
