"""Output helpers for the CLI: writing results, table/JSON/CSV formatting and a progress indicator."""

from __future__ import annotations

import csv
import io
import json
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, TextIO

from ..analysis._texttable import text_table
from ..exceptions import MastraceError

__all__ = ["format_rows", "json_default", "progress", "write_output"]

_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def json_default(value: Any) -> Any:
    """JSON fallback for values DuckDB returns: datetimes, decimals, UUIDs, bytes."""
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    return str(value)


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, ensure_ascii=False, default=json_default)
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


def _table_cell(value: Any) -> Any:
    """A table cell: numbers with thousands separators and no float noise (JSON and CSV keep them raw)."""
    if not _is_number(value):
        return _cell(value)
    if isinstance(value, int):
        return f"{value:,}"
    number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        return str(value)
    if number != 0 and (abs(number) < 1e-3 or abs(number) >= 1e15):
        return f"{number:.6g}"
    # Up to six decimals, trailing zeros dropped: 0.026272499999999997 reads 0.026272.
    return f"{number:,.6f}".rstrip("0").rstrip(".")


def format_rows(names: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str) -> str:
    """Query results as a box-drawn `table`, a `json` array of objects, or `csv` with a header.

    The table shows numbers with thousands separators and at most six decimals (small and huge ones
    in scientific notation); JSON and CSV keep every value exact, for programs.
    """
    if fmt == "json":
        records = [dict(zip(names, row, strict=True)) for row in rows]
        return json.dumps(records, indent=2, ensure_ascii=False, default=json_default) + "\n"
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(names)
        writer.writerows([[_cell(v) for v in row] for row in rows])
        return buffer.getvalue()
    align = "".join("r" if rows and _is_number(rows[0][i]) else "l" for i in range(len(names)))
    table = text_table(names, [[_table_cell(v) for v in row] for row in rows], align=align)
    return table + f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n"


def write_output(text: str, destination: str | None, default: str | None, stdout: TextIO) -> Path | None:
    """Write `text` to `destination` (or `default`); `-`, or no file at all, means standard output.

    Returns:
        The file written, or None when the text went to standard output.
    """
    target = destination if destination is not None else default
    if target is None or target == "-":
        stdout.write(text)
        return None
    path = Path(target).expanduser()
    if not path.parent.is_dir():
        # A mistyped folder is an error, not a tree of new folders somewhere unexpected.
        raise MastraceError(f"cannot write {path}: the folder {path.parent} does not exist")
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise MastraceError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return path


@contextmanager
def progress(label: str, stream: TextIO | None = None, delay: float = 0.3) -> Iterator[None]:
    """Show a spinner with elapsed time on stderr while the block runs, only when stderr is a TTY.

    Nothing is drawn for blocks shorter than `delay` seconds, so quick commands stay quiet.
    """
    out = stream if stream is not None else sys.stderr
    if not getattr(out, "isatty", lambda: False)():
        yield
        return
    done = threading.Event()
    started = time.monotonic()

    def spin() -> None:
        if done.wait(delay):
            return
        i = 0
        while not done.wait(0.1):
            out.write(f"\r{_SPINNER[i % len(_SPINNER)]} {label} {time.monotonic() - started:5.1f}s")
            out.flush()
            i += 1
        out.write("\r\x1b[2K")
        out.flush()

    thread = threading.Thread(target=spin, name="mastrace-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
