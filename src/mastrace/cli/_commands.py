"""The `runs`, `tree` and `query` subcommands."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from itertools import islice
from typing import TextIO

import duckdb

from ..analysis import RunSummary, TraceStore, format_duration, render_tree, text_table
from ..analysis._tree import build_tree, walk
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


def _started(start_us: int) -> str:
    return datetime.fromtimestamp(start_us / 1e6, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _tokens(run: RunSummary) -> str:
    if run.input_tokens is None and run.output_tokens is None:
        return ""
    return f"{(run.input_tokens or 0) + (run.output_tokens or 0):,.0f}"


def cmd_runs(args: argparse.Namespace, out: TextIO) -> int:
    """List runs (one per trace), newest first."""
    with open_store(args) as store, progress("reading runs"):
        runs = store.runs(limit=args.limit)
    if args.format == "json":
        out.write(json.dumps([vars(r) for r in runs], indent=2, default=json_default) + "\n")
        return 0
    rows = [
        (
            r.trace_id,
            r.name,
            _started(r.start_us),
            format_duration(r.duration),
            r.spans,
            r.errors or "",
            _tokens(r),
            f"${r.cost:.4f}" if r.cost is not None else "",
        )
        for r in runs
    ]
    headers = ["trace id", "root span", "started (UTC)", "duration", "spans", "errors", "tokens", "cost"]
    out.write(text_table(headers, rows, align="lllrrrrr"))
    return 0


def cmd_tree(args: argparse.Namespace, out: TextIO) -> int:
    """Print a trace's span hierarchy."""
    limit = args.max_spans or None
    with open_store(args) as store, progress("reading trace"):
        trace_id = store.resolve(args.trace)
        # The hierarchy of every span, but the attributes of only those that are printed.
        spans = store.spans(trace_id, details=False)
        roots = build_tree(spans)
        store.fill(trace_id, [node.span for node in islice(walk(roots), limit)])
    out.write(f"trace {trace_id}\n")
    out.write(render_tree(spans, max_spans=limit, roots=roots))
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
