"""Logfire's Query API in `mastrace serve`, read by Logfire's own clients against a live server.

Every SQL query of the MassGen log-analyzer guide is sent through `LogfireQueryClient` and
`AsyncLogfireQueryClient` (JSON rows, CSV, Arrow) and through `logfire.db_api` with
`pandas.read_sql`, and must answer what `mastrace query` answers on the same store.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import math
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import logfire.db_api
import pandas as pd
import pytest
from logfire.query_client import (
    AsyncLogfireQueryClient,
    LogfireQueryClient,
    QueryExecutionError,
    QueryRateLimitedError,
    QueryRequestError,
    UnexpectedResponseError,
)

import patient_http
from live_server import running
from mastrace.serve import start_intake
from mastrace.serve._query_api import query_routes, token_accepted
from mastrace.store import query
from seed_run import SEED_QUERIES, T0, Store, write_store

SINCE = datetime(2000, 1, 1, tzinfo=timezone.utc)
T0_UTC = datetime.fromtimestamp(T0 / 1e9, timezone.utc)
QUERY_NAMES = sorted(SEED_QUERIES)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return write_store(tmp_path_factory.mktemp("query-api-store"))


@pytest.fixture(scope="module")
def url(store: Store) -> Iterator[str]:
    server = start_intake(store.path, http_port=0, grpc_port=None)
    try:
        yield f"http://127.0.0.1:{server.http_port}"
    finally:
        server.stop()


@pytest.fixture
def client(url: str) -> Iterator[LogfireQueryClient]:
    with LogfireQueryClient("any-read-token", base_url=url) as c:
        yield c


def _local(store: Store, name: str) -> list[dict[str, Any]]:
    return query(store.sql(SEED_QUERIES[name]), store.path)


def _json_value(value: Any) -> Any:
    """A value of `mastrace query` as the JSON answer spells it."""
    if isinstance(value, datetime):
        return value.isoformat(timespec="microseconds") + "Z"
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _text_value(value: Any) -> str:
    """A value of `mastrace query` as the CSV answer spells it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return str(value)
    return str(_json_value(value))


def _same(name: str, got: list[Any], want: list[Any]) -> None:
    """Rows equal, in order when the query orders them."""
    if "ORDER BY" not in SEED_QUERIES[name]:
        got, want = sorted(got, key=repr), sorted(want, key=repr)
    assert got == want


@pytest.mark.parametrize("name", QUERY_NAMES)
def test_json_rows_answer_every_seed_query(store: Store, client: LogfireQueryClient, name: str) -> None:
    """`query_json_rows` answers each guide query with the rows and column names `mastrace query` gives."""
    want = _local(store, name)
    result = client.query_json_rows(store.sql(SEED_QUERIES[name]), min_timestamp=SINCE)
    assert [c["name"] for c in result["columns"]] == list(want[0])
    _same(name, result["rows"], [{k: _json_value(v) for k, v in row.items()} for row in want])


@pytest.mark.parametrize("name", QUERY_NAMES)
def test_csv_answers_every_seed_query(store: Store, client: LogfireQueryClient, name: str) -> None:
    """`query_csv` answers each guide query with a header and the same values as text."""
    want = _local(store, name)
    text = client.query_csv(store.sql(SEED_QUERIES[name]), min_timestamp=SINCE)
    header, *rows = list(csv.reader(io.StringIO(text)))
    assert header == list(want[0])
    _same(name, rows, [[_text_value(v) for v in row.values()] for row in want])


@pytest.mark.parametrize("name", QUERY_NAMES)
def test_arrow_answers_every_seed_query(store: Store, client: LogfireQueryClient, name: str) -> None:
    """`query_arrow` answers each guide query with the same values, timestamps in UTC."""
    want = _local(store, name)
    table = client.query_arrow(store.sql(SEED_QUERIES[name]), min_timestamp=SINCE)
    assert table.column_names == list(want[0])
    expected = [
        {k: v.replace(tzinfo=timezone.utc) if isinstance(v, datetime) else v for k, v in row.items()}
        for row in want
    ]
    _same(name, table.to_pylist(), expected)


