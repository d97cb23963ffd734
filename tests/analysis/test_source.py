"""`SourceStore`: a store read through a Logfire-compatible Query API, paged when the source caps rows."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from live_server import running
from mastrace.analysis import SourceStore, TraceStore, build_report
from mastrace.analysis._source import _local_connection, _show_records, source_url
from mastrace.exceptions import StoreError
from mastrace.serve._query_api import query_routes
from seed_run import Store, write_store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return write_store(tmp_path_factory.mktemp("source-store"))


@pytest.fixture(scope="module")
def capped(store: Store) -> Iterator[str]:
    """A Query API over the store that answers at most 7 rows a query (refusing larger limits)."""
    with running(query_routes(store.path, max_rows=7)) as url:
        yield url


def _report(store: TraceStore, ref: str) -> dict[str, Any]:
    report = build_report(store, store.resolve(ref)).to_dict()
    report.pop("generated_at")
    return report


def test_a_capped_source_is_read_in_pages(store: Store, capped: str) -> None:
    """Runs, spans and reports read 7 rows at a time equal those read from the store itself."""
    with SourceStore(capped, page_rows=7) as remote, TraceStore(store.path) as local:
        assert remote.runs() == local.runs()
        for ref in ("latest", "previous"):
            assert _report(remote, ref) == _report(local, ref)
        assert remote.spans(store.trace_id) == local.spans(store.trace_id)
        assert len(remote.spans(store.trace_id)) == 20


def test_a_page_size_the_source_refuses_is_an_error(capped: str) -> None:
    """When even the page size is over the source's cap, the refusal is reported, not swallowed."""
    with SourceStore(capped, page_rows=8) as remote, pytest.raises(StoreError, match="at most 7"):
        remote.runs()


def test_a_rate_limited_source_is_retried_then_reported(store: Store) -> None:
    """429s are retried after the wait the source asks for, then reported as rate limiting."""
    with (
        running(query_routes(store.path, max_queries=0)) as url,
        SourceStore(url, retries=1) as remote,
        pytest.raises(StoreError, match="rate limiting"),
    ):
        remote.runs()


def test_an_empty_source_says_so(tmp_path: Path) -> None:
    """A source without spans gives the store's 'no spans' error for runs and `latest`."""
    with running(query_routes(tmp_path / "nothing")) as url, SourceStore(url) as remote:
        with pytest.raises(StoreError, match="has no spans"):
            remote.runs()
        with pytest.raises(StoreError, match="has no spans"):
            remote.resolve("latest")


def test_logfire_shaped_rows_read_as_the_store_reads_them() -> None:
    """Logfire's columns map onto the store's: `kind` gives `span_type`, open spans are left out."""
    start = datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    table = pa.table(
        {
            "trace_id": ["a" * 32, "a" * 32],
            "span_id": ["b" * 16, "c" * 16],
            "parent_span_id": [None, None],
            "start_timestamp": pa.array([start, start], pa.timestamp("us", tz="UTC")),
            "end_timestamp": pa.array([start, start], pa.timestamp("us", tz="UTC")),
            "duration": [0.0, 0.0],
            "kind": ["log", "pending_span"],
            "level": pa.array([9, 9], pa.uint16()),
            "span_name": ["hello", "still open"],
            "message": ["hello world", "still open"],
            "attributes": ['{"x": 1}', "{}"],
            "tags": [["t"], []],
            "is_exception": [False, False],
            "otel_status_code": [None, None],
            "http_route": ["/a", "/b"],
        }
    )
    con = _local_connection()
    _show_records(con, table)
    rows = con.sql(
        "SELECT span_name, span_type, kind, otel_kind, level, start_timestamp, attributes->>'x' AS x, tags, "
        "otel_links, otel_status_code FROM records"
    ).fetchall()
    con.close()
    assert rows == [
        ("hello", "log", "log", "internal", 9, start.replace(tzinfo=None), "1", ["t"], "[]", None)
    ]


@pytest.mark.parametrize(
    ("source", "token", "url"),
    [
        ("logfire", "pylf_v1_eu_abcdef", "https://logfire-eu.pydantic.dev"),
        ("logfire", "pylf_v1_us_abcdef", "https://logfire-us.pydantic.dev"),
        ("logfire", "an-old-token", "https://logfire-us.pydantic.dev"),
        ("http://127.0.0.1:4318/", None, "http://127.0.0.1:4318"),
        ("HTTPS://example.org/base", None, "HTTPS://example.org/base"),
    ],
)
def test_source_url(source: str, token: str | None, url: str) -> None:
    """`logfire` names Logfire's API in the token's region; a URL is taken as given."""
    assert source_url(source, token) == url


