"""Bounds on SQL that someone else wrote: how long it may run, how much memory it may take, how many
rows it may return.

`mastrace query` runs any SQL a user types, and a server may run SQL a client sends; one recursive
CTE can otherwise take all the memory of the machine, or run forever. `QueryLimits` is applied to a
store connection (`connect(limits=...)`, `TraceStore(limits=...)`): DuckDB's memory limit with
nothing spilled to disk, and a timer that interrupts the statement when its time is up.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeVar

if TYPE_CHECKING:  # DuckDB is imported where it is used: the CLI's parser reads the defaults here
    import duckdb

__all__ = ["DEFAULT_QUERY_LIMITS", "QueryLimits", "QueryTimeout", "cap_process_memory", "run_limited"]

T = TypeVar("T")


@dataclass(frozen=True)
class QueryLimits:
    """How long a statement may run, how much memory it may take and how many rows it may return.

    Attributes:
        timeout: Seconds a statement may run before it is interrupted; None for no limit.
        memory: Bytes DuckDB may use for the connection (nothing is spilled to disk: a statement
            that needs more fails); None for DuckDB's own default (80% of the machine's memory).
        max_rows: Rows fetched from a result; None for all of them.
        threads: DuckDB threads the connection uses; None for DuckDB's default (one per core). A
            server answering pages beside other work gives its reads one.
    """

    timeout: float | None = 60.0
    memory: int | None = 2 * 1000**3
    max_rows: int | None = 100_000
    threads: int | None = None

    def apply(self, con: duckdb.DuckDBPyConnection) -> None:
        """Set the memory limit and threads on `con` (before its configuration is locked)."""
        if self.memory is not None:
            con.execute(f"SET memory_limit = '{int(self.memory)}B'")
            con.execute("SET temp_directory = ''")  # a statement over the limit fails, it does not spill
        if self.threads is not None:
            con.execute(f"SET threads = {int(self.threads)}")


DEFAULT_QUERY_LIMITS: Final = QueryLimits()
"""What `mastrace query` runs under unless told otherwise: 60 s, 2 GB, 100,000 rows."""


def cap_process_memory(extra: int) -> int | None:
    """Let this process's memory grow by at most `extra` bytes from now, enforced by the kernel.

    DuckDB's `memory_limit` covers its buffer manager, not every allocation: one `repeat()` or a
    list built in a single expression allocates outside it, and Python then copies the result. A
    process that only answers queries (`mastrace query`, `mastrace mcp`) caps its data segment
    (`RLIMIT_DATA`: heap and private writable mappings) at what it holds now plus `extra`; an
    allocation past it fails (DuckDB: "Out of Memory Error", Python: `MemoryError`) instead of
    taking the machine's memory. Never lowers a limit already set. Linux only (elsewhere: nothing).

    Returns:
        The cap set, in bytes, or None when none could be set.
    """
    try:
        import resource

        status = open("/proc/self/status").read()  # noqa: SIM115 - tiny, read once
    except (ImportError, OSError):
        return None
    found = re.search(r"^VmData:\s+(\d+) kB", status, re.MULTILINE)
    if found is None:
        return None
    cap = int(found.group(1)) * 1024 + int(extra)
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if soft != resource.RLIM_INFINITY and soft <= cap:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    except (ValueError, OSError):
        return None
    return cap


class QueryTimeout(Exception):
    """A statement ran longer than its limit and was interrupted."""


def run_limited(con: duckdb.DuckDBPyConnection, timeout: float | None, run: Callable[[], T]) -> T:
    """`run()` (statements on `con`), interrupted once `timeout` seconds have passed.

    Raises:
        QueryTimeout: The time was up before `run()` returned.
    """
    if timeout is None:
        return run()
    fired = threading.Event()

    def stop() -> None:
        fired.set()
        con.interrupt()

    import duckdb

    timer = threading.Timer(timeout, stop)
    timer.daemon = True
    timer.start()
    try:
        return run()
    except duckdb.InterruptException as exc:
        if fired.is_set():
            raise QueryTimeout(f"the query ran longer than {timeout:g} s and was stopped") from exc
        raise
    finally:
        timer.cancel()
