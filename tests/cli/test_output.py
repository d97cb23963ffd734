"""CLI output helpers: result formatting, writing files and the TTY-only progress indicator."""

from __future__ import annotations

import io
import json
import time
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest

from mastrace.cli._output import format_rows, progress, write_output
from mastrace.exceptions import MastraceError


class FakeTTY(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_json_rows_serialise_timestamps_and_decimals() -> None:
    """JSON output turns DuckDB's datetimes and decimals into JSON values."""
    text = format_rows(["t", "d"], [(datetime(2024, 1, 2, 3, 4, 5), Decimal("1.50"))], "json")
    assert json.loads(text) == [{"t": "2024-01-02T03:04:05", "d": 1.5}]


def test_csv_rows_encode_nested_values_as_json() -> None:
    """Lists and dicts become JSON text in a CSV cell; None becomes an empty cell."""
    text = format_rows(["a", "b", "c"], [([1, 2], {"k": "v"}, None)], "csv")
    assert text.splitlines() == ["a,b,c", '"[1, 2]","{""k"": ""v""}",']


def test_table_right_aligns_numbers_and_counts_rows() -> None:
    """Numeric columns are right-aligned and the row count follows the table."""
    lines = format_rows(["name", "n"], [("x", 5), ("longer", 10)], "table").splitlines()
    assert lines[2] == "x      │  5" and lines[-1] == "(2 rows)"


def test_write_output_writes_a_file_or_stdout(tmp_path: Path) -> None:
    """A file path is written; `-` goes to the given stdout; a missing folder is an error, not created."""
    out = io.StringIO()
    assert write_output("hi\n", str(tmp_path / "b.md"), None, out) == tmp_path / "b.md"
    assert (tmp_path / "b.md").read_text() == "hi\n"
    with pytest.raises(MastraceError, match="does not exist"):
        write_output("x", str(tmp_path / "a" / "b.md"), None, out)
    assert not (tmp_path / "a").exists()
    assert write_output("to stdout\n", "-", "ignored.md", out) is None
    assert out.getvalue() == "to stdout\n"


def test_write_output_errors_are_mastrace_errors(tmp_path: Path) -> None:
    """An unwritable target raises MastraceError (exit code 2 in the CLI), not OSError."""
    (tmp_path / "file").write_text("")
    with pytest.raises(MastraceError, match="cannot write"):
        write_output("x", str(tmp_path / "file" / "sub.md"), None, io.StringIO())


def test_progress_draws_on_a_tty_and_clears_the_line() -> None:
    """On a terminal the spinner shows the label and elapsed time, then erases itself."""
    stream = FakeTTY()
    with progress("analyzing", stream=stream, delay=0.0):
        deadline = time.monotonic() + 10
        while "analyzing" not in stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.02)
    text = stream.getvalue()
    assert "analyzing" in text and text.endswith("\r\x1b[2K")


def test_progress_is_silent_when_not_a_tty() -> None:
    """Redirected stderr gets no spinner."""
    stream = io.StringIO()
    with progress("analyzing", stream=stream, delay=0.0):
        time.sleep(0.15)
    assert stream.getvalue() == ""
