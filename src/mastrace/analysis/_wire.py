"""The three answers of Logfire's Query API, encoded from a DuckDB relation (`mastrace serve`'s
Query API sends them; the MCP server reads rows as JSON through `json_rows`).

- `application/json`: `{"schema": {"fields": [...]}, "data": [{column: value}, ...]}`, each field's
  `data_type` spelled as Arrow's Rust implementation (and so Logfire) spells it (`"Utf8"`,
  `{"Timestamp": ["Microsecond", "UTC"]}`); JSON columns such as `attributes` are objects. NaN and
  the infinities, which JSON cannot hold, are null, inside lists, structs and maps too.
- `text/csv`: a header line, then one line per row; JSON and nested values as JSON text.
- `application/vnd.apache.arrow.stream`: an Arrow IPC stream, batches straight from DuckDB (needs
  `pyarrow` to write the stream: the `query` extra).

Timestamps leave as UTC (`…Z` in text, a `UTC` time zone in Arrow): the store keeps them as naive UTC,
Logfire sends them time-zone aware. Integers wider than Arrow's decimals (`UHUGEINT`, `BIGNUM`) and
bit strings leave as text in every format, so that no value changes on the way. Each encoder yields
the body in chunks; the first chunk runs the statement, so an error in it surfaces before anything
is sent. The encoding itself happens in DuckDB
(`to_json`, `strftime`), not row by row in Python.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

import duckdb

__all__ = [
    "arrow_body",
    "arrow_data_type",
    "csv_body",
    "json_body",
    "json_rows",
    "unique_names",
]

BATCH_ROWS: Final = 50_000
"""Rows encoded per chunk of a streamed answer."""

_ISO_UTC: Final = "'%Y-%m-%dT%H:%M:%S.%fZ'"
_SIMPLE_TYPES: Final[dict[str, Any]] = {
    "BOOLEAN": "Boolean",
    "TINYINT": "Int8",
    "SMALLINT": "Int16",
    "INTEGER": "Int32",
    "BIGINT": "Int64",
    "UTINYINT": "UInt8",
    "USMALLINT": "UInt16",
    "UINTEGER": "UInt32",
    "UBIGINT": "UInt64",
    "HUGEINT": {"Decimal128": [38, 0]},
    "FLOAT": "Float32",
    "DOUBLE": "Float64",
    "VARCHAR": "Utf8",
    "JSON": "Utf8",
    "UUID": "Utf8",
    "BLOB": "Binary",
    "DATE": "Date32",
    "TIME": {"Time64": "Microsecond"},
    "INTERVAL": {"Interval": "MonthDayNano"},
}


# Types whose values Arrow (or a JSON number) cannot carry unchanged: they leave as text.
_TEXT_TYPES: Final = frozenset({"UHUGEINT", "BIGNUM", "VARINT", "BIT"})
# A JSON string (skipped as it is), or a NaN / infinity token that DuckDB writes inside nested values.
_NON_FINITE: Final = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)')


def _is_nested(sql_type: str) -> bool:
    return sql_type.endswith("]") or sql_type.startswith(("STRUCT", "MAP", "UNION"))


def _is_timestamp(sql_type: str) -> bool:
    """A timestamp column itself (not a list or struct holding timestamps)."""
    return sql_type.startswith("TIMESTAMP") and not _is_nested(sql_type)


def _holds_floats(sql_type: str) -> bool:
    return _is_nested(sql_type) and ("FLOAT" in sql_type or "DOUBLE" in sql_type)


def arrow_data_type(sql_type: str) -> Any:
    """A DuckDB type as an Arrow `DataType` in the JSON that Logfire's schema fields use."""
    if sql_type in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[sql_type]
    if sql_type.endswith("[]"):
        item = {"name": "item", "data_type": arrow_data_type(sql_type[:-2]), "nullable": True}
        return {"List": item}
    if _is_timestamp(sql_type):
        return {"Timestamp": ["Microsecond", "UTC"]}
    if sql_type.startswith("DECIMAL(") and sql_type.endswith(")"):
        precision, scale = (int(part) for part in sql_type[len("DECIMAL(") : -1].split(","))
        return {"Decimal128": [precision, scale]}
    return "Utf8"  # structs, maps, enums, fixed-size arrays and the like arrive as text


def unique_names(names: Sequence[str]) -> list[str]:
    """Column names made unique (`a`, `a` becomes `a`, `a_1`): rows are keyed by name."""
    seen: set[str] = set()
    out = []
    for name in names:
        unique, n = name, 0
        while unique in seen:
            n += 1
            unique = f"{name}_{n}"
        seen.add(unique)
        out.append(unique)
    return out


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _types(relation: duckdb.DuckDBPyRelation) -> list[str]:
    return [str(t) for t in relation.types]


def _json_value(position: int, sql_type: str) -> str:
    column = f"#{position}"
    if _is_timestamp(sql_type):
        return f"strftime({column}, {_ISO_UTC})"
    if sql_type in ("FLOAT", "DOUBLE"):  # JSON has no NaN or infinity: they become null
        return f"CASE WHEN isfinite({column}) THEN {column} END"
    if sql_type in _TEXT_TYPES:
        return f"CAST({column} AS VARCHAR)"
    return column