async def _async_answers(url: str, sql: str) -> tuple[Any, str, Any]:
    async with AsyncLogfireQueryClient("any-read-token", base_url=url) as client:
        rows = await client.query_json_rows(sql, min_timestamp=SINCE)
        text = await client.query_csv(sql, min_timestamp=SINCE)
        table = await client.query_arrow(sql, min_timestamp=SINCE)
    return rows, text, table


@pytest.mark.parametrize("name", QUERY_NAMES)
def test_async_client_answers_every_seed_query(store: Store, url: str, name: str) -> None:
    """`AsyncLogfireQueryClient` gets the same JSON, CSV and Arrow answers as the sync client."""
    sql = store.sql(SEED_QUERIES[name])
    rows, text, table = asyncio.run(_async_answers(url, sql))
    with LogfireQueryClient("any-read-token", base_url=url) as sync:
        want_rows = sync.query_json_rows(sql, min_timestamp=SINCE)
        want_text = sync.query_csv(sql, min_timestamp=SINCE)
        want_table = sync.query_arrow(sql, min_timestamp=SINCE)
    assert rows["columns"] == want_rows["columns"]
    _same(name, rows["rows"], want_rows["rows"])
    _same(name, text.splitlines(), want_text.splitlines())
    _same(name, table.to_pylist(), want_table.to_pylist())
    assert len(rows["rows"]) == len(_local(store, name)) and table.schema == want_table.schema


@pytest.mark.filterwarnings("ignore:pandas only supports SQLAlchemy")
@pytest.mark.parametrize("name", QUERY_NAMES)
def test_db_api_and_pandas_read_sql_answer_every_seed_query(store: Store, url: str, name: str) -> None:
    """`pandas.read_sql` over `logfire.db_api.connect()` builds the frame the local rows build."""
    want = [{k: _json_value(v) for k, v in row.items()} for row in _local(store, name)]
    with logfire.db_api.connect("any-read-token", base_url=url, min_timestamp=SINCE) as conn:
        frame = pd.read_sql(store.sql(SEED_QUERIES[name]), conn)
    expected = pd.DataFrame(want, columns=list(want[0]))
    if "ORDER BY" not in SEED_QUERIES[name]:
        frame = frame.sort_values(list(frame.columns)).reset_index(drop=True)
        expected = expected.sort_values(list(expected.columns)).reset_index(drop=True)
    pd.testing.assert_frame_equal(frame, expected)


def test_db_api_cursor_describes_columns(store: Store, url: str) -> None:
    """A DB-API cursor reports each column's name and Arrow type, and fetches tuples."""
    with logfire.db_api.connect("t", base_url=url, min_timestamp=SINCE) as conn:
        cursor = conn.cursor()
        cursor.execute(
            "SELECT span_name, duration, start_timestamp FROM records WHERE trace_id = %(trace)s "
            "ORDER BY start_timestamp LIMIT 1",
            {"trace": store.trace_id},
        )
        assert [d[:2] for d in cursor.description] == [
            ("span_name", "Utf8"),
            ("duration", "Float64"),
            ("start_timestamp", {"Timestamp": ["Microsecond", "UTC"]}),
        ]
        assert cursor.fetchall() == [("coordination.session", 100.0, "2023-11-14T22:13:20.000000Z")]


def test_read_token_info_names_the_store(store: Store, client: LogfireQueryClient) -> None:
    """`info()` names mastrace as the organisation and the store folder as the project."""
    assert client.info() == {"organization_name": "mastrace", "project_name": store.path.name}


def test_logfire_mcp_reads_token_info_at_its_own_path(store: Store, url: str) -> None:
    """`/api/read-token-info`, which Logfire's MCP server reads for its links, answers the same."""
    reply = patient_http.get(f"{url}/api/read-token-info", headers={"authorization": "t"})
    assert reply.json()["project_name"] == store.path.name


