"""The `runs`, `tree` and `query` subcommands."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

import duckdb

from ..analysis import SourceStore, TraceStore, check_read_only, render_runs, source_url
from ..exceptions import MastraceError, StoreError
from ..store._clickhouse import is_clickhouse_url
from ..store._limits import QueryLimits, cap_process_memory
from ..store._retention import parse_size
from ._output import format_rows, json_default, progress
from ._terminal import escape_control

if TYPE_CHECKING:
    from ..analysis import ClickHouseStore

__all__ = ["cmd_query", "cmd_runs", "cmd_tree", "open_store", "size_arg", "source_token"]


SOURCE_TOKEN_VARIABLES = ("LOGFIRE_READ_TOKEN", "MASTRACE_SERVE_TOKEN")


def source_token() -> str | None:
    """The read token for `--source`: `$LOGFIRE_READ_TOKEN`, else `$MASTRACE_SERVE_TOKEN`, else None."""
    for name in SOURCE_TOKEN_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


@contextmanager
def open_source(args: argparse.Namespace, *, limits: QueryLimits | None = None) -> Iterator[TraceStore]:
    """The Logfire-compatible Query API named by `--source`, with the read token from the environment;
    or ClickHouse's `otel_traces` for a `clickhouse://` or `chdb://` URL."""
    if args.store:
        raise MastraceError("give --store or --source, not both")
    if is_clickhouse_url(args.source):
        with open_clickhouse(args, limits=limits) as store:
            yield store
        return
    token = source_token()
    max_bytes = size_arg(args.source_max_bytes)
    source = SourceStore(
        source_url(args.source, token),
        token,
        deadline=args.source_timeout or None,
        **({} if max_bytes is None else {"max_bytes": max_bytes}),  # else the source's own cap
    )
    with source as remote:
        yield remote
        say_health(remote)


@contextmanager
def open_clickhouse(
    args: argparse.Namespace, *, limits: QueryLimits | None = None
) -> Iterator[ClickHouseStore]:
    """ClickHouse's `otel_traces` named by `--source clickhouse://…` or `chdb://…`; what a read left
    out (`--max-spans-read`) is said on stderr."""
    from ..analysis import ClickHouseStore
    from ..store._clickhouse import parse_target

    cap = getattr(args, "max_spans_read", None)  # else the store's own default
    store = ClickHouseStore(parse_target(args.source), limits=limits, **({"max_spans": cap} if cap else {}))
    with store:
        try:
            yield store
        finally:
            for note in dict.fromkeys(store.notes):
                print(escape_control(f"mastrace: {note}"), file=sys.stderr)
        say_health(store)


@contextmanager
def open_store(
    args: argparse.Namespace, *, sandbox: bool = False, limits: QueryLimits | None = None
) -> Iterator[TraceStore]:
    """The store named by `--store` (default `$MASTRACE_DIR` or `./.mastrace`), or the Query API named
    by `--source`, closed afterwards.

    Rows the store's views leave out as malformed (torn lines, hand-edited lines with mistyped
    fields, lines too long to read) and extra copies of spans stored more than once (shown once)
    are counted, and the counts are said on stderr: never a traceback, never in silence.
    """
    store: TraceStore
    if getattr(args, "source", None) is not None:
        with open_source(args) as store:
            yield store
    else:
        _compact_if_many(args.store)
        with TraceStore(args.store, sandbox=sandbox, limits=limits) as store:
            yield store
            say_health(store)


def _compact_if_many(stores: Any) -> None:
    """Compact a store of many closed segments before reading it (read time then follows the spans,
    not the files); says so on stderr. `MASTRACE_AUTO_COMPACT=0` turns it off."""
    from ..store._compact import compact_if_many
    from ..store.reader import store_paths

    for path in store_paths(stores):
        if not (path / "segments").is_dir():
            continue
        result = compact_if_many(path)
        if result is not None:
            message = f"mastrace: compacted {len(result.compacted)} closed segment(s) of {path} first"
            print(escape_control(message + " (see `mastrace compact`)"), file=sys.stderr)


def say_health(store: TraceStore) -> None:
    """Say on stderr what the store's views left out as malformed or showed once, and the symbolic
    links and unreadable files in it that every reader skips."""
    from ..store.reader import unsafe_entries

    lines = store.health().lines(store.where)
    if store.paths and (skipped := unsafe_entries(store.paths)):
        lines.append(
            f"skipped {skipped} symbolic link(s) or unreadable file(s) in {store.where} (never followed)"
        )
    for line in lines:
        print(escape_control(f"mastrace: {line}"), file=sys.stderr)


