"""The `runs`, `tree` and `query` subcommands."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

import duckdb

from ..analysis import TraceStore, render_runs
from ..exceptions import MastraceError
from ._output import format_rows, json_default, progress
from ._terminal import escape_control

__all__ = ["cmd_query", "cmd_runs", "cmd_tree", "open_store"]


@contextmanager
def open_store(args: argparse.Namespace, *, sandbox: bool = False) -> Iterator[TraceStore]:
    """The store named by `--store` (default `$MASTRACE_DIR` or `./.mastrace`), closed afterwards.

    Rows the store's views leave out as malformed (torn lines, hand-edited lines with mistyped
    fields) are counted, and the count is said on stderr: never a traceback, never in silence.
    """
    with TraceStore(args.store, sandbox=sandbox) as store:
        yield store
        skipped = store.skipped_rows()
    if skipped:
        print(
            escape_control(f"mastrace: skipped {skipped} malformed row(s) in {store.where}"), file=sys.stderr
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
        marks = store.aliases(runs, args.limit)
    if args.format == "json":
        rows = [{**vars(r), "ref": marks.get(r.trace_id)} for r in runs]
        out.write(json.dumps(rows, indent=2, default=json_default) + "\n")
        return 0
    out.write(render_runs(runs, marks=marks))
    return 0


def cmd_tree(args: argparse.Namespace, out: TextIO) -> int:
    """Print a trace's span hierarchy."""
    from ..analysis import render_trace

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
    with open_store(args, sandbox=sandbox) as store, progress("running query"):
        store.ensure_not_empty()
        names, rows = store.table(args.sql)
    out.write(format_rows(names, rows, args.format))
    return 0