def test_min_and_max_timestamp_narrow_records(store: Store, client: LogfireQueryClient) -> None:
    """`min_timestamp` keeps spans started at or after it and `max_timestamp` those started before it."""
    sql = "SELECT DISTINCT trace_id FROM records"
    split = T0_UTC - timedelta(minutes=10)
    newer = client.query_json_rows(sql, min_timestamp=split)["rows"]
    older = client.query_json_rows(sql, min_timestamp=SINCE, max_timestamp=split)["rows"]
    assert newer == [{"trace_id": store.trace_id}] and older == [{"trace_id": store.old_trace_id}]
    assert client.query_json_rows(sql, min_timestamp=T0_UTC + timedelta(days=1))["rows"] == []
    naive = client.query_json_rows(sql, min_timestamp=split.replace(tzinfo=None))["rows"]
    assert naive == newer  # a naive time is UTC, as the client says


def test_roots_follow_the_window(store: Store, client: LogfireQueryClient) -> None:
    """The `roots` table is narrowed by the time window like `records`."""
    split = T0_UTC - timedelta(minutes=10)
    rows = client.query_json_rows("SELECT trace_id FROM roots", min_timestamp=split)["rows"]
    assert rows == [{"trace_id": store.trace_id}]


def test_limit_takes_priority_over_the_sql_limit(client: LogfireQueryClient) -> None:
    """`limit` caps the rows below the statement's own LIMIT, and a larger one leaves it in force."""
    sql = "SELECT span_id FROM records ORDER BY start_timestamp LIMIT 30"
    assert len(client.query_json_rows(sql, min_timestamp=SINCE, limit=3)["rows"]) == 3
    assert len(client.query_json_rows(sql, min_timestamp=SINCE, limit=1000)["rows"]) == 30
    assert len(client.query_json_rows(sql, min_timestamp=SINCE, limit=0)["rows"]) == 0


def test_without_a_limit_the_default_is_logfires(url: str) -> None:
    """A request without `limit` gets at most 500 rows, as from Logfire."""
    body = {"sql": "SELECT * FROM range(1000)", "min_timestamp": SINCE.isoformat()}
    reply = patient_http.post(f"{url}/v2/query", json=body, headers={"authorization": "t"})
    assert len(reply.json()["data"]) == 500


def test_answers_stream_many_batches_whole(client: LogfireQueryClient) -> None:
    """An answer of several encoder batches arrives whole in every format."""
    sql = "SELECT range AS n, 'x' || range AS s FROM range(120000)"
    rows = client.query_json_rows(sql, min_timestamp=SINCE, limit=200000)["rows"]
    assert len(rows) == 120000 and rows[-1] == {"n": 119999, "s": "x119999"}
    table = client.query_arrow(sql, min_timestamp=SINCE, limit=200000)
    assert table.num_rows == 120000 and table.column("n").to_pylist()[-1] == 119999
    text = client.query_csv(sql, min_timestamp=SINCE, limit=200000)
    assert text.count("\n") == 120001 and text.endswith("119999,x119999\n")


