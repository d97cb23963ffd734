"""Store-and-forward from compacted files: the spans a compaction moved out of the NDJSON segments.

Compaction leaves alone the segments a known `mastrace push` destination has not taken whole, but a
destination first pushed to after a compaction has taken nothing: its spans must come from the
Parquet files. Each compacted row keeps the name of the segment it was first written to (`origin`),
so a push can tell what a destination took as NDJSON (the segment's offset in its record) from what
it has not, and resume inside a file by the number of rows of each origin already sent, in a fixed
order. Files compacted before rows kept their origin count as one origin, named after the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import duckdb

from ._compact import has_origin
from ._manifest import Manifest, list_store
from ._replay import StoredSpan, row_to_span
from ._schema import ORIGIN, STORED_FIELDS

__all__ = ["CompactedOrigin", "compacted_origins", "read_compacted"]

ORDER: Final = "trace_id, start_ns, span_id, end_ns, created_ns"
"""The order rows of one origin are sent in (a resumed push skips the rows sent before)."""
_BATCH: Final = 512
_JSON_FIELDS: Final = tuple(name for name, kind in STORED_FIELDS.items() if kind == "JSON")


class CompactedOrigin:
    """The rows of one compacted file that came from one segment (or, in a file compacted before
    rows kept their origin, all its rows)."""

    def __init__(self, manifest: Manifest, origin: str | None, rows: int) -> None:
        self.manifest = manifest
        self.origin = origin  # None: the file has no origin column
        self.rows = rows

    @property
    def key(self) -> str:
        """The name a push record counts this origin's sent rows under."""
        return self.origin if self.origin is not None else f"compact/{self.manifest.name}"

    @property
    def segments(self) -> tuple[str, ...]:
        """The NDJSON segments these rows were read from."""
        return (self.origin,) if self.origin is not None else self.manifest.replaces


def compacted_origins(store: Path) -> list[CompactedOrigin]:
    """The store's live compacted files, origin by origin, with their row counts."""
    out: list[CompactedOrigin] = []
    with duckdb.connect(":memory:") as con:
        for manifest in list_store(store).manifests:
            path = str(manifest.parquet)
            if has_origin(con, manifest.parquet):
                counts = con.execute(
                    f"SELECT {ORIGIN}, count(*) FROM read_parquet(?) GROUP BY {ORIGIN} ORDER BY {ORIGIN}",
                    [path],
                ).fetchall()
                out.extend(
                    CompactedOrigin(manifest, None if origin is None else str(origin), int(n))
                    for origin, n in counts
                )
            else:
                (n,) = con.execute("SELECT count(*) FROM read_parquet(?)", [path]).fetchone() or (0,)
                out.append(CompactedOrigin(manifest, None, int(n)))
    return out


def _row(names: list[str], values: tuple[Any, ...]) -> dict[str, Any]:
    row = dict(zip(names, values, strict=True))
    for name in _JSON_FIELDS:
        text = row.get(name)
        if isinstance(text, str):
            try:
                row[name] = json.loads(text)
            except ValueError:
                row[name] = None
    return row


def read_compacted(part: CompactedOrigin, skip: int = 0) -> Iterator[StoredSpan | int]:
    """The spans of `part` in a fixed order, after its first `skip` rows; a row that cannot be read
    as a span yields 0 instead (counted and skipped, as a malformed line of a segment)."""
    params: list[Any] = [str(part.manifest.parquet)]
    names = list(STORED_FIELDS)
    with duckdb.connect(":memory:") as con:
        where = "true"
        if part.origin is not None:
            where = f"{ORIGIN} = ?"
            params.append(part.origin)
        elif has_origin(con, part.manifest.parquet):
            where = f"{ORIGIN} IS NULL"
        cursor = con.execute(
            f"SELECT {', '.join(names)} FROM read_parquet(?) WHERE {where} "
            f"ORDER BY {ORDER} OFFSET {max(0, int(skip))}",
            params,
        )
        while rows := cursor.fetchmany(_BATCH):
            for values in rows:
                row = _row(names, values)
                try:
                    span = row_to_span(row)
                    yield StoredSpan(
                        part.key, 0, str(row["trace_id"]), str(row["span_id"]), int(row["start_ns"]), span
                    )
                except (ValueError, TypeError, KeyError, AttributeError):
                    yield 0
