"""The `runs`, `tree` and `query` subcommands."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

import duckdb

from ..analysis import TraceStore, render_runs, render_trace
from ..exceptions import MastraceError
from ..store._limits import QueryLimits
from ..store._retention import parse_size
from ._output import format_rows, json_default, progress
from ._terminal import escape_control

__all__ = ["cmd_query", "cmd_runs", "cmd_tree", "open_store"]


@contextmanager
def open_store(
    args: argparse.Namespace, *, sandbox: bool = False, limits: QueryLimits | None = None
) -> Iterator[TraceStore]:
    """The store named by `--store` (default `$MASTRACE_DIR` or `./.mastrace`), closed afterwards.

    Rows the store's views leave out as malformed (torn lines, hand-edited lines with mistyped
    fields, lines too long to read) and extra copies of spans stored more than once (shown once)
    are counted, and the counts are said on stderr: never a traceback, never in silence.
    """
    with TraceStore(args.store, sandbox=sandbox, limits=limits) as store:
        yield store
        health = store.health()
    if health.skipped:
        print(
            escape_control(f"mastrace: skipped {health.skipped} malformed row(s) in {store.where}"),
            file=sys.stderr,
        )
    if health.duplicates:
        print(
            escape_control(
                f"mastrace: {health.duplicates} extra copy(ies) of spans stored more than once in "
                f"{store.where}; each span is shown once (the copy that ended last)"
            ),
            file=sys.stderr,
        )


_READ_ONLY = frozenset({"SELECT", "EXPLAIN", "PRAGMA", "RELATION"})


def _statements(sql: str) -> list[duckdb.Statement]:
    try:
        return list(duckdb.extract_statements(sql))
    except duckdb.Error as exc:
        raise MastraceError(f"query failed: {exc}") from exc


def cmd_runs(args: argparse.Namespace, out: TextIO) -> int:
    """List runs (one per trace), newest first."""
    with open_store(args) as store, progress("reading runs"):
        runs = store.runs(limit=args.limit)
    if args.format == "json":
        out.write(json.dumps([vars(r) for r in runs], indent=2, default=json_default) + "\n")
        return 0
    out.write(render_runs(runs))
    return 0


def cmd_tree(args: argparse.Namespace, out: TextIO) -> int:
    """Print a trace's span hierarchy."""
    with open_store(args) as store, progress("reading trace"):
        trace_id = store.resolve(args.trace)
        text = render_trace(store, trace_id, max_spans=args.max_spans or None)
    out.write(f"trace {trace_id}\n")
    out.write(text)
    return 0


def cmd_query(args: argparse.Namespace, out: TextIO) -> int:
    """Run SQL against the `records` table and print the result."""
    statements = _statements(args.sql)
    if len(statements) != 1:
        raise MastraceError(f"give one SQL statement, not {len(statements)}")
    sandbox = not args.allow_external_access
    if sandbox and statements[0].type.name not in _READ_ONLY:
        raise MastraceError(
            f"only SELECT-like statements run without --allow-external-access (got {statements[0].type.name})"
        )
    limits = QueryLimits(
        timeout=args.timeout or None,
        memory=_size_arg(args.memory),
        max_rows=args.max_rows or None,
    )
    with open_store(args, sandbox=sandbox, limits=limits) as store, progress("running query"):
        store.ensure_not_empty()
        names, rows = store.table(args.sql)
        truncated = store.truncated
    out.write(format_rows(names, rows, args.format))
    if truncated:
        print(
            f"mastrace query: only the first {len(rows):,} rows are shown (raise --max-rows, 0 for all)",
            file=sys.stderr,
        )
    return 0


def _size_arg(text: str) -> int | None:
    """`--memory`: a size such as 2GB, or 0 for DuckDB's own default."""
    if text.strip() in ("0", ""):
        return None
    try:
        return parse_size(text)
    except ValueError as exc:
        raise MastraceError(f"--memory: {exc}") from None