def test_awkward_values_keep_their_meaning(client: LogfireQueryClient) -> None:
    """Duplicate names, NaN, quotes, newlines, unicode, lists, structs and JSON survive each format."""
    sql = (
        "SELECT 1 AS a, 2 AS a, 'nan'::DOUBLE AS d, 'say \"hi\",\\n''ok''\n✓' AS s, [1, 2] AS l, "
        "{'k': 'v'} AS st, '{\"x\": [1]}'::JSON AS j, NULL::VARCHAR AS z, true AS b"
    )
    (row,) = client.query_json_rows(sql, min_timestamp=SINCE)["rows"]
    assert row == {
        "a": 1,
        "a_1": 2,
        "d": None,
        "s": "say \"hi\",\\n'ok'\n✓",
        "l": [1, 2],
        "st": {"k": "v"},
        "j": {"x": [1]},
        "z": None,
        "b": True,
    }
    (line,) = list(csv.DictReader(io.StringIO(client.query_csv(sql, min_timestamp=SINCE))))
    assert line == {
        "a": "1",
        "a_1": "2",
        "d": "nan",
        "s": row["s"],
        "l": "[1,2]",
        "st": '{"k":"v"}',
        "j": '{"x": [1]}',
        "z": "",
        "b": "true",
    }
    (arrow_row,) = client.query_arrow(sql, min_timestamp=SINCE).to_pylist()
    assert math.isnan(arrow_row.pop("d")) and arrow_row["j"] == '{"x": [1]}' and arrow_row["st"] == {"k": "v"}


def test_an_empty_store_answers_no_rows(tmp_path: Path) -> None:
    """A serve over a store with no spans yet answers queries with no rows, not an error."""
    server = start_intake(tmp_path / "empty", http_port=0, grpc_port=None)
    try:
        with LogfireQueryClient("t", base_url=f"http://127.0.0.1:{server.http_port}") as c:
            result = c.query_json_rows("SELECT span_name FROM records", min_timestamp=SINCE)
    finally:
        server.stop()
    assert result == {"columns": [{"name": "span_name", "datatype": "Utf8", "nullable": True}], "rows": []}


def test_environment_filter_reads_the_resource(tmp_path: Path) -> None:
    """`deployment_environment` keeps the spans of the named environments; '' those without one."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from mastrace.store import LocalStoreExporter

    for name, env in (("prod-span", "prod"), ("dev-span", "dev"), ("bare-span", None)):
        attrs = {"deployment.environment.name": env} if env else {}
        provider = TracerProvider(resource=Resource.create(attrs))
        provider.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(tmp_path)))
        provider.get_tracer("t").start_span(name).end()
        provider.shutdown()
    server = start_intake(tmp_path, http_port=0, grpc_port=None)
    sql = "SELECT span_name FROM records ORDER BY span_name"
    try:
        with LogfireQueryClient("t", base_url=f"http://127.0.0.1:{server.http_port}") as c:
            prod = c.query_json_rows(sql, min_timestamp=SINCE, environment="prod")["rows"]
            some = c.query_json_rows(sql, min_timestamp=SINCE, environment=["dev", ""])["rows"]
    finally:
        server.stop()
    assert prod == [{"span_name": "prod-span"}]
    assert some == [{"span_name": "bare-span"}, {"span_name": "dev-span"}]


# --- errors, as the client reads them ----------------------------------------------------------------
def test_bad_sql_is_a_query_execution_error_with_details(client: LogfireQueryClient) -> None:
    """SQL that does not parse or bind raises `QueryExecutionError` carrying DuckDB's message."""
    with pytest.raises(QueryExecutionError) as parse_error:
        client.query_json_rows("SELEC span_name FROM records", min_timestamp=SINCE)
    assert "syntax error" in parse_error.value.args[0]["detail"]
    with pytest.raises(QueryExecutionError) as bind_error:
        client.query_json_rows("SELECT no_such_column FROM records", min_timestamp=SINCE)
    assert "no_such_column" in bind_error.value.args[0]["detail"]
    assert bind_error.value.problem is not None and bind_error.value.problem["status"] == 400


