"""One read-only statement over the store, narrowed by a time window and an environment."""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from mastrace.analysis import TraceStore
from mastrace.analysis._select import Window, bounded_relation, check_read_only
from mastrace.exceptions import StoreError

from .conftest import T0_NS, TraceWriter

T0 = datetime.fromtimestamp(T0_NS / 1e9, timezone.utc)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """Three root spans, one second apart, from T0."""
    writer = TraceWriter(tmp_path / "store")
    for i in range(3):
        writer.span(f"root{i}", f"span-{i}", i * 1000, i * 1000 + 10)
    writer.provider.shutdown()
    return tmp_path / "store"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1",
        "WITH x AS (SELECT 1) SELECT * FROM x",
        "EXPLAIN SELECT 1",
        "PRAGMA version",
        "-- comment\nSELECT 1;",
    ],
)
def test_read_only_statements_pass(sql: str) -> None:
    """SELECT, WITH, EXPLAIN and PRAGMA statements are read-only; comments and a final `;` are fine."""
    check_read_only(sql)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("INSERT INTO t VALUES (1)", "INSERT"),
        ("UPDATE t SET a = 1", "UPDATE"),
        ("COPY t TO 'x.csv'", "COPY"),
        ("EXPORT DATABASE 'x'", "EXPORT"),
        ("LOAD httpfs", "LOAD"),
        ("CALL pragma_version()", "CALL"),
        ("DETACH x", "DETACH"),
        ("SELECT 1; DROP TABLE t", "not 2"),
        ("", "not 0"),
        ("SELEC", "syntax"),
    ],
)
def test_other_statements_are_refused(sql: str, message: str) -> None:
    """Anything but exactly one read-only statement raises `StoreError` naming why."""
    with pytest.raises(StoreError, match=message):
        check_read_only(sql)


def test_window_literals_are_quoted() -> None:
    """Environment names with quotes cannot break out of their SQL literal."""
    (condition,) = Window(environments=["prod', 'x') OR true --"]).conditions()
    assert condition.endswith("IN ('prod'', ''x'') OR true --')")


def test_the_window_narrows_records_and_roots(store: Path) -> None:
    """`min_timestamp` is inclusive, `max_timestamp` exclusive, for `records` and `roots` alike."""
    window = Window(min_timestamp=T0 + timedelta(seconds=1), max_timestamp=T0 + timedelta(seconds=2))
    with TraceStore(store, sandbox=True) as traces:
        names = bounded_relation(traces, "SELECT span_name FROM records", window).fetchall()
        roots = bounded_relation(traces, "SELECT span_name FROM roots", window).fetchall()
    assert names == roots == [("span-1",)]


def test_roots_hold_the_root_spans_without_roots_files(store: Path) -> None:
    """A store whose roots files are gone still answers `roots` with every root span."""
    shutil.rmtree(store / "roots")
    with TraceStore(store, sandbox=True) as traces:
        rows = bounded_relation(traces, "SELECT span_name FROM roots ORDER BY 1").fetchall()
    assert rows == [("span-0",), ("span-1",), ("span-2",)]


def test_limit_and_params(store: Path) -> None:
    """`limit` caps the rows and `params` fill the statement's placeholders."""
    with TraceStore(store, sandbox=True) as traces:
        rows = bounded_relation(
            traces,
            "SELECT span_name FROM records WHERE span_name <> ? ORDER BY 1",
            limit=1,
            params=["span-0"],
        ).fetchall()
    assert rows == [("span-1",)]
