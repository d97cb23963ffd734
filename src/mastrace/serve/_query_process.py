"""Each Query API statement in a process of its own, under limits the kernel enforces.

DuckDB's `memory_limit` covers its buffer manager, not every allocation: `repeat('x', 1500000000)`, a
list or struct built in one expression, or Python's copy of a huge value grow past it. Run in `serve`
itself, such a statement would take serve's memory with it. So each statement runs in a child
process (forked from a `multiprocessing` fork server that has DuckDB and the readers imported, so a
child starts in milliseconds and never inherits serve's threads):

- the child caps its data segment (`RLIMIT_DATA`, `store._limits.cap_process_memory`) at what it
  holds plus the query memory limit before it opens the store: an allocation past it fails in the
  child ("Out of Memory Error" from DuckDB, `MemoryError` from Python), which answers 400; a child
  that dies instead is reported as 400 too;
- the parent kills the child once the time limit (plus a grace for DuckDB's own interruption,
  which words the error better) has passed, whatever it is doing;
- the answer crosses a pipe in pieces of at most `PIECE` bytes, read only as fast as the client
  takes them: serve holds a piece or two per query, never an answer.

`serve` keeps answering whatever a statement does; its own memory stays what it was.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import multiprocessing
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ._query_problem import QueryProblem

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

Start = Callable[..., tuple[Iterator[bytes], bytes, Callable[[], None], dict[str, str]]]
"""`_query_api._start`: (store, request, seconds, source) -> pieces, first piece, closer, headers."""

__all__ = ["PIECE", "isolation_available", "start_in_child"]

PIECE: Final = 1 << 20
"""The largest piece of an answer that crosses the pipe at once."""
_GRACE: Final = 5.0  # seconds past the time limit before the child is killed (DuckDB stops it first)
_HEADROOM: Final = 256 << 20  # what opening the store may take besides the statement's limit
_PRELOAD: Final = [
    "duckdb",
    "mastrace.analysis",
    "mastrace.serve._query_api",
    "mastrace.serve._query_process",
]
_context_lock = threading.Lock()
_context: Any = None


def isolation_available() -> bool:
    """Whether statements can run in child processes under a kernel memory limit (Linux)."""
    return sys.platform.startswith("linux") and "forkserver" in multiprocessing.get_all_start_methods()


def _forkserver() -> Any:
    """The `forkserver` context, its server told to import DuckDB and the readers once."""
    global _context
    with _context_lock:
        if _context is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(_PRELOAD)
            _context = context
        return _context


def _send(conn: Connection, tag: bytes, payload: bytes = b"") -> None:
    conn.send_bytes(tag + payload)


def _problem(conn: Connection, status: int, detail: Any, retry_after: int | None = None) -> None:
    _send(conn, b"E", json.dumps({"status": status, "detail": detail, "retry_after": retry_after}).encode())


def _child(
    conn: Connection,
    run: Start,
    store: Path,
    request: Any,
    seconds: float | None,
    source: str | None,
    memory: int,
) -> None:
    """The child's work: cap memory, run the statement, send headers then the answer in pieces."""
    # Ctrl-C in serve's terminal reaches this process too: serve ends it, it prints nothing.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        from ..store._limits import cap_process_memory

        cap_process_memory(memory + _HEADROOM)
        try:
            chunks, first, close, headers = run(store, request, seconds, source)
        except QueryProblem as problem:
            _problem(conn, problem.status, problem.detail, problem.retry_after)
            return
        try:
            _send(conn, b"H", json.dumps(headers).encode())
            for chunk in itertools.chain((first,), chunks):
                for at in range(0, len(chunk), PIECE):
                    _send(conn, b"D", chunk[at : at + PIECE])
            _send(conn, b"Z")
        finally:
            close()
    except MemoryError:
        with contextlib.suppress(OSError):
            _problem(conn, 400, _out_of_memory(memory))
    except (BrokenPipeError, ConnectionResetError):
        pass  # serve stopped reading: the client went away
    except Exception as exc:  # an answer, not a traceback in serve's terminal
        with contextlib.suppress(OSError):
            _problem(conn, 400, f"the query failed: {type(exc).__name__}")
    finally:
        conn.close()


def _out_of_memory(memory: int) -> str:
    return (
        f"the query needs more memory than its limit of {memory / 1000**3:g} GB: "
        "narrow it with a WHERE, a LIMIT or an aggregate"
    )


class _Child:
    """The parent's end: the child process, its pipe, and the time it must be done by."""

    def __init__(
        self, run: Start, store: Path, request: Any, seconds: float | None, source: str | None, memory: int
    ) -> None:
        context = _forkserver()
        self.memory = memory
        self.seconds = seconds
        self.conn, sender = context.Pipe(duplex=False)
        self.process = context.Process(
            target=_child, args=(sender, run, store, request, seconds, source, memory), daemon=True
        )
        self.deadline = None if seconds is None else time.monotonic() + seconds + _GRACE
        try:
            self.process.start()
        finally:
            sender.close()

    def receive(self) -> tuple[bytes, bytes]:
        """The next message (tag, payload); a problem when the child died or ran past its time."""
        wait = None if self.deadline is None else max(0.0, self.deadline - time.monotonic())
        try:
            ready = self.conn.poll(wait)
            data = self.conn.recv_bytes(PIECE + 1) if ready else None
        except (EOFError, OSError):
            data = b""
        if data is None:
            self.close()
            raise QueryProblem(
                400,
                f"the query was stopped at the time limit of {self.seconds:g} s: "
                "narrow it with a WHERE, a LIMIT or an aggregate",
            )
        if not data:
            self.close()
            raise QueryProblem(400, _out_of_memory(self.memory) + " (its process ended)")
        tag, payload = data[:1], data[1:]
        if tag == b"E":
            self.close()
            problem = json.loads(payload)
            raise QueryProblem(problem["status"], problem["detail"], retry_after=problem["retry_after"])
        return tag, payload

    def pieces(self) -> Iterator[bytes]:
        """The answer's pieces until its end."""
        while True:
            tag, payload = self.receive()
            if tag == b"Z":
                return
            yield payload

    def close(self) -> None:
        """End the child (killed if still running) and its pipe."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=60)
        self.conn.close()


def start_in_child(
    run: Start, store: Path, request: Any, seconds: float | None, source: str | None, memory: int
) -> tuple[Iterator[bytes], bytes, Callable[[], None], dict[str, str]]:
    """`run(store, request, seconds, source)` (`_query_api._start`, a module-level function) in a
    child process (see the module): the answer's pieces, the first one, a closer and the headers.
    Blocks until the statement's first piece (or its error) arrives.

    Raises:
        QueryProblem: 400 when the statement fails, runs past its time or its memory; what `_start`
            raises otherwise.
    """
    child = _Child(run, store, request, seconds, source, memory)
    try:
        tag, payload = child.receive()
        if tag != b"H":
            raise ValueError(f"unexpected message {tag!r} from the query process")
        headers: dict[str, str] = json.loads(payload)
        pieces = child.pieces()
        first = next(pieces, b"")
    except BaseException:
        child.close()
        raise
    return pieces, first, child.close, headers