@pytest.mark.parametrize(
    "sql",
    [
        "COPY (SELECT * FROM records) TO '/tmp/stolen.csv'",
        "ATTACH '/tmp/other.duckdb'",
        "INSTALL httpfs",
        "SET enable_external_access = true",
        "CREATE TABLE t AS SELECT 1",
        "DROP VIEW records",
        "SELECT 1; SELECT 2",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_json('/etc/hostname')",
    ],
)
def test_the_sandbox_refuses_what_mastrace_query_refuses(client: LogfireQueryClient, sql: str) -> None:
    """Writing, attaching, installing, settings, second statements and other files fail with 400."""
    with pytest.raises(QueryExecutionError):
        client.query_json_rows(sql, min_timestamp=SINCE)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{not json", "body"),
        (b"[1, 2]", "body"),
        (b'{"min_timestamp": "2020-01-01T00:00:00Z"}', "sql"),
        (b'{"sql": 42}', "sql"),
        (b'{"sql": "   "}', "sql"),
        (b'{"sql": "SELECT 1", "limit": -1}', "limit"),
        (b'{"sql": "SELECT 1", "limit": "10"}', "limit"),
        (b'{"sql": "SELECT 1", "limit": true}', "limit"),
        (b'{"sql": "SELECT 1", "min_timestamp": "yesterday"}', "min_timestamp"),
        (b'{"sql": "SELECT 1", "max_timestamp": 1700000000}', "max_timestamp"),
        (b'{"sql": "SELECT 1", "deployment_environment": "prod"}', "deployment_environment"),
        (b'{"sql": "SELECT 1", "timezone": "Europe/Paris"}', "timezone"),
        (b'{"sql": "SELECT 1", "explain": true}', "explain"),
        # hostile ones: deep nesting, times out of range once in UTC, lone surrogates
        (b"[" * 100_000 + b"]" * 100_000, "body"),
        (b'{"sql": "SELECT 1", "min_timestamp": "0001-01-01T00:00:00+14:00"}', "min_timestamp"),
        (b'{"sql": "SELECT 1", "max_timestamp": "9999-12-31T23:59:59-14:00"}', "max_timestamp"),
        (b'{"sql": "SELECT \'\\ud800\'"}', "sql"),
        (b'{"sql": "SELECT 1", "deployment_environment": ["\\udfff"]}', "deployment_environment"),
    ],
)
def test_malformed_requests_get_422_naming_the_field(url: str, body: bytes, field: str) -> None:
    """A malformed or hostile body or field is refused with 422 (never 500) and a FastAPI-shaped detail
    naming it."""
    reply = patient_http.post(
        f"{url}/v2/query", content=body, headers={"authorization": "t", "content-type": "application/json"}
    )
    assert reply.status_code == 422, reply.text
    assert reply.json()["detail"][0]["loc"] == ["body", field]


def test_the_client_reads_422_as_a_request_error(client: LogfireQueryClient) -> None:
    """Logfire's client raises `QueryRequestError` with the legacy body for a request serve refuses."""
    with pytest.raises(QueryRequestError) as error:
        client.query_json_rows("SELECT 1", min_timestamp=SINCE, timezone="America/New_York")
    assert error.value.args[0]["detail"][0]["loc"] == ["body", "timezone"]
    assert client.query_json_rows("SELECT 1 AS one", min_timestamp=SINCE, timezone="UTC")["rows"] == [
        {"one": 1}
    ]


def test_an_oversized_body_is_refused(url: str) -> None:
    """A request body over 1 MiB gets 413 before it is parsed."""
    body = json.dumps({"sql": "SELECT '" + "x" * (1 << 20) + "'"})
    reply = patient_http.post(
        f"{url}/v2/query", content=body, headers={"authorization": "t", "content-type": "application/json"}
    )
    assert reply.status_code == 413


def test_a_format_serve_cannot_produce_gets_406(url: str) -> None:
    """An `Accept` naming only formats serve does not produce is refused with 406."""
    reply = patient_http.post(
        f"{url}/v2/query",
        json={"sql": "SELECT 1"},
        headers={"accept": "application/xml", "authorization": "t"},
    )
    assert reply.status_code == 406
    default = patient_http.post(
        f"{url}/v2/query", json={"sql": "SELECT 1 AS one"}, headers={"authorization": "t"}
    )
    assert default.headers["content-type"] == "application/json" and default.json()["data"] == [{"one": 1}]