def _text_value(position: int, sql_type: str) -> str:
    column = f"#{position}"
    if _is_timestamp(sql_type):
        return f"strftime({column}, {_ISO_UTC})"
    if sql_type == "JSON":
        return f"CAST({column} AS VARCHAR)"
    if _is_nested(sql_type):
        return f"CAST(to_json({column}) AS VARCHAR)"
    return f"CAST({column} AS VARCHAR)"


def _arrow_value(position: int, sql_type: str) -> str:
    if _is_timestamp(sql_type):
        return f"CAST(#{position} AS TIMESTAMPTZ)"
    return f"CAST(#{position} AS VARCHAR)" if sql_type in _TEXT_TYPES else f"#{position}"


def _finite(match: re.Match[str]) -> str:
    return "null" if match.group(1) else match.group(0)


def _nulled_non_finite(batches: Iterator[list[tuple[str]]]) -> Iterator[list[tuple[str]]]:
    for batch in batches:
        yield [(_NON_FINITE.sub(_finite, text),) for (text,) in batch]


def _rows(relation: duckdb.DuckDBPyRelation) -> Iterator[list[tuple[Any, ...]]]:
    """The relation's rows, a batch at a time (one run of the statement)."""
    batch: list[tuple[Any, ...]]
    if not hasattr(type(relation), "iter_rows"):  # DuckDB 1.x: the relation keeps its result
        fetch: Callable[[int], list[tuple[Any, ...]]] = relation.fetchmany  # type: ignore[assignment]
        while batch := fetch(BATCH_ROWS):
            yield batch
        return
    batch = []
    for row in relation.iter_rows(BATCH_ROWS):
        batch.append(row)
        if len(batch) == BATCH_ROWS:
            yield batch
            batch = []
    if batch:
        yield batch


def json_rows(relation: duckdb.DuckDBPyRelation) -> Iterator[list[tuple[str]]]:
    """Each row as the text of a JSON object keyed by (unique) column name, a batch at a time."""
    names = unique_names(relation.columns)
    types = _types(relation)
    members = ", ".join(
        f"{_quoted(name)} := {_json_value(i, sql_type)}"
        for i, (name, sql_type) in enumerate(zip(names, types, strict=True), start=1)
    )
    rows = _rows(relation.project(f"CAST(to_json(struct_pack({members})) AS VARCHAR)"))
    # DuckDB writes NaN and the infinities inside lists and structs as bare tokens, which only
    # lenient parsers (Python's) read: the text of such rows is mended (rare columns, so rare work).
    return _nulled_non_finite(rows) if any(_holds_floats(t) for t in types) else rows


def json_body(relation: duckdb.DuckDBPyRelation, *, include_schema: bool = True) -> Iterator[bytes]:
    """The JSON answer, in chunks; the first chunk runs the statement."""
    names = unique_names(relation.columns)
    types = _types(relation)
    rows = json_rows(relation)
    first = next(rows, [])
    head: dict[str, Any] = {}
    if include_schema:
        fields = [
            {"name": name, "data_type": arrow_data_type(sql_type), "nullable": True}
            for name, sql_type in zip(names, types, strict=True)
        ]
        head["schema"] = {"fields": fields, "metadata": {}}
    opening = json.dumps(head)[:-1] + (', "data": [' if head else '"data": [')
    yield (opening + ",".join(row[0] for row in first)).encode()
    for batch in rows:
        yield ("," + ",".join(row[0] for row in batch)).encode()
    yield b"]}"


def csv_body(relation: duckdb.DuckDBPyRelation) -> Iterator[bytes]:
    """The CSV answer (header line first), in chunks; the first chunk runs the statement."""
    names = unique_names(relation.columns)
    values = ", ".join(_text_value(i, t) for i, t in enumerate(_types(relation), start=1))
    rows = _rows(relation.project(values)) if names else iter(())
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(names)
    for batch in rows:
        writer.writerows(batch)
        yield buffer.getvalue().encode()
        buffer.seek(0)
        buffer.truncate()
    if buffer.tell():
        yield buffer.getvalue().encode()


def arrow_body(relation: duckdb.DuckDBPyRelation) -> Iterator[bytes]:
    """The Arrow IPC stream answer, in chunks; the first chunk runs the statement.

    Raises:
        ImportError: `pyarrow` is not installed.
    """
    import pyarrow.ipc

    names = unique_names(relation.columns)
    columns = ", ".join(
        f"{_arrow_value(i, sql_type)} AS {_quoted(name)}"
        for i, (name, sql_type) in enumerate(zip(names, _types(relation), strict=True), start=1)
    )
    reader = relation.project(columns).to_arrow_reader(BATCH_ROWS)
    sink = io.BytesIO()
    with pyarrow.ipc.new_stream(sink, reader.schema) as writer:
        for batch in reader:
            writer.write_batch(batch)
            yield sink.getvalue()
            sink.seek(0)
            sink.truncate()
    yield sink.getvalue()
