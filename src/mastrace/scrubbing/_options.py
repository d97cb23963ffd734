"""Scrubbing options, the types a scrubbing callback sees, and nothing heavier.

Kept apart from the engine (`_engine`) and its rule table (`rules.json`) so that `configure()` can take and
validate options without compiling the rules: the engine is built on the export thread.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..exceptions import ConfigError

__all__ = ["JsonPath", "ScrubCallback", "ScrubMatch", "ScrubbingOptions"]

JsonPath = tuple["str | int", ...]


@dataclass(frozen=True)
class ScrubMatch:
    """What a `ScrubbingOptions.callback` receives for each candidate secret.

    Attributes:
        path: Where the value sits, e.g. `("attributes", "mastrace.config", "llm", "api_key")`.
        value: The value about to be redacted: the whole value for a key match, the matched
            substring for a value-shape match. Return it from the callback to keep it.
        pattern_match: The regex match that flagged it (on the key, or on the text).
        kind: `"key"` for a key-name match, else the value pattern's kind (`"openai_key"`, …).
    """

    path: JsonPath
    value: Any
    pattern_match: re.Match[str]
    kind: str


ScrubCallback = Callable[[ScrubMatch], Any]
"""Returns a replacement for the matched value, or None to scrub it."""


@dataclass(frozen=True)
class ScrubbingOptions:
    """How mastrace scrubs secrets before any exporter sees a span.

    Attributes:
        extra_patterns: More regexes (case-insensitive). A key matching one is blanked like a
            default secret key; a substring matching one is replaced by `[Scrubbed: custom]`.
        allow_keys: Key names (case-insensitive, exact) never blanked because of their name.
            Their values are still searched for secret shapes.
        callback: Called with a `ScrubMatch` for each candidate; return a replacement to keep
            instead, or None to scrub.

    Example:
        >>> import mastrace
        >>> mastrace.configure(scrubbing=mastrace.ScrubbingOptions(extra_patterns=[r"internal-\\d+"]))
        ... # doctest: +SKIP
    """

    extra_patterns: Sequence[str] = ()
    allow_keys: Sequence[str] = ()
    callback: ScrubCallback | None = None

    def __post_init__(self) -> None:
        if isinstance(self.extra_patterns, str) or isinstance(self.allow_keys, str):
            raise ConfigError("extra_patterns and allow_keys take a sequence of strings, not one string")
        object.__setattr__(self, "extra_patterns", tuple(self.extra_patterns))
        object.__setattr__(self, "allow_keys", tuple(self.allow_keys))
        for pattern in self.extra_patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(f"invalid scrubbing pattern {pattern!r}: {exc}") from exc
        if self.callback is not None and not callable(self.callback):
            raise ConfigError(f"scrubbing callback must be callable, not {self.callback!r}")
