"""Control and bidirectional characters shown as visible escapes: text that came from spans can drive no
terminal and hide nothing from a model (the CLI's output, `mastrace mcp`'s answers)."""

from __future__ import annotations

import re

__all__ = ["escape_control"]

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
