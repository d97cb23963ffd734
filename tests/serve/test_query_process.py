"""The Query API's statements run in processes of their own (`_query_process`): one that grows past the
memory limit (a string, list or struct builder, a doubling recursive CTE, an aggregate over a join)
ends as a 400 answer while `mastrace serve`'s own memory stays small and it keeps answering; one that
runs past the time limit is ended, whatever it is doing."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime, timezone

import httpx
import pytest

from mastrace.serve._query_process import isolation_available

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
    return httpx.post(f"{server.url}/v2/query", json={"sql": sql, "limit": 5}, timeout=600)


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
    reply = httpx.post(f"{server.url}/v2/query", json={"sql": sql, "limit": 20000}, timeout=600)
    assert reply.status_code == 200
    rows = reply.json()["data"]
    assert len(rows) == 20000 and rows[-1] == {"i": 19999, "s": "v" * 1000}
