"""The Query API's statements run in processes of their own (`_query_process`): one that grows past the
memory limit (a string, list or struct builder, a doubling recursive CTE, an aggregate over a join)
ends as a 400 answer while `mastrace serve`'s own memory stays small and it keeps answering; one that
runs past the time limit is ended, whatever it is doing: by DuckDB's own interruption in the child, or, when
the child does not stop, killed by serve."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

import patient_http
from live_server import running
from mastrace.serve import _query_api, _query_process
from mastrace.serve._query_api import query_routes
from mastrace.serve._query_process import isolation_available
from mastrace.store import LocalStoreExporter

from .conftest import ServeProcess

pytestmark = pytest.mark.skipif(
    not isolation_available() or not sys.platform.startswith("linux"), reason="Linux only"
)

HOSTILE = {
    "string builder": "SELECT repeat('x', 1500000000) AS s",
    "string length": "SELECT length(repeat('x', 1500000000)) AS n",
    "doubling CTE": (
        "WITH RECURSIVE t(s) AS (SELECT repeat('x', 1024) UNION ALL SELECT s || s FROM t "
        "WHERE length(s) < 8000000000) SELECT max(length(s)) AS n FROM t"
    ),
    "list builder": "SELECT list_resize([]::BIGINT[], 1500000000, 7) AS l",
    "struct builder": "SELECT {'a': repeat('y', 1200000000), 'b': repeat('z', 1200000000)} AS s",
    "join aggregate": (
        "SELECT length(string_agg(repeat('j', 1000), ',')) AS n FROM range(3000) a, range(1000) b"
    ),
}
SINCE = datetime(2000, 1, 1, tzinfo=timezone.utc)
LOOSE_MB = 600  # serve itself: its libraries and one answer's pieces, far below one hostile value


def _post(server: ServeProcess, sql: str) -> httpx.Response:
    return patient_http.post(f"{server.url}/v2/query", json={"sql": sql, "limit": 5}, timeout=600)


def test_queries_that_outgrow_the_memory_limit_end_as_errors_and_serve_stays_small(
    serve_process: Callable[..., ServeProcess],
) -> None:
    """Each hostile statement, sent by a plain HTTP client, gets a 400 saying it needed more memory
    than its limit; `serve`'s peak
    memory stays under a fraction of what one of them asks for, and it answers the next query."""
    server = serve_process()
    assert _post(server, "SELECT 1 AS one").json()["data"] == [{"one": 1}]
    for name, sql in HOSTILE.items():
        reply = _post(server, sql)
        assert reply.status_code == 400, (name, reply.status_code, reply.text[:300])
        assert "memory" in reply.json()["detail"].lower(), (name, reply.text[:300])
        assert _post(server, "SELECT 2 AS two").json()["data"] == [{"two": 2}], name
    assert server.process.poll() is None
    assert server.peak_rss_mb() < LOOSE_MB, server.peak_rss_mb()


def test_the_logfire_client_gets_the_memory_error_as_a_query_error(
    serve_process: Callable[..., ServeProcess],
) -> None:
    """Logfire's own query client sees the memory failure as `QueryExecutionError`, as any failed query."""
    from logfire.query_client import LogfireQueryClient, QueryExecutionError

    server = serve_process()
    with LogfireQueryClient("t", base_url=server.url, timeout=600) as client:
        with pytest.raises(QueryExecutionError) as error:
            client.query_json_rows(HOSTILE["string builder"], min_timestamp=SINCE)
        assert "memory" in str(error.value.args[0]["detail"]).lower()
        assert client.query_json_rows("SELECT 1 AS one", min_timestamp=SINCE)["rows"] == [{"one": 1}]


def test_a_large_answer_crosses_in_pieces(serve_process: Callable[..., ServeProcess]) -> None:
    """An answer of many megabytes streams whole through the pipe, piece by piece."""
    server = serve_process()
    sql = "SELECT range AS i, repeat('v', 1000) AS s FROM range(20000)"
    reply = patient_http.post(f"{server.url}/v2/query", json={"sql": sql, "limit": 20000}, timeout=600)
    assert reply.status_code == 200
    rows = reply.json()["data"]
    assert len(rows) == 20000 and rows[-1] == {"i": 19999, "s": "v" * 1000}


_REAL_START = _query_api._start  # in serve and in each statement's child (which imports this module afresh)


def stubborn_start(
    store: Path, request: Any, seconds: float | None = None, source: str | None = None
) -> tuple[Iterator[bytes], bytes, Callable[[], None], dict[str, str]]:
    """`_query_api._start`, but a statement naming `stubborn` sleeps in C for an hour instead: no time limit
    of the child's own (DuckDB's interruption) applies to it, it never answers and never stops by itself."""
    if "stubborn" in request.sql:
        time.sleep(3600)
    return _REAL_START(store, request, seconds, source)


def test_a_child_that_does_not_stop_is_killed_by_serve_which_answers_the_next_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A statement whose child outlives the time limit (its own interruption never comes) is killed by serve
    once the limit and its grace have passed (SIGKILL, not an exit of its own); the client gets the 400 that
    names the time limit, and the one query slot serves the next statement."""
    LocalStoreExporter(tmp_path / "store").shutdown()
    monkeypatch.setattr(_query_api, "_start", stubborn_start)  # what serve hands each statement's child
    # Each statement's child, by pid in start order, as serve first closed it: whether it was still
    # running, whether its deadline (the time limit plus the grace) had passed, and its exit code then.
    ended: dict[int, tuple[bool, bool, int | None]] = {}
    close = _query_process._Child.close

    def close_and_record(self: Any) -> None:
        alive, late = self.process.is_alive(), time.monotonic() >= self.deadline
        close(self)
        ended.setdefault(self.process.pid, (alive, late, self.process.exitcode))

    monkeypatch.setattr(_query_process._Child, "close", close_and_record)
    with running(query_routes(tmp_path / "store", max_queries=1, max_seconds=1, isolate=True)) as base:
        reply = httpx.post(f"{base}/v2/query", json={"sql": "SELECT 'stubborn' AS s"}, timeout=600)
        assert reply.status_code == 400, reply.text
        assert reply.json() == {
            "detail": "the query was stopped at the time limit of 1 s: "
            "narrow it with a WHERE, a LIMIT or an aggregate"
        }
        killed = (True, True, -signal.SIGKILL)  # still running at its deadline, and killed
        assert list(ended.values()) == [killed]
        problem = httpx.post(
            f"{base}/v2/query",
            json={"sql": "SELECT 'stubborn again' AS s"},
            headers={"accept": "application/json, application/problem+json"},
            timeout=600,
        )
        assert problem.status_code == 400
        assert problem.json()["title"] == "Query failed" and "time limit of 1 s" in problem.json()["detail"]
        assert list(ended.values()) == [killed, killed]
        after = httpx.post(f"{base}/v2/query", json={"sql": "SELECT 2 AS two"}, timeout=600)
        assert after.status_code == 200 and after.json()["data"] == [{"two": 2}]
    assert len(ended) == 3  # the third statement's child was closed too, once its answer was sent