def test_busy_slots_answer_429_with_retry_after(store: Store) -> None:
    """With every query slot taken the client raises `QueryRateLimitedError` with the wait to honour."""
    with (
        running(query_routes(store.path, max_queries=0)) as base,
        LogfireQueryClient("t", base_url=base) as c,
        pytest.raises(QueryRateLimitedError) as error,
    ):
        c.query_json_rows("SELECT 1", min_timestamp=SINCE)
    assert error.value.retry_after == 1 and error.value.retryable is True


def test_an_abandoned_answer_gives_its_slot_back(store: Store) -> None:
    """A client that hangs up in the middle of a streamed answer does not keep its query slot."""
    with running(query_routes(store.path, max_queries=1)) as base:
        body = {"sql": "SELECT range, repeat('x', 100) FROM range(2000000)", "limit": 2000000}
        with httpx.stream("POST", f"{base}/v2/query", json=body) as reply:
            assert reply.status_code == 200
            next(reply.iter_bytes())
        # A generous read timeout: on a loaded machine the first answer may take longer than the
        # client's default 30 s; a slot that is never given back still fails below, by the deadline.
        with LogfireQueryClient("t", base_url=base, timeout=httpx.Timeout(600.0)) as c:
            deadline = datetime.now() + timedelta(seconds=600)
            while True:
                try:
                    assert c.query_json_rows("SELECT 1 AS one", min_timestamp=SINCE)["rows"] == [{"one": 1}]
                    break
                except QueryRateLimitedError:
                    if datetime.now() > deadline:
                        pytest.fail("the abandoned answer still held the only query slot after 600 s")


def test_a_row_cap_refuses_larger_limits(store: Store) -> None:
    """A serve started with a row cap refuses a larger `limit` with 422, as Logfire does above 10,000."""
    with running(query_routes(store.path, max_rows=10)) as base, LogfireQueryClient("t", base_url=base) as c:
        assert len(c.query_json_rows("SELECT * FROM records", min_timestamp=SINCE, limit=10)["rows"]) == 10
        with pytest.raises(QueryRequestError):
            c.query_json_rows("SELECT * FROM records", min_timestamp=SINCE, limit=11)


# --- the read token ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("presented", "configured", "host", "accepted"),
    [
        ("anything", None, "127.0.0.1", True),
        (None, None, "127.0.0.1", True),
        ("anything", None, "127.8.9.10", True),
        ("anything", None, "::1", True),
        ("anything", None, "::ffff:127.0.0.1", True),
        ("anything", None, "localhost", True),
        ("anything", None, "192.168.1.20", False),
        ("anything", None, "10.0.0.1", False),
        ("anything", None, "example.org", False),
        ("anything", None, None, False),
        ("s3cret", "s3cret", "192.168.1.20", True),
        ("Bearer s3cret", "s3cret", "192.168.1.20", True),
        ("bearer   s3cret ", "s3cret", "127.0.0.1", True),
        ("s3cret-but-longer", "s3cret", "127.0.0.1", False),
        ("S3CRET", "s3cret", "127.0.0.1", False),
        ("", "s3cret", "127.0.0.1", False),
        (None, "s3cret", "127.0.0.1", False),
        ("Bearer ", "s3cret", "127.0.0.1", False),
    ],
)
def test_token_accepted(
    presented: str | None, configured: str | None, host: str | None, accepted: bool
) -> None:
    """Without a serve token only loopback clients read; with one, only that token (bare or Bearer) does."""
    assert token_accepted(presented, configured, host) is accepted


