"""Terminal safety: what the `mastrace` command prints cannot drive the terminal.

Span names and attribute values come from any process that wrote to the store, or from a store
edited by hand. Printed raw, `\x1b]0;title\x07` retitles the terminal, `\x1b[2J` clears it and a
right-to-left override (U+202E) makes text read backwards. Every such character is shown as a
visible escape instead (`\u001b`, `\u202e`), which JSON output reads back as the same string; the
newlines and tabs the command itself writes stay.
"""

from __future__ import annotations

import re

from ..tracing._escape import escape_control

TYPE_CHECKING = False  # not `typing`'s: `mastrace --help` does not import it
if TYPE_CHECKING:
    from typing import TextIO

__all__ = ["SafeStream", "escape_control"]


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
