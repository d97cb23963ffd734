"""The local store: a folder of NDJSON segments that DuckDB reads as Logfire's `records` table.

Write to it with `LocalStoreExporter` (any number of processes at once) and read it with
`connect()` or `query()`: the `records` view holds every span, and `roots` the root spans.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._schema import COLUMN_NAMES
from ._writer import LocalStoreExporter

if TYPE_CHECKING:
    from ._limits import QueryLimits
    from .reader import connect, default_store_path, query, root_files, roots_complete, segment_files

# The reader imports DuckDB (~90 ms, ~15 MB): a process that only writes spans never loads it.
_READER_NAMES = frozenset(
    {"connect", "default_store_path", "query", "root_files", "roots_complete", "segment_files"}
)


def __getattr__(name: str) -> Any:
    if name in _READER_NAMES:
        from . import reader

        return getattr(reader, name)
    if name == "QueryLimits":
        from ._limits import QueryLimits

        return QueryLimits
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_READER_NAMES, "QueryLimits"})


__all__ = [
    "COLUMN_NAMES",
    "LocalStoreExporter",
    "QueryLimits",
    "connect",
    "default_store_path",
    "query",
    "root_files",
    "roots_complete",
    "segment_files",
]
