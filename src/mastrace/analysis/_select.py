"""One read-only SQL statement over the store, bounded by start time and by rows.

This is what `mastrace query`, the Query API of `mastrace serve` and the MCP server's SQL tool run:
exactly one SELECT-like statement (no `COPY`, `ATTACH`, `SET`, `INSTALL`, no second statement), on
a store opened with `TraceStore(..., sandbox=True)`, so the SQL sees the store and nothing else.

A time window (`min_timestamp`/`max_timestamp`, as Logfire's Query API takes them) and a deployment
environment narrow `records` itself: a temporary view of that name over the store's view, so the
statement needs no rewriting and its own `WHERE`, `WITH` and `ORDER BY` keep their meaning. `roots`
(the root spans alone, read from the small roots files) is narrowed the same way, and read from
`records` when the store's roots files do not pair up with its segments, so it always holds
exactly the root spans of `records`.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Final

import duckdb

from ..exceptions import StoreError
from ..store._schema import ROOTS_VIEW_NAME, VIEW_NAME
from ..store.reader import roots_complete
from ._store import TraceStore

__all__ = [
    "READ_ONLY_STATEMENTS",
    "TimeLimit",
    "Window",
    "bounded_relation",
    "check_no_paths",
    "check_read_only",
]

READ_ONLY_STATEMENTS = frozenset({"SELECT", "EXPLAIN", "PRAGMA", "RELATION"})
"""Statement types that run in the sandbox: they read, and on a sandboxed store read only the store."""

# Where an OpenTelemetry resource says which deployment environment a span comes from (the current
# name first, then the deprecated one), as Logfire's `deployment_environment` filter reads it.
_ENVIRONMENT_SQL = (
    "coalesce(otel_resource_attributes->>'deployment.environment.name', "
    "otel_resource_attributes->>'deployment.environment', '')"
)


def check_read_only(sql: str, where: str = "here") -> None:
    """Raise `StoreError` unless `sql` is exactly one read-only (SELECT-like) statement.

    Args:
        sql: The SQL text.
        where: Ends the message for other statements: "only SELECT-like statements run {where}".
    """
    try:
        statements = list(duckdb.extract_statements(sql))
    except duckdb.Error as exc:
        raise StoreError(f"query failed: {exc}") from exc
    if len(statements) != 1:
        raise StoreError(f"give one SQL statement, not {len(statements)}")
    kind = statements[0].type.name
    if kind not in READ_ONLY_STATEMENTS:
        raise StoreError(f"only SELECT-like statements run {where} (got {kind})")


# Catalog functions and tables that show the server's settings, files and view definitions (the
# absolute path of the store, the user's home): not for a client of serve or MCP.
_REVEALING: Final = re.compile(
    r"^(duckdb_\w+|current_setting|getenv|sqlite_(master|schema|temp_master|temp_schema)|"
    r"information_schema|pg_catalog|pragma_\w+|which_secret)$"
)


def check_no_paths(sql: str) -> None:
    """Raise `StoreError` when `sql` names a catalog function or table that shows the server's
    settings, folders or view definitions (`duckdb_settings()`, `current_setting(...)`,
    `duckdb_views()`, `information_schema`, ...): a remote client learns no absolute path from them.
    """
    try:
        tokens = duckdb.tokenize(sql)
    except duckdb.Error as exc:
        raise StoreError(f"query failed: {exc}") from exc
    ends = [start for start, _ in tokens[1:]] + [len(sql)]
    for (start, kind), end in zip(tokens, ends, strict=True):
        if kind != duckdb.token_type.identifier:
            continue
        name = sql[start:end].strip().strip('"').split(".")[0].strip('"').lower()
        if _REVEALING.match(name):
            raise StoreError(f"{name} is not available here: it shows the server's settings and folders")


@dataclass(frozen=True)
class Window:
    """Which spans `records` holds for one statement: a start-time range and deployment environments.

    Attributes:
        min_timestamp: Keep spans that started at or after this time (naive values are UTC).
        max_timestamp: Keep spans that started before this time.
        environments: Keep spans of these deployment environments; `""` stands for spans without one.
    """

    min_timestamp: datetime | None = None
    max_timestamp: datetime | None = None
    environments: Sequence[str] | None = None

    def conditions(self) -> list[str]:
        """The window as SQL conditions on `records` (literals: views take no parameters)."""
        found = []
        if self.min_timestamp is not None:
            found.append(f"start_timestamp >= {_timestamp_literal(self.min_timestamp)}")
        if self.max_timestamp is not None:
            found.append(f"start_timestamp < {_timestamp_literal(self.max_timestamp)}")
        if self.environments is not None:
            names = ", ".join(_string_literal(name) for name in self.environments) or "NULL"
            found.append(f"{_ENVIRONMENT_SQL} IN ({names})")
        return found


def _timestamp_literal(moment: datetime) -> str:
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return f"TIMESTAMP '{moment.isoformat(sep=' ')}'"


def _string_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def bounded_relation(
    store: TraceStore,
    sql: str,
    window: Window | None = None,
    limit: int | None = None,
    params: Sequence[Any] | None = None,
) -> duckdb.DuckDBPyRelation:
    """`sql` over `store` as a relation, not run yet: `records` narrowed to `window`, at most `limit` rows.

    Args:
        store: A store opened with `sandbox=True`; the statement is checked to be read-only.
        sql: One SELECT-like statement over `records`.
        window: Narrow `records` to these spans first.
        limit: Return at most this many rows (the statement's own `LIMIT` still applies).
        params: Values for the statement's `?` placeholders.

    Raises:
        StoreError: The SQL is not one read-only statement, does not parse or does not bind.
    """
    check_read_only(sql)
    conditions = window.conditions() if window is not None else []
    complete = roots_complete(store.paths)
    if conditions or not complete:
        (database,) = store.table("SELECT current_database()")[1][0]
        schema = f"{_identifier(str(database))}.main"
        where = " AND ".join(conditions) or "true"
        # A temporary view is found before the store's own, which it reads by its full name.
        if conditions:
            store.execute(
                f"CREATE OR REPLACE TEMP VIEW {VIEW_NAME} AS SELECT * FROM {schema}.{VIEW_NAME} WHERE {where}"
            )
        # `roots` holds the root spans of `records` whatever the store's roots files hold.
        roots = (
            f"{schema}.{ROOTS_VIEW_NAME} WHERE {where}"
            if complete
            else f"{VIEW_NAME} WHERE parent_span_id IS NULL"
        )
        store.execute(f"CREATE OR REPLACE TEMP VIEW {ROOTS_VIEW_NAME} AS SELECT * FROM {roots}")
    relation = store.relation(sql, params)
    if relation is None:
        raise StoreError("the statement returns no rows")
    return relation if limit is None else relation.limit(limit)


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class TimeLimit:
    """Interrupts what runs on a store's connection once `seconds` have passed since it was made.

    A statement can run for ages (`range(9223372036854775807)`, a cross join of `records` with
    itself); a client that gave up on it, or a model that wrote it, must not leave it holding a
    thread and a query slot. `stopped(exc)` tells the interruption from other errors, `message`
    says what happened. Call `cancel()` before closing the connection.

    Args:
        store: The store whose statements are interrupted.
        seconds: The time limit; None for none.
    """

    def __init__(self, store: TraceStore, seconds: float | None) -> None:
        self.seconds = seconds
        self.fired = False
        self._entry: list[Any] | None = None
        if seconds is not None:
            con = store.con
            self._entry = _WATCHDOG.add(time.monotonic() + seconds, lambda: self._interrupt(con))

    def _interrupt(self, con: duckdb.DuckDBPyConnection) -> None:
        self.fired = True
        with contextlib.suppress(duckdb.Error):  # closed in the meantime: nothing runs on it any more
            con.interrupt()

    def stopped(self, exc: BaseException) -> bool:
        """Whether `exc` is the interruption this limit caused."""
        return self.fired and isinstance(exc, duckdb.InterruptException)

    @property
    def message(self) -> str:
        return (
            f"the query was stopped at the time limit of {self.seconds:g} s: "
            "narrow it with a WHERE, a LIMIT or an aggregate"
        )

    def cancel(self) -> None:
        """Stop the timer (the statements are done)."""
        if self._entry is not None:
            _WATCHDOG.cancel(self._entry)


class _Watchdog:
    """One thread that interrupts statements at their deadlines, for every `TimeLimit` of the process.

    A thread per statement would need a new stack each time: in a process whose memory the kernel caps
    (`mastrace mcp`, `mastrace query`), a statement that just ran into the cap left no room for one,
    and the next statement failed to start ("can't start new thread") instead of running.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[list[Any]] = []  # [deadline, order, callback or None when cancelled]
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def forget(self) -> None:
        """In a forked child: no thread runs there, and the lock may have been held at the fork."""
        self._cond = threading.Condition()
        self._heap = []
        self._thread = None

    def add(self, deadline: float, callback: Callable[[], None]) -> list[Any]:
        with self._cond:
            if self._thread is None or not self._thread.is_alive():  # first use, or a forked child
                self._thread = threading.Thread(target=self._run, name="mastrace-time-limit", daemon=True)
                self._thread.start()
            entry = [deadline, next(self._order), callback]
            heapq.heappush(self._heap, entry)
            self._cond.notify()
            return entry

    def cancel(self, entry: list[Any]) -> None:
        with self._cond:
            entry[2] = None  # left in the heap; dropped when it comes up

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][2] is None:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                callback = heapq.heappop(self._heap)[2]
            if callback is not None:
                with contextlib.suppress(Exception):
                    callback()


_WATCHDOG = _Watchdog()
if hasattr(os, "register_at_fork"):  # a forked child starts with no thread and a free lock
    os.register_at_fork(after_in_child=_WATCHDOG.forget)