@pytest.mark.parametrize("source", ["ftp://example.org", "127.0.0.1:4318", "file:///etc", "http://"])
def test_source_url_refuses_what_is_not_http(source: str) -> None:
    """Anything but an http(s) URL with a host, or `logfire`, is refused."""
    with pytest.raises(StoreError, match="not an http"):
        source_url(source, None)


# --- hostile sources ---------------------------------------------------------------------------------
def _arrow(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


ARROW = "application/vnd.apache.arrow.stream"


def _answering(reply: Any) -> list[Any]:
    """Routes of a source whose `/v2/query` answers `reply(request)`, a Starlette response."""
    from starlette.routing import Route

    async def handler(request: Any) -> Any:
        return reply(request)

    return [Route("/v2/query", handler, methods=["GET", "POST"])]


def test_a_redirect_is_not_followed_and_never_carries_the_token() -> None:
    """A source that redirects elsewhere gets no second request: the read token never reaches the
    other origin, and the error names where the source pointed."""
    from starlette.responses import RedirectResponse, Response

    seen: list[str | None] = []

    def elsewhere(request: Any) -> Any:
        seen.append(request.headers.get("authorization"))
        return Response(_arrow(pa.table({"one": [1], "_mastrace_total": [1]})), media_type=ARROW)

    with running(_answering(elsewhere)) as other:
        for status in (301, 302, 303, 307, 308):
            redirect = _answering(lambda request, code=status: RedirectResponse(f"{other}/v2/query", code))
            with (
                running(redirect) as url,
                SourceStore(url, "pylf_v1_us_secret") as remote,
                pytest.raises(StoreError, match=f"redirects to {other}/v2/query") as error,
            ):
                remote.runs()
            assert "\n" not in str(error.value)
    assert seen == []


@pytest.mark.parametrize(
    ("status", "body", "media", "message"),
    [
        (500, b"<html>\n<body>\n  Internal\n  Error\n</body>\n</html>", "text/html", "answered 500"),
        (200, b"<html>\n<body>sign in</body>\n</html>", "text/html", "not an Arrow stream"),
        (400, b'{"detail": "Binder Error: no\\n\\nLINE 1: SELECT"}', "application/json", "query failed"),
    ],
)
def test_a_source_answering_garbage_is_one_line(status: int, body: bytes, media: str, message: str) -> None:
    """HTML error pages, sign-in pages and multi-line details come back as one line naming the source."""
    from starlette.responses import Response

    with (
        running(_answering(lambda request: Response(body, status, media_type=media))) as url,
        SourceStore(url) as remote,
        pytest.raises(StoreError, match=message) as error,
    ):
        remote.runs()
    assert "\n" not in str(error.value) and url in str(error.value)


def test_a_cut_arrow_stream_is_an_error_not_a_crash() -> None:
    """An Arrow stream cut short (a proxy that dropped the end) is reported as a broken answer."""
    from starlette.responses import Response

    whole = _arrow(pa.table({"one": list(range(100)), "_mastrace_total": [100] * 100}))
    with (
        running(_answering(lambda request: Response(whole[: len(whole) - 30], media_type=ARROW))) as url,
        SourceStore(url) as remote,
        pytest.raises(StoreError, match="not an Arrow stream"),
    ):
        remote.runs()


@pytest.mark.parametrize(
    "table",
    [
        pa.table({"x": [1]}),  # not the columns asked for: no row count
        pa.table({"trace_id": ["a" * 32], "note": ["no span ids, names or times"], "_mastrace_total": [1]}),
    ],
)
def test_a_source_lying_about_columns_is_an_error(table: pa.Table) -> None:
    """A source whose answer lacks the columns the query asked for is reported, not read as spans."""
    from starlette.responses import Response

    with (
        running(_answering(lambda request: Response(_arrow(table), media_type=ARROW))) as url,
        SourceStore(url) as remote,
        pytest.raises(StoreError, match="columns"),
    ):
        remote.runs()


@pytest.mark.parametrize("claimed", [10**12, 50_000_000])
def test_a_source_that_pages_forever_is_stopped(claimed: int) -> None:
    """A source claiming endless rows, or more one-row pages than any real source needs, is given up
    on after one request."""
    from starlette.responses import Response

    asked: list[int] = []

    def one_row(request: Any) -> Any:
        asked.append(1)
        return Response(_arrow(pa.table({"one": [1], "_mastrace_total": [claimed]})), media_type=ARROW)

    with (
        running(_answering(one_row)) as url,
        SourceStore(url) as remote,
        pytest.raises(StoreError, match="rows"),
    ):
        remote.runs()
    assert len(asked) == 1
