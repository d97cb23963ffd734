"""Plain-text tables."""

from __future__ import annotations

from mastrace.analysis._texttable import text_table


def test_columns_align_and_numbers_go_right() -> None:
    """Cells are padded to the column width; `r` columns are right-aligned."""
    text = text_table(["name", "n"], [["alpha", 1], ["b", 100]], align="lr")
    assert text.splitlines() == ["name  │   n", "──────┼────", "alpha │   1", "b     │ 100"]


def test_long_and_multiline_cells_are_shortened() -> None:
    """Cells longer than `max_cell` end with an ellipsis and newlines become spaces."""
    text = text_table(["v"], [["one\ntwo"], ["x" * 30]], max_cell=10)
    assert text.splitlines()[2:] == ["one two", "xxxxxxxxx…"]
