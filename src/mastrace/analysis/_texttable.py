"""Plain-text tables drawn with box-drawing characters (no third-party dependency)."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Any

__all__ = ["text_table"]


def _width(text: str) -> int:
    # East-Asian wide characters take two columns in a terminal.
    return sum(2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text)


def _pad(text: str, width: int, right: bool) -> str:
    gap = " " * (width - _width(text))
    return gap + text if right else text + gap


def _text(value: Any, limit: int) -> str:
    text = "" if value is None else str(value)
    text = " ".join(text.split()) if ("\n" in text or "\t" in text) else text
    return text if len(text) <= limit else text[: limit - 1] + "…"


def text_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    align: str = "",
    max_cell: int = 60,
) -> str:
    """Render rows as an aligned table.

    Args:
        headers: Column titles.
        rows: Cell values; None renders empty.
        align: One letter per column, `r` for right-aligned (numbers); other columns are left-aligned.
        max_cell: Longer cells are cut with an ellipsis.

    Example:
        >>> print(text_table(["name", "n"], [["a", 1]], align="lr"), end="")
        name │ n
        ─────┼──
        a    │ 1
    """
    cells = [[_text(v, max_cell) for v in row] for row in rows]
    titles = [str(h) for h in headers]
    widths = [_width(t) for t in titles]
    for row in cells:
        for i, cell in enumerate(row[: len(widths)]):
            widths[i] = max(widths[i], _width(cell))
    right = [align[i : i + 1] == "r" for i in range(len(titles))]
    lines = [" │ ".join(_pad(t, widths[i], right[i]) for i, t in enumerate(titles)).rstrip()]
    lines.append("─┼─".join("─" * w for w in widths))
    for row in cells:
        padded = [_pad(row[i] if i < len(row) else "", widths[i], right[i]) for i in range(len(titles))]
        lines.append(" │ ".join(padded).rstrip())
    return "\n".join(lines) + "\n"