def test_a_configured_token_is_checked_on_every_route(store: Store) -> None:
    """With a serve token, a wrong token gets 401 on the query and the token info, the right one reads."""
    with running(query_routes(store.path, token="s3cret")) as base:
        with LogfireQueryClient("wrong", base_url=base) as wrong:
            with pytest.raises(UnexpectedResponseError, match="401"):
                wrong.query_json_rows("SELECT 1", min_timestamp=SINCE)
            with pytest.raises(UnexpectedResponseError, match="401"):
                wrong.info()
        with LogfireQueryClient("s3cret", base_url=base) as right:
            assert right.query_json_rows("SELECT 1 AS one", min_timestamp=SINCE)["rows"] == [{"one": 1}]
        bearer = patient_http.post(
            f"{base}/v2/query", json={"sql": "SELECT 1"}, headers={"authorization": "Bearer s3cret"}
        )
        assert bearer.status_code == 200


# --- hostile and unusual clients ---------------------------------------------------------------------
def _strict_json(raw: bytes) -> Any:
    """JSON as a strict parser (a browser's, Go's, Rust's) reads it: no NaN or Infinity tokens."""

    def refuse(token: str) -> Any:
        raise ValueError(f"{token} is not JSON")

    return json.loads(raw, parse_constant=refuse)


NESTED_SQL = (
    "SELECT [TIMESTAMP '2024-01-02 03:04:05'] AS times, {'at': TIMESTAMP '2024-01-02 03:04:05'} AS st, "
    "[1.5::DECIMAL(4,1)] AS decimals, [1.0, 'nan'::DOUBLE, '-inf'::DOUBLE] AS floats, "
    "{'ratio': 'inf'::FLOAT} AS ratio, MAP {'k': 'nan'::DOUBLE} AS m, "
    "340282366920938463463374607431768211455::UHUGEINT AS huge, 'x' AS plain"
)


@pytest.mark.filterwarnings("ignore:pandas only supports SQLAlchemy")
def test_nested_and_wide_values_reach_every_client(url: str, client: LogfireQueryClient) -> None:
    """Lists of times and decimals, non-finite floats inside lists, structs and maps, and the widest
    unsigned integers answer in every format: strict JSON, CSV, Arrow with the exact value, pandas."""
    raw = patient_http.post(f"{url}/v2/query", json={"sql": NESTED_SQL}, headers={"authorization": "t"})
    assert raw.status_code == 200, raw.text
    (row,) = _strict_json(raw.content)["data"]
    assert row["floats"] == [1.0, None, None] and row["ratio"] == {"ratio": None} and row["m"] == {"k": None}
    assert row["decimals"] == [1.5] and row["huge"] == "340282366920938463463374607431768211455"
    assert row["times"] == ["2024-01-02 03:04:05"] and row["plain"] == "x"
    fields = {
        f["name"]: f["datatype"] for f in client.query_json_rows(NESTED_SQL, min_timestamp=SINCE)["columns"]
    }
    assert fields["decimals"] == {
        "List": {"name": "item", "datatype": {"Decimal128": [4, 1]}, "nullable": True}
    }
    assert fields["times"]["List"]["datatype"] == {"Timestamp": ["Microsecond", "UTC"]}
    (line,) = list(csv.DictReader(io.StringIO(client.query_csv(NESTED_SQL, min_timestamp=SINCE))))
    assert line["huge"] == "340282366920938463463374607431768211455" and line["decimals"] == "[1.5]"
    (arrow_row,) = client.query_arrow(NESTED_SQL, min_timestamp=SINCE).to_pylist()
    assert arrow_row["huge"] == "340282366920938463463374607431768211455"
    assert arrow_row["decimals"] == [Decimal("1.5")] and arrow_row["times"] == [datetime(2024, 1, 2, 3, 4, 5)]
    with logfire.db_api.connect("t", base_url=url, min_timestamp=SINCE) as conn:
        frame = pd.read_sql(NESTED_SQL, conn)
    assert frame.loc[0, "plain"] == "x" and frame.loc[0, "floats"] == [1.0, None, None]


def test_a_limit_beyond_64_bits_means_every_row(client: LogfireQueryClient) -> None:
    """A `limit` too large for any store is no limit, not a failed query."""
    for limit in (2**63, 10**30):
        rows = client.query_json_rows("SELECT * FROM range(3)", min_timestamp=SINCE, limit=limit)["rows"]
        assert len(rows) == 3


