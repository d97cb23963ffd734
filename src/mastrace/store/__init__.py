"""The local store: a folder of NDJSON segments that DuckDB reads as Logfire's `records` table.

Write to it with `LocalStoreExporter` (any number of processes at once) and read it with
`connect()` or `query()`: the `records` view holds every span, and `roots` the root spans.
"""

from __future__ import annotations

from ._schema import COLUMN_NAMES
from ._writer import LocalStoreExporter
from .reader import connect, default_store_path, query, root_files, roots_complete, segment_files

__all__ = [
    "COLUMN_NAMES",
    "LocalStoreExporter",
    "connect",
    "default_store_path",
    "query",
    "root_files",
    "roots_complete",
    "segment_files",
]
