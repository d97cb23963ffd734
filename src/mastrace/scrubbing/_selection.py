"""What every first-pass matcher gives the engine: a `Selection` of the rules a text needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["NOTHING", "Gated", "Matcher", "Selection", "Source", "ordered"]


class Source(Protocol):
    """What a matcher reads of a rule's regular expression (a compiled one has both)."""

    @property
    def pattern(self) -> str: ...
    @property
    def flags(self) -> int: ...


class Gated(Protocol):
    """What a matcher needs to know of a compiled rule."""

    @property
    def gate(self) -> str: ...
    @property
    def keys(self) -> tuple[str, ...]: ...
    @property
    def index(self) -> int: ...
    @property
    def regex(self) -> Source | None: ...
    @property
    def on_low(self) -> bool: ...
    @property
    def finder(self) -> str | None: ...


@dataclass
class Selection:
    """What the first pass found in a text.

    Attributes:
        rules: Text and shape rules to search the whole text for.
        starts: Where a word rule's prefix starts a long run: (position, rule), for an anchored match.
        assignments: Whether the text mentions a secret word (look for secret-named assignments).
        low: The lower-cased text, when the matcher made it.
        separators: Where an `=` or `:` follows a name holding a secret word, when the matcher knows
            (otherwise every separator of a text that mentions one is looked at).
        context: Whether a secret word, or a service's name before a long run, stands before something
            that may be a value, in one of the syntaxes the context finder reads
            (`_contextual.CONTEXT_GATE`, `_contextual.SERVICE_GATE`).
    """

    rules: list[Any]
    starts: list[tuple[int, Any]]
    assignments: bool
    low: str | None = None
    separators: list[int] | None = None
    context: bool = False


NOTHING = Selection([], [], False)
"""The selection of a text no gate matched (shared: never modified)."""


class Matcher(Protocol):
    """One pass over an ASCII text that picks the rules it needs and where word rules may start."""

    name: str

    def select(self, text: str) -> Selection: ...


def ordered(chosen: list[Any]) -> list[Any]:
    """`chosen` without repeats, in the table's order."""
    return sorted(dict.fromkeys(chosen), key=_index) if len(chosen) > 1 else chosen


def _index(rule: Gated) -> int:
    return rule.index
