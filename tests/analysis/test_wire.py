"""The Query API's encoders: Arrow type names, unique column names, JSON, CSV and Arrow bodies."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator

import duckdb
import pyarrow.ipc
import pytest

from mastrace.analysis._wire import BATCH_ROWS, arrow_body, arrow_data_type, csv_body, json_body, unique_names


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = duckdb.connect()
    connection.execute("SET TimeZone = 'UTC'")
    yield connection
    connection.close()


@pytest.mark.parametrize(
    ("sql_type", "arrow"),
    [
        ("VARCHAR", "Utf8"),
        ("JSON", "Utf8"),
        ("BOOLEAN", "Boolean"),
        ("SMALLINT", "Int16"),
        ("BIGINT", "Int64"),
        ("UBIGINT", "UInt64"),
        ("DOUBLE", "Float64"),
        ("DECIMAL(18,3)", {"Decimal128": [18, 3]}),
        ("TIMESTAMP", {"Timestamp": ["Microsecond", "UTC"]}),
        ("TIMESTAMP WITH TIME ZONE", {"Timestamp": ["Microsecond", "UTC"]}),
        ("DATE", "Date32"),
        ("VARCHAR[]", {"List": {"name": "item", "data_type": "Utf8", "nullable": True}}),
        ("STRUCT(k INTEGER)", "Utf8"),
        ("DECIMAL(4,1)[]", {"List": {"name": "item", "data_type": {"Decimal128": [4, 1]}, "nullable": True}}),
        (
            "TIMESTAMP[]",
            {"List": {"name": "item", "data_type": {"Timestamp": ["Microsecond", "UTC"]}, "nullable": True}},
        ),
        ("DECIMAL(4,1)[2]", "Utf8"),
        ("UHUGEINT", "Utf8"),
    ],
)
def test_arrow_data_type(sql_type: str, arrow: object) -> None:
    """DuckDB types are named as Arrow's Rust implementation (and Logfire's schema) names them."""
    assert arrow_data_type(sql_type) == arrow


def test_unique_names() -> None:
    """Repeated column names get a numbered suffix that no other column has."""
    assert unique_names(["a", "a", "a_1", "b", "a"]) == ["a", "a_1", "a_1_1", "b", "a_2"]


def _join(chunks: Iterator[bytes]) -> bytes:
    return b"".join(chunks)


def test_json_body_holds_schema_and_rows(con: duckdb.DuckDBPyConnection) -> None:
    """The JSON body has Logfire's `schema.fields` and `data`, times as UTC text, JSON as objects."""
    relation = con.sql(
        "SELECT TIMESTAMP '2024-01-02 03:04:05.123456' AS t, '{\"a\": 1}'::JSON AS j, 1.5::DOUBLE AS d"
    )
    body = json.loads(_join(json_body(relation)))
    assert [(f["name"], f["data_type"]) for f in body["schema"]["fields"]] == [
        ("t", {"Timestamp": ["Microsecond", "UTC"]}),
        ("j", "Utf8"),
        ("d", "Float64"),
    ]
    assert body["data"] == [{"t": "2024-01-02T03:04:05.123456Z", "j": {"a": 1}, "d": 1.5}]
    assert json.loads(_join(json_body(relation, include_schema=False))) == {"data": body["data"]}


def test_the_first_chunk_runs_the_statement(con: duckdb.DuckDBPyConnection) -> None:
    """An error while running the statement surfaces on the first chunk, before anything is sent."""
    relation = con.sql("SELECT CAST('x' || range AS INTEGER) AS n FROM range(3)")
    for body in (json_body(relation), csv_body(relation), arrow_body(relation)):
        with pytest.raises(duckdb.Error):
            next(body)


def test_bodies_of_many_batches_are_whole(con: duckdb.DuckDBPyConnection) -> None:
    """More rows than a batch come out whole, in order, in every format."""
    relation = con.sql(f"SELECT range AS n FROM range({2 * BATCH_ROWS + 7})")
    rows = json.loads(_join(json_body(relation)))["data"]
    assert [r["n"] for r in rows] == list(range(2 * BATCH_ROWS + 7))
    lines = list(csv.reader(io.StringIO(_join(csv_body(relation)).decode())))
    assert lines[0] == ["n"] and [int(n) for (n,) in lines[1:]] == list(range(2 * BATCH_ROWS + 7))
    with pyarrow.ipc.open_stream(_join(arrow_body(relation))) as reader:
        assert reader.read_all().column("n").to_pylist() == list(range(2 * BATCH_ROWS + 7))


def test_empty_answers_keep_their_columns(con: duckdb.DuckDBPyConnection) -> None:
    """A statement with no rows gives a schema and no data, a header line, and an empty Arrow table."""
    relation = con.sql("SELECT 1 AS one WHERE false")
    assert json.loads(_join(json_body(relation)))["data"] == []
    assert _join(csv_body(relation)) == b"one\n"
    with pyarrow.ipc.open_stream(_join(arrow_body(relation))) as reader:
        table = reader.read_all()
    assert table.num_rows == 0 and table.column_names == ["one"]


def test_arrow_times_are_utc(con: duckdb.DuckDBPyConnection) -> None:
    """Naive store timestamps leave as UTC-aware Arrow timestamps of the same instant."""
    relation = con.sql("SELECT TIMESTAMP '2024-01-02 03:04:05' AS t")
    with pyarrow.ipc.open_stream(_join(arrow_body(relation))) as reader:
        table = reader.read_all()
    assert str(table.schema.field("t").type) == "timestamp[us, tz=UTC]"
    assert table.column("t")[0].as_py().isoformat() == "2024-01-02T03:04:05+00:00"
