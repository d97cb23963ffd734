"""Logfire's Query API in `mastrace serve`: what `logfire.query_client` and `logfire.db_api` call.

- `POST /v2/query` with Logfire's JSON body (`sql`, `min_timestamp`, `max_timestamp`, `limit`,
  `deployment_environment`, `include_schema`, `timezone`), answering JSON rows, CSV or an Arrow stream
  as the `Accept` header asks (see `_wire`).
- `GET /v1/read-token-info` (and `/api/read-token-info`, which Logfire's MCP server reads): the
  organisation is `mastrace`, the project is the store folder.

The SQL runs as `mastrace query` runs it: one read-only statement on a sandboxed store
(`TraceStore(..., sandbox=True)`), `records` narrowed to the time window, in a child process whose
memory and time the kernel bounds (`_query_process`; on Linux). Errors come back as
Logfire's client expects them: 400 (the query failed, or ran past the time limit) and 422 (the
request is malformed) with the message in `detail`, 401 for a token that is not accepted (without a
serve token: a client that is not on loopback, or a request that names a host other than a
loopback one, as a web page whose name was rebound to 127.0.0.1 does), 406 for a format that cannot
be produced, 413 for an oversized body, 429 with `Retry-After` when every query slot is busy. When the client
accepts `application/problem+json` (the logfire client does), the body is an RFC 9457 problem
detail carrying the same legacy body in `error_details`.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ._query_problem import QueryProblem

if TYPE_CHECKING:
    from starlette.responses import Response

    from ..analysis._select import Window

__all__ = [
    "DEFAULT_LIMIT",
    "QUERY_SECONDS",
    "QueryRequest",
    "health_headers",
    "host_is_loopback",
    "parse_query_request",
    "query_routes",
    "token_accepted",
]

DEFAULT_LIMIT: Final = 500
"""Rows answered when the request gives no `limit`, as Logfire does (Logfire also caps `limit` at
10,000; serve takes any)."""
MAX_REQUEST_BYTES: Final = 1 << 20
MAX_QUERIES: Final = 4
"""Queries answered at once; one more gets 429 with `Retry-After`."""
QUERY_SECONDS: Final = 300.0
"""A query still running (or answering) after this long is stopped: a statement that runs for ages
would hold a query slot long after its client gave up."""
_MAX_LIMIT: Final = (1 << 63) - 1  # DuckDB's LIMIT is a 64-bit integer: a larger one is no limit
PROBLEM_MEDIA: Final = "application/problem+json"
JSON_MEDIA: Final = "application/json"
CSV_MEDIA: Final = "text/csv"
ARROW_MEDIA: Final = "application/vnd.apache.arrow.stream"
_MEDIA: Final = (JSON_MEDIA, CSV_MEDIA, ARROW_MEDIA)
_UTC_NAMES: Final = frozenset({"utc", "etc/utc", "z", "+00:00", "gmt", "etc/gmt", "zulu"})


def token_accepted(presented: str | None, configured: str | None, client_host: str | None) -> bool:
    """Whether a request may read through the Query API.

    Args:
        presented: The `Authorization` header: the token alone (as Logfire's client sends its read
            token) or `Bearer <token>`.
        configured: The serve token; None accepts any token (or none) from a loopback client only.
        client_host: The client's address.
    """
    if configured is None:
        return _is_loopback(client_host)
    token = (presented or "").strip()
    if token[:7].lower() == "bearer ":
        token = token[7:].strip()
    return hmac.compare_digest(token.encode(), configured.encode())


def host_is_loopback(host_header: str | None) -> bool:
    """Whether a request's `Host` names this machine by a loopback name or address.

    A web page whose own name was made to resolve to 127.0.0.1 (DNS rebinding) reaches serve from
    a loopback client, but its requests name the page's host: without a serve token, only requests
    that name `localhost`, a `*.localhost` name or a loopback address read. No `Host` (HTTP/1.0)
    names nothing and passes.
    """
    if host_header is None:
        return True
    host = host_header.strip().lower()
    if host.startswith("["):  # [v6]:port
        host = host[1:].split("]", 1)[0]
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    host = host.rstrip(".")
    return host == "localhost" or host.endswith(".localhost") or _is_loopback_address(host)


def _is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    return host == "localhost" or _is_loopback_address(host)


def _is_loopback_address(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def _invalid(field: str, message: str) -> QueryProblem:
    # The shape of a validation error from Logfire's (FastAPI) server.
    return QueryProblem(422, [{"loc": ["body", field], "msg": message, "type": "value_error"}])


@dataclass(frozen=True)
class QueryRequest:
    """A parsed `POST /v2/query`: the statement, the window of `records`, the row limit, the format."""

    sql: str
    window: Window
    limit: int
    media: str
    include_schema: bool = True


def _moment(body: dict[str, Any], field: str) -> datetime | None:
    value = body.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _invalid(field, "must be an ISO 8601 date and time")
    text = value.strip()
    try:  # Python 3.10 reads no trailing Z
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in "zZ" else text)
    except (ValueError, IndexError):
        raise _invalid(field, f"{value!r} is not an ISO 8601 date and time") from None
    try:  # the store keeps UTC: a time at the edge of the calendar may not have a UTC one
        return moment if moment.tzinfo is None else moment.astimezone(timezone.utc)
    except OverflowError:
        raise _invalid(field, f"{value!r} is out of range in UTC") from None


_WILDCARDS: Final = {"*/*": JSON_MEDIA, "application/*": JSON_MEDIA, "text/*": CSV_MEDIA}


def _quality(params: list[str]) -> float:
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value.strip())
            except ValueError:
                return 0.0
    return 1.0


def _media(accept: str) -> str:
    """The answer's media type from an `Accept` header: the most preferred one (by `q`, then by
    order) that serve produces; `q=0` means "not this one"."""
    if not accept.strip():
        return JSON_MEDIA
    offers = []
    for position, part in enumerate(accept.split(",")):
        media, *params = part.split(";")
        media = media.strip().lower()
        produced = media if media in _MEDIA else _WILDCARDS.get(media)
        quality = _quality(params)
        if produced is not None and quality > 0:
            offers.append((-quality, position, produced))
    if offers:
        return min(offers)[2]
    raise QueryProblem(406, f"cannot answer {accept!r}: ask for {', '.join(_MEDIA)}")


def _text(value: str) -> bool:
    """Whether `value` is text that can be sent on (JSON lets lone surrogates through)."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def parse_query_request(raw: bytes, accept: str, max_rows: int | None = None) -> QueryRequest:
    """Read a `POST /v2/query` body as Logfire's client sends it.

    Args:
        raw: The request body.
        accept: The `Accept` header.
        max_rows: Refuse a `limit` above this (None: any).

    Raises:
        QueryProblem: 422 for a malformed body or field, 406 for an `Accept` serve cannot answer.
    """
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _invalid("body", f"not JSON: {exc}") from None
    except RecursionError:
        raise _invalid("body", "not JSON: nested too deeply") from None
    if not isinstance(body, dict):
        raise _invalid("body", "must be a JSON object")
    sql = body.get("sql")
    if not isinstance(sql, str) or not sql.strip():
        raise _invalid("sql", "a SQL statement is required")
    if not _text(sql):
        raise _invalid("sql", "must be Unicode text (it holds a lone surrogate)")
    limit = body.get("limit")
    if limit is None:
        limit = DEFAULT_LIMIT
    elif isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise _invalid("limit", "must be a non-negative integer")
    if max_rows is not None and limit > max_rows:
        raise _invalid("limit", f"must be at most {max_rows}")
    limit = min(limit, _MAX_LIMIT)
    environments = body.get("deployment_environment")
    if environments is not None and (
        not isinstance(environments, list) or not all(isinstance(e, str) and _text(e) for e in environments)
    ):
        raise _invalid("deployment_environment", "must be a list of strings")
    zone = body.get("timezone")
    if zone is not None and (not isinstance(zone, str) or zone.strip().lower() not in _UTC_NAMES):
        raise _invalid("timezone", "only UTC is supported: the store keeps UTC times")
    if body.get("explain"):
        raise _invalid("explain", "query plans are not available")
    from ..analysis._select import Window

    window = Window(_moment(body, "min_timestamp"), _moment(body, "max_timestamp"), environments)
    return QueryRequest(sql, window, limit, _media(accept), body.get("include_schema") is not False)


