"""`mastrace compact`: rewrite a store's closed segments as one compressed Parquet file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ..exceptions import MastraceError

__all__ = ["cmd_compact", "compact_report"]


def _megabytes(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def compact_report(store: Path, min_age: float) -> str:
    """Compact `store` and say what was done, in one line."""
    from ..store._compact import compact

    result = compact(store, min_age=min_age)
    left = []
    if result.skipped_open:
        left.append(f"{result.skipped_open} open or recent")
    if result.skipped_unpushed:
        left.append(f"{result.skipped_unpushed} not yet pushed")
    kept = f"; left {', '.join(left)} segment(s) as they are" if left else ""
    if result.written is None:
        return f"nothing to compact in {store}{kept}\n"
    merged = f" and {result.merged} compacted file(s)" if result.merged else ""
    return (
        f"compacted {len(result.compacted)} segment(s){merged} of {store} into {result.written.name}: "
        f"{result.spans} span(s), {_megabytes(result.bytes_before)} -> "
        f"{_megabytes(result.bytes_after)}{kept}\n"
    )


def cmd_compact(args: argparse.Namespace, out: TextIO) -> int:
    """Compact each store given (see `mastrace.store._compact`)."""
    from ..store._retention import parse_duration
    from ..store.reader import store_paths

    try:
        min_age = parse_duration(args.min_age)
    except ValueError as exc:
        raise MastraceError(f"--min-age: {exc}") from None
    for store in store_paths(args.store):
        if not (store / "segments").is_dir():
            raise MastraceError(f"no local store at {store} (pass --store DIR or set MASTRACE_DIR)")
        out.write(compact_report(store, min_age))
    return 0