@pytest.mark.parametrize(
    ("accept", "media"),
    [
        ("text/csv;q=0, application/json", "application/json"),
        ("application/json;q=0.5, text/csv", "text/csv"),
        ("application/vnd.apache.arrow.stream;q=0.1, text/csv;q=0.9", "text/csv"),
        ("text/*", "text/csv"),
        ("*/*;q=0.1, application/vnd.apache.arrow.stream", "application/vnd.apache.arrow.stream"),
        ("application/json, application/problem+json;q=0.9", "application/json"),
    ],
)
def test_accept_honours_quality_values(url: str, accept: str, media: str) -> None:
    """The answer's format is the most preferred one serve produces; q=0 means not that one."""
    reply = patient_http.post(f"{url}/v2/query", json={"sql": "SELECT 1 AS one"}, headers={"accept": accept})
    assert reply.status_code == 200 and reply.headers["content-type"].split(";")[0] == media


def test_only_a_format_refused_with_q0_is_not_acceptable(url: str) -> None:
    """An `Accept` whose only format serve produces has q=0 gets 406."""
    reply = patient_http.post(
        f"{url}/v2/query", json={"sql": "SELECT 1"}, headers={"accept": "application/json;q=0"}
    )
    assert reply.status_code == 406


def test_a_runaway_query_is_stopped_at_the_time_limit(store: Store) -> None:
    """A statement that would run for ages is interrupted at the time limit with a 400 saying so,
    and its slot serves the next query."""
    forever = "SELECT sum(range % 7) FROM range(9223372036854775807)"
    with (
        running(query_routes(store.path, max_queries=1, max_seconds=1)) as base,
        LogfireQueryClient("t", base_url=base, timeout=600) as c,
    ):
        with pytest.raises(QueryExecutionError) as error:
            c.query_json_rows(forever, min_timestamp=SINCE)
        assert "time limit of 1 s" in error.value.args[0]["detail"]
        assert c.query_json_rows("SELECT 1 AS one", min_timestamp=SINCE)["rows"] == [{"one": 1}]


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:4318", "127.0.0.1.nip.io"])
def test_a_rebound_name_cannot_read_without_a_token(url: str, host: str) -> None:
    """Without a serve token, a request naming another host (a web page whose name was rebound to
    127.0.0.1) is refused: only loopback names and addresses read."""
    for method, path in (("POST", "/v2/query"), ("GET", "/v1/read-token-info")):
        reply = patient_http.request(method, f"{url}{path}", json={"sql": "SELECT 1"}, headers={"host": host})
        # serve's guard refuses the foreign name before the route sees it
        assert reply.status_code == 403 and "is not this server's" in reply.text, (path, reply.text)


@pytest.mark.parametrize("host", ["attacker.example", "127.0.0.1.nip.io"])
def test_the_query_routes_alone_refuse_a_rebound_name(store: Store, host: str) -> None:
    """Mounted without serve's guard, the query routes still refuse a foreign `Host` (401)."""
    with running(query_routes(store.path)) as base:
        reply = patient_http.post(f"{base}/v2/query", json={"sql": "SELECT 1"}, headers={"host": host})
        assert reply.status_code == 401, reply.text
        reply = patient_http.post(
            f"{base}/v2/query", json={"sql": "SELECT 1 AS one"}, headers={"host": "localhost"}
        )
        assert reply.status_code == 200 and reply.json()["data"] == [{"one": 1}]


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST:4318", "127.0.0.1", "[::1]:4318", "app.localhost"])
def test_loopback_names_read_without_a_token(url: str, host: str) -> None:
    """Loopback names and addresses in `Host` read as before."""
    reply = patient_http.post(f"{url}/v2/query", json={"sql": "SELECT 1 AS one"}, headers={"host": host})
    assert reply.status_code == 200 and reply.json()["data"] == [{"one": 1}]
