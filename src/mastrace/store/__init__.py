"""The local store: a folder of NDJSON segments that DuckDB reads as Logfire's `records` table.

Write to it with `LocalStoreExporter` (any number of processes at once) and read it with
`connect()` or `query()`.
"""

from __future__ import annotations

from ._schema import COLUMN_NAMES
from ._writer import LocalStoreExporter
from .reader import connect, default_store_path, query, segment_files

__all__ = ["COLUMN_NAMES", "LocalStoreExporter", "connect", "default_store_path", "query", "segment_files"]