def _problem_response(problem: QueryProblem, accept: str) -> Response:
    from starlette.responses import JSONResponse

    headers = {} if problem.retry_after is None else {"Retry-After": str(problem.retry_after)}
    legacy = {"detail": problem.detail}
    if PROBLEM_MEDIA not in accept.lower():
        return JSONResponse(legacy, problem.status, headers=headers)
    detail = problem.detail if isinstance(problem.detail, str) else "the request is not valid"
    body = {
        "type": "about:blank",
        "title": _TITLES.get(problem.status, "Error"),
        "status": problem.status,
        "detail": detail,
        "error_details": legacy,
        "retryable": problem.status == 429,
    }
    if problem.retry_after is not None:
        body["retry_after"] = problem.retry_after
    return JSONResponse(body, problem.status, headers=headers, media_type=PROBLEM_MEDIA)


_TITLES: Final = {
    400: "Query failed",
    401: "Unauthorized",
    406: "Not Acceptable",
    413: "Request too large",
    415: "Unsupported Media Type",
    422: "Invalid request",
    429: "Too many queries",
}


class _Slots:
    """How many queries run at once; touched on the event loop only."""

    def __init__(self, size: int) -> None:
        self.free = size

    def take(self) -> bool:
        if self.free <= 0:
            return False
        self.free -= 1
        return True

    def give(self) -> None:
        self.free += 1


