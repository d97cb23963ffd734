"""The local store: a folder of NDJSON segments that DuckDB reads as Logfire's `records` table.

Write to it with `LocalStoreExporter` (any number of processes at once) and read it with
`connect()` or `query()`: the `records` view holds every span, and `roots` the root spans.
`compact()` rewrites closed segments as one compressed Parquet file that the same views read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._schema import COLUMN_NAMES

if TYPE_CHECKING:
    from ._compact import compact
    from ._limits import QueryLimits
    from ._writer import LocalStoreExporter
    from .reader import connect, default_store_path, query

# The reader imports DuckDB (~90 ms, ~15 MB): a process that only writes spans never loads it. The
# writer imports the OpenTelemetry SDK: a command that only reads the store never loads that.
_READER_NAMES = frozenset({"connect", "default_store_path", "query"})


def __getattr__(name: str) -> Any:
    if name in _READER_NAMES:
        from . import reader

        return getattr(reader, name)
    if name == "LocalStoreExporter":
        from ._writer import LocalStoreExporter

        return LocalStoreExporter
    if name == "compact":
        from ._compact import compact

        return compact
    if name == "QueryLimits":
        from ._limits import QueryLimits

        return QueryLimits
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_READER_NAMES, "LocalStoreExporter", "QueryLimits", "compact"})


__all__ = [
    "COLUMN_NAMES",
    "LocalStoreExporter",
    "QueryLimits",
    "compact",
    "connect",
    "default_store_path",
    "query",
]