def _one_statement(sql: str) -> None:
    try:
        count = len(duckdb.extract_statements(sql))
    except duckdb.Error as exc:
        raise MastraceError(f"query failed: {exc}") from exc
    if count != 1:
        raise MastraceError(f"give one SQL statement, not {count}")


def cmd_runs(args: argparse.Namespace, out: TextIO) -> int:
    """List runs (one per trace), newest first."""
    from ..analysis import open_runs, with_open_runs

    with open_store(args) as store, progress("reading runs"):
        opened = open_runs(store)  # runs with spans started and not ended: running, or left unfinished
        try:
            runs = store.runs(limit=args.limit)
            marks = store.aliases(runs, args.limit)
        except StoreError:
            if not opened:
                raise
            runs, marks = [], store.aliases([])  # nothing ended yet, but runs have started
        runs = with_open_runs(runs, opened)
    states = {trace_id: run.state for trace_id, run in opened.items()}
    if args.format == "json":
        rows = [{**vars(r), "ref": marks.get(r.trace_id), "state": states.get(r.trace_id)} for r in runs]
        out.write(json.dumps(rows, indent=2, default=json_default) + "\n")
        return 0
    out.write(render_runs(runs, marks=marks, states=states))
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
    if args.source is not None and is_clickhouse_url(args.source):
        return _query_clickhouse(args, out)
    if args.source is not None:
        if args.allow_external_access:
            raise MastraceError("--allow-external-access applies to a local store, not to --source")
        with open_source(args) as remote, progress("running query"):
            assert isinstance(remote, SourceStore)
            names, rows = remote.remote_table(args.sql)
        out.write(format_rows(names, rows, args.format))
        return 0
    sandbox = not args.allow_external_access
    if sandbox:
        check_read_only(args.sql, where="without --allow-external-access")
    else:
        _one_statement(args.sql)
    limits = _limits(args)
    try:
        with open_store(args, sandbox=sandbox, limits=limits) as store, progress("running query"):
            store.ensure_not_empty()
            if limits.memory is not None:
                # DuckDB's memory limit does not cover every allocation (a repeat(), a list built in
                # one expression): the kernel holds the statement to it as well, from here on.
                cap_process_memory(limits.memory)
            names, rows = store.table(args.sql)
            truncated = store.truncated
    except MemoryError:
        raise MastraceError(
            f"the query needs more memory than its limit (raise it: --memory {args.memory})"
        ) from None
    out.write(format_rows(names, rows, args.format))
    if truncated:
        print(
            f"mastrace query: only the first {len(rows):,} rows are shown (raise --max-rows, 0 for all)",
            file=sys.stderr,
        )
    return 0


def _limits(args: argparse.Namespace) -> QueryLimits:
    return QueryLimits(
        timeout=args.timeout or None,
        memory=size_arg(args.memory),
        max_rows=args.max_rows or None,
    )


def _query_clickhouse(args: argparse.Namespace, out: TextIO) -> int:
    """`mastrace query --source clickhouse://…`: Logfire's SQL in DuckDB over the newest spans of
    ClickHouse's `otel_traces` (at most `--max-spans-read`), copied as `records` rows."""
    if args.allow_external_access:
        raise MastraceError("--allow-external-access applies to a local store, not to --source")
    check_read_only(args.sql, where="on --source")
    with open_clickhouse(args, limits=_limits(args)) as store, progress("running query"):
        store.load_newest(None)
        store.ensure_not_empty()
        store.lock()
        names, rows = store.table(args.sql)
        truncated = store.truncated
    out.write(format_rows(names, rows, args.format))
    if truncated:
        print(
            f"mastrace query: only the first {len(rows):,} rows are shown (raise --max-rows, 0 for all)",
            file=sys.stderr,
        )
    return 0


def size_arg(text: str) -> int | None:
    """`--memory`: a size such as 2GB, or 0 for no limit (DuckDB's own default)."""
    if text.strip() in ("0", ""):
        return None
    try:
        return parse_size(text)
    except ValueError as exc:
        raise MastraceError(f"size: {exc}") from None