async def _read_body(request: Any, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise QueryProblem(413, f"request body of {declared} bytes is over the limit of {limit}")
    parts, size = [], 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise QueryProblem(413, f"request body is over the limit of {limit} bytes")
        parts.append(part)
    return b"".join(parts)


def without_paths(text: str, store: Path) -> str:
    """`text` with the store's absolute path and the user's home shown as `<store>` and `~`: a
    client learns nothing of the server's folders from an error."""
    import os

    for folder, shown in ((store.resolve(), "<store>"), (store, "<store>"), (Path.home(), "~")):
        name = str(folder)
        if len(name) > 1:
            text = text.replace(name.rstrip(os.sep), shown)
    return text


def health_headers(skipped: int, duplicates: int) -> dict[str, str]:
    """What a store's views left out or showed once, said on every answer read from it."""
    return {"X-Mastrace-Skipped-Rows": str(skipped), "X-Mastrace-Duplicate-Spans": str(duplicates)}


def _start(
    store: Path, request: QueryRequest, seconds: float | None = None, source: str | None = None
) -> tuple[Iterator[bytes], bytes, Callable[[], None], dict[str, str]]:
    """Run the statement (in a worker thread): the answer's chunks, its first chunk, a closer, and
    the headers counting what `records` left out or showed once (none when it was not read).
    The statement is stopped `seconds` after it started, whether it is still running or answering.

    Raises:
        QueryProblem: 400 when the statement fails or runs past the time limit, 406 when Arrow is
            asked for without `pyarrow`.
    """
    import duckdb

    from ..analysis import TraceStore
    from ..analysis._select import TimeLimit, bounded_relation, check_no_paths
    from ..analysis._wire import arrow_body, csv_body, json_body
    from ..exceptions import StoreError
    from ..store._limits import DEFAULT_QUERY_LIMITS

    # `mastrace query`'s memory limit; the time limit (`seconds`) covers the whole answer, also while it
    # streams; the row count is the request's `limit`.
    limits = replace(DEFAULT_QUERY_LIMITS, timeout=None, max_rows=None)
    if source is not None:
        from ..analysis import open_clickhouse

        try:
            traces: TraceStore = open_clickhouse(source, sandbox=True, limits=limits)
        except StoreError as exc:
            raise QueryProblem(400, str(exc)) from None
    else:
        traces = TraceStore(store, sandbox=True, limits=limits)
    limit = TimeLimit(traces, seconds)

    def close() -> None:
        limit.cancel()
        traces.close()

    try:
        check_no_paths(request.sql)
        relation = bounded_relation(traces, request.sql, request.window, request.limit)
        if request.media == JSON_MEDIA:
            chunks = json_body(relation, include_schema=request.include_schema)
        else:
            chunks = csv_body(relation) if request.media == CSV_MEDIA else arrow_body(relation)
        first = next(chunks)
        health = traces.health_found()
    except StoreError as exc:
        close()
        raise QueryProblem(400, without_paths(str(exc).removeprefix("query failed: "), store)) from None
    except duckdb.Error as exc:
        close()
        raise QueryProblem(
            400, limit.message if limit.stopped(exc) else without_paths(str(exc), store)
        ) from None
    except ImportError:
        close()
        raise QueryProblem(406, "Arrow answers need pyarrow: pip install 'mastrace[query]'") from None
    except BaseException:
        close()
        raise
    return chunks, first, close, {} if health is None else health_headers(*health)


def query_routes(
    store: Path,
    *,
    token: str | None = None,
    max_queries: int = MAX_QUERIES,
    max_rows: int | None = None,
    max_seconds: float | None = QUERY_SECONDS,
    source: str | None = None,
    isolate: bool | None = None,
) -> list[Any]:
    """The Query API's Starlette routes over the store at `store` (or ClickHouse at `source`).

    Args:
        store: The store folder.
        token: The serve token the client must send as its read token; None accepts any token from
            a loopback client (and refuses every other client).
        max_queries: Queries answered at once; more get 429.
        max_rows: Refuse a `limit` above this with 422, as Logfire refuses one above 10,000
            (None: any limit).
        max_seconds: Stop a query (and its answer) that runs longer than this (None: never).
        source: A `clickhouse://` or `chdb://` URL to answer from instead of the store: the
            newest spans of its `otel_traces` (see `mastrace.analysis._clickhouse`).
        isolate: Run each statement in a child process under a memory limit the kernel enforces
            and a time limit it cannot outlive (`_query_process`); None: where the system allows
            (Linux), False: in a thread of this process, under DuckDB's memory limit only.
    """
    import anyio.to_thread
    from starlette.requests import Request
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    from ..store._limits import DEFAULT_QUERY_LIMITS
    from ._query_process import isolation_available, start_in_child

    slots = _Slots(max_queries)
    memory = DEFAULT_QUERY_LIMITS.memory
    if isolate is None:
        isolate = isolation_available()

    def start(parsed: QueryRequest) -> tuple[Iterator[bytes], bytes, Callable[[], None], dict[str, str]]:
        if isolate and memory is not None:
            return start_in_child(_start, store, parsed, max_seconds, source, memory)
        return _start(store, parsed, max_seconds, source)

    def allowed(request: Request) -> bool:
        host = request.client.host if request.client else None
        if token is None and not host_is_loopback(request.headers.get("host")):
            return False
        return token_accepted(request.headers.get("authorization"), token, host)

    async def stream(
        first: bytes, chunks: Iterator[bytes], close: Callable[[], None]
    ) -> AsyncIterator[bytes]:
        try:
            yield first
            while (chunk := await anyio.to_thread.run_sync(next, chunks, None)) is not None:
                yield chunk
        finally:
            close()
            slots.give()

    async def v2_query(request: Request) -> Response:
        accept = request.headers.get("accept", "")
        try:
            if not allowed(request):
                raise QueryProblem(401, "the read token is not accepted")
            kind = (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
            if kind != JSON_MEDIA and not kind.endswith("+json"):
                # a web form or text/plain body (which a page may send anywhere without asking) is refused
                raise QueryProblem(415, f"the body must be {JSON_MEDIA}, not {kind or 'untyped'}")
            parsed = parse_query_request(await _read_body(request, MAX_REQUEST_BYTES), accept, max_rows)
            if not slots.take():
                raise QueryProblem(429, "every query slot is busy: retry in a second", retry_after=1)
            try:
                chunks, first, close, counted = await anyio.to_thread.run_sync(start, parsed)
            except BaseException:
                slots.give()
                raise
        except QueryProblem as problem:
            return _problem_response(problem, accept)
        return StreamingResponse(stream(first, chunks, close), media_type=parsed.media, headers=counted)

    async def token_info(request: Request) -> Response:
        if not allowed(request):
            return _problem_response(QueryProblem(401, "the read token is not accepted"), "")
        # The folder's name, never its absolute path (which tells a client the user's home and layout).
        return JSONResponse({"organization_name": "mastrace", "project_name": store.name or "store"})

    return [
        Route("/v2/query", v2_query, methods=["POST"]),
        Route("/v1/read-token-info", token_info),
        Route("/api/read-token-info", token_info),
    ]
