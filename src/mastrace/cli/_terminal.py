"""Terminal safety: what the `mastrace` command prints cannot drive the terminal.

Span names and attribute values come from any process that wrote to the store, or from a store
edited by hand. Printed raw, `\x1b]0;title\x07` retitles the terminal, `\x1b[2J` clears it and a
right-to-left override (U+202E) makes text read backwards. Every such character is shown as a
visible escape instead (`\u001b`, `\u202e`), which JSON output reads back as the same string; the
newlines and tabs the command itself writes stay.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # not `typing`'s: `mastrace --help` does not import it
if TYPE_CHECKING:
    from typing import TextIO

__all__ = ["SafeStream", "escape_control"]

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional formatting characters.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    # `\u001b` rather than `\x1b`: inside JSON output (`--format json`) it is the same string.
    return f"\\u{ord(match.group()):04x}"


def escape_control(text: str) -> str:
    """`text` with control and bidi characters shown as escapes; tabs and newlines kept.

    >>> escape_control("agent\\x1b[31m \\u202etxt")
    'agent\\\\u001b[31m \\\\u202etxt'
    """
    return _UNSAFE.sub(_visible, text) if not text.isascii() or _UNSAFE.search(text) else text


class SafeStream:
    """A text stream that escapes control characters in everything written to it.

    Args:
        inner: The stream written to (usually `sys.stdout`).
        keep: Escape sequences this program writes on purpose (e.g. the spinner's line clear).
    """

    def __init__(self, inner: TextIO, keep: tuple[str, ...] = ()) -> None:
        self.inner = inner
        self.keep = keep

    def write(self, text: str) -> int:
        if self.keep and any(k in text for k in self.keep):
            parts = re.split("(" + "|".join(map(re.escape, self.keep)) + ")", text)
            safe = "".join(p if p in self.keep else escape_control(p) for p in parts)
        else:
            safe = escape_control(text)
        self.inner.write(safe)
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)
