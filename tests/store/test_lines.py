"""Finding the lines too long for any reader without reading every byte, and reading around them."""

from __future__ import annotations

import io
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from mastrace.store._lines import bounded_lines, long_lines, readable_file

LIMIT = 1_000  # the same algorithm as for 16 MiB, on files a test can write


def naive(data: bytes, limit: int) -> list[tuple[int, int]]:
    """Every line over `limit`, found by reading every byte (an unfinished last line counts too)."""
    out, start = [], 0
    for i, byte in enumerate(data):
        if byte == 10:
            if i + 1 - start > limit:
                out.append((start, i + 1))
            start = i + 1
    if len(data) - start > limit:
        out.append((start, len(data)))
    return out


@settings(max_examples=300, deadline=None)
@given(
    lengths=st.lists(
        st.one_of(st.integers(1, 60), st.integers(LIMIT - 3, LIMIT + 3), st.integers(LIMIT, 5 * LIMIT)),
        max_size=25,
    ),
    unfinished=st.integers(0, 3 * LIMIT),
)
def test_the_sampled_scan_finds_exactly_the_long_lines(
    tmp_path_factory: object, lengths: list[int], unfinished: int
) -> None:
    """Whatever the line lengths, the window scan finds the same long lines as reading every byte."""
    data = b"".join(b"x" * (n - 1) + b"\n" for n in lengths) + b"y" * unfinished
    path = Path(tmp_path_factory.mktemp("lines")) / "segment.ndjson"  # type: ignore[attr-defined]
    path.write_bytes(data)
    found = long_lines(path, limit=LIMIT)
    if len(data) <= LIMIT:
        assert found == []
    else:
        assert found == naive(data, LIMIT)


def test_a_growing_file_is_checked_from_where_it_was(tmp_path: Path) -> None:
    """Appending to a file keeps the long lines found before and finds new ones, even one that was
    still being written at the previous check."""
    path = tmp_path / "s.ndjson"
    path.write_bytes(b"a\n" * 600 + b"z" * 1_500)  # an unfinished long line at the end
    assert long_lines(path, limit=LIMIT) == [(1_200, 2_700)]
    with path.open("ab") as f:
        f.write(b"z" * 800 + b"\n" + b"b\n" * 2_000 + b"q" * 3_000 + b"\n")
    assert long_lines(path, limit=LIMIT) == [(1_200, 3_501), (7_501, 10_502)]


def test_a_readable_copy_leaves_out_the_long_lines_only(tmp_path: Path) -> None:
    """The copy handed to DuckDB holds every other line, byte for byte and in order."""
    path = tmp_path / "s.ndjson"
    path.write_bytes(b"one\n" + b"L" * 2_500 + b"\ntwo\n" + b"M" * 1_200 + b"\nthree\n")
    ranges = long_lines(path, limit=LIMIT)
    copy = readable_file(path, ranges)
    assert copy.read_bytes() == b"one\ntwo\nthree\n"
    assert readable_file(path, ranges) == copy  # unchanged file: the same copy again


def test_bounded_lines_never_hold_a_long_line(monkeypatch: object) -> None:
    """Reading lines one by one gives a long line as None with the offset past it, and stops before
    an unfinished last line."""
    import mastrace.store._lines as lines

    monkeypatch.setattr(lines, "MAX_LINE_BYTES", 100)  # type: ignore[attr-defined]
    data = b"a\n" + b"x" * 5_000 + b"\n" + b"b\n" + b"partial"
    got = list(bounded_lines(io.BytesIO(data)))
    assert got == [(2, b"a\n"), (5_003, None), (5_005, b"b\n")]
