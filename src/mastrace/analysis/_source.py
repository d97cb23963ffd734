"""Analysis over any Logfire-compatible Query API: Logfire itself, or another `mastrace serve`.

`SourceStore` is a `TraceStore` whose spans come through `POST /v2/query` (as Arrow) instead of
from segment files. The few questions that span the whole source (which traces exist, which is the
latest session, which ids start with a prefix) are asked remotely in SQL that both DuckDB and
Logfire's DataFusion read. Everything else runs locally, unchanged: `resolve()` copies the spans of
the trace it names into a local `records` table with the store's own columns and types, so the
analysis, the tree, the view and the diff read them exactly as they read a local store, and give
the same results for the same spans.

Rows are fetched in pages when the source caps them (Logfire answers at most 10,000 rows a query);
another `mastrace serve` answers a whole trace at once.

A source is not trusted further than its answers: a redirect is not followed (the read token goes
to the origin it was given for, and nowhere else), an answer that is not the Arrow stream of the
columns asked for is an error, paging stops at `_ALL_ROWS` rows or `MAX_PAGES` pages, and every
error is one line.
"""

from __future__ import annotations

import contextlib
import http.client
import importlib
import importlib.util
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Sequence
from typing import Any, Final

import duckdb

from .. import semconv
from ..exceptions import StoreError
from ..store._schema import COLUMNS, ROOTS_VIEW_NAME, VIEW_NAME
from ..store.reader import StoreHealth
from ._store import RunRef, RunSummary, TraceStore

__all__ = ["QueryAPIClient", "QueryRefused", "SourceStore", "source_url"]

_EPOCH: Final = "1970-01-01T00:00:00+00:00"
_ALL_ROWS: Final = 100_000_000
LOGFIRE_MAX_ROWS: Final = 10_000
MAX_PAGES: Final = _ALL_ROWS // LOGFIRE_MAX_ROWS
"""Pages read for one question at most: every row there may be, at Logfire's page size."""
# Columns without which rows are not spans (the others have defaults, see `_DEFAULTS`).
_SPAN_COLUMNS: Final = ("trace_id", "span_id", "span_name", "start_timestamp")
_TOTAL: Final = "_mastrace_total"
_MAX_WAIT: Final = 60.0
DEFAULT_DEADLINE: Final = 300.0
"""Seconds one command may spend on the source in all (every request, every wait for a retry)."""
SOURCE_MAX_BYTES: Final = 150 * 1000**2
"""Bytes one answer may hold; a larger (or endless) answer is an error, never read into memory."""
_ERROR_BYTES: Final = 64 * 1024  # an error's body is read this far: its first line is all that is shown
_CHUNK: Final = 1 << 16
_TOKEN_REGION = re.compile(r"^pylf_v\d+_(?P<region>[a-z]+)_")
# What a column the source does not have reads as (the store's defaults, see `_schema.COLUMNS`).
_DEFAULTS: Final[dict[str, str]] = {
    "kind": "'span'",
    "level": "9",
    "message": "span_name",
    "attributes": "'{}'",
    "tags": "[]",
    "otel_links": "'[]'",
    "otel_events": "'[]'",
    "is_exception": "false",
    "otel_status_code": "'UNSET'",
    "otel_scope_attributes": "'{}'",
    "otel_kind": "'internal'",
    "otel_resource_attributes": "'{}'",
}
_SESSION_ROOT = f"span_name = '{semconv.SPAN_COORDINATION_SESSION}' AND parent_span_id IS NULL"
_RUNS_COLUMNS = (
    "trace_id, span_id, span_name, service_name, start_timestamp, end_timestamp, duration, parent_span_id, "
    "otel_status_code, is_exception, attributes"
)


class QueryRefused(StoreError):
    """The source answered a query with an error status (`status`)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def source_url(source: str, token: str | None) -> str:
    """The base URL of a `--source`: an http(s) URL as given, or `logfire` for Logfire's API in the
    read token's region.

    Raises:
        StoreError: Neither an http(s) URL nor `logfire` (with a token).
    """
    text = source.strip().rstrip("/")
    if text.lower() == "logfire":
        if not token:
            raise StoreError("--source logfire needs a read token in LOGFIRE_READ_TOKEN")
        match = _TOKEN_REGION.match(token)
        return f"https://logfire-{match.group('region') if match else 'us'}.pydantic.dev"
    if not re.match(r"^https?://[^/\s]+", text, re.IGNORECASE):
        raise StoreError(f"--source {source!r} is not an http(s) URL or 'logfire'")
    return text


class QueryAPIClient:
    """A small client of `POST /v2/query` that reads Arrow answers (standard library HTTP, `pyarrow`).

    Args:
        url: The API's base URL.
        token: The read token (sent in `Authorization` as Logfire's client sends it), or None.
        timeout: Seconds to wait for an answer.
        retries: How many times a rate-limited query (429) is tried again, after the wait the
            source asks for (at most a minute).
        page_rows: Rows asked for a page when the source refuses to answer everything at once
            (Logfire answers at most 10,000 rows a query).
        deadline: Seconds the client may spend on the source in all, from its creation: every
            request, every byte read and every wait a 429 asks for (None: no deadline).
        max_bytes: Bytes one answer may hold (a declared `Content-Length` over it is refused before
            reading); an error's body is read only as far as its first 64 KiB.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 300.0,
        retries: int = 3,
        page_rows: int = LOGFIRE_MAX_ROWS,
        deadline: float | None = DEFAULT_DEADLINE,
        max_bytes: int = SOURCE_MAX_BYTES,
    ) -> None:
        if importlib.util.find_spec("pyarrow") is None:
            raise StoreError("--source needs the query extra: pip install 'mastrace[query]'")
        # pyarrow takes a quarter of a second to import: let that overlap the first request.
        threading.Thread(target=importlib.import_module, args=("pyarrow.ipc",), daemon=True).start()
        self.url, self.token, self.timeout, self.retries = url, token, timeout, retries
        self.page_rows = page_rows
        self.deadline = deadline
        self.max_bytes = max_bytes
        self._ends = None if deadline is None else time.monotonic() + deadline
        # What a mastrace serve's store left out or showed once, as its answers say (the most said;
        # None until one said it: answers that do not read `records` do not).
        self.health: StoreHealth | None = None

    def close(self) -> None:
        """Nothing to release: each query is one HTTP request."""

    def arrow(self, sql: str, limit: int) -> Any:
        """The answer to `sql` (at most `limit` rows) as a `pyarrow.Table`.

        Raises:
            QueryRefused: The source answered with an error status (after retrying 429s).
            StoreError: The source cannot be reached or sent something that is not an Arrow stream.
        """
        import pyarrow
        import pyarrow.ipc

        body = {"sql": sql, "min_timestamp": _EPOCH, "limit": limit, "include_schema": True, "explain": False}
        for attempt in range(self.retries + 1):
            status, headers, content = self._post(json.dumps(body).encode())
            if status != 429 or attempt == self.retries:
                break
            wait = _retry_after(headers.get("retry-after"))
            if wait >= self._left():
                raise QueryRefused(
                    f"the source at {self.url} is rate limiting queries and asks to wait {wait:g} s, "
                    f"past the deadline of {self.deadline:g} s (--source-timeout)",
                    429,
                )
            time.sleep(wait)
        if status != 200:
            raise QueryRefused(self._message(status, content, headers), status)
        if headers.get("x-mastrace-skipped-rows") is not None:
            said = StoreHealth(
                _count(headers.get("x-mastrace-skipped-rows")),
                _count(headers.get("x-mastrace-duplicate-spans")),
            )
            self.health = said if self.health is None else StoreHealth(*map(max, self.health, said))
        try:
            with pyarrow.ipc.open_stream(pyarrow.py_buffer(content)) as reader:
                return reader.read_all()
        except (pyarrow.ArrowException, OSError, ValueError) as exc:  # a cut stream is an OSError
            raise StoreError(
                f"the source at {self.url} sent an answer that is not an Arrow stream (or cut it short)"
            ) from exc

    def _left(self) -> float:
        """Seconds left before the deadline (infinite without one)."""
        return float("inf") if self._ends is None else self._ends - time.monotonic()

    def _late(self) -> StoreError:
        return StoreError(
            f"the source at {self.url} did not answer within the deadline of {self.deadline:g} s "
            "(--source-timeout)"
        )

    def _post(self, body: bytes) -> tuple[int, Any, bytes | bytearray]:
        """One request: status, headers and body, read within the deadline and the byte cap.

        The socket's wait is set to what is left of the deadline before every read, so a source
        that never answers, or drips one byte at a time, ends at the deadline; a body over
        `max_bytes` (declared or sent) is refused without being held.
        """
        headers = {
            "content-type": "application/json",
            "accept": "application/vnd.apache.arrow.stream, application/problem+json;q=0.9",
            "user-agent": "mastrace",
        }
        if self.token:
            headers["authorization"] = self.token
        parts = urllib.parse.urlsplit(self.url)
        secure = parts.scheme.lower() == "https"
        connection_type = http.client.HTTPSConnection if secure else http.client.HTTPConnection
        left = self._left()
        if left <= 0:
            raise self._late()
        connection = connection_type(
            parts.hostname or "", parts.port, timeout=min(self.timeout, left)
        )  # a redirect is an answer, never followed: the read token goes nowhere else
        try:
            connection.request("POST", (parts.path or "") + "/v2/query", body=body, headers=headers)
            response = connection.getresponse()
            status = int(response.status)
            limit = self.max_bytes if status == 200 else _ERROR_BYTES
            declared = response.getheader("content-length") or ""
            if status == 200 and declared.strip().isdigit() and int(declared) > limit:
                raise StoreError(
                    f"the source at {self.url} announced an answer of {int(declared):,} bytes, over the "
                    f"limit of {limit:,} (--source-max-bytes)"
                )
            content = bytearray()
            while True:
                left = self._left()
                if left <= 0:
                    raise self._late()
                if connection.sock is not None:
                    connection.sock.settimeout(min(self.timeout, left))
                chunk = response.read1(_CHUNK)
                if not chunk:
                    break
                content += chunk
                if len(content) > limit:
                    if status != 200:
                        del content[limit:]
                        break  # an error's first bytes say what it is
                    raise StoreError(
                        f"the source at {self.url} sent an answer over the limit of {limit:,} bytes "
                        "(--source-max-bytes)"
                    )
            return status, response.headers, content
        except TimeoutError as exc:
            raise self._late() from exc
        except (OSError, http.client.HTTPException, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise StoreError(f"cannot reach the source at {self.url}: {_one_line(str(reason))}") from exc
        finally:
            connection.close()

    def _message(self, status: int, content: bytes | bytearray, headers: Any) -> str:
        if 300 <= status < 400:
            target = _one_line(str(headers.get("location") or "elsewhere"))
            return (
                f"the source at {self.url} redirects to {target}: give that URL as --source if you trust it"
            )
        if status in (400, 422):
            return f"query failed at {self.url}: {_detail(content)}"
        if status in (401, 403):
            return (
                f"the source at {self.url} refused the read token "
                "(set LOGFIRE_READ_TOKEN or MASTRACE_SERVE_TOKEN)"
            )
        if status == 404:
            return f"no Query API at {self.url} (a mastrace serve or Logfire base URL is expected)"
        if status == 429:
            return f"the source at {self.url} is rate limiting queries; try again in a minute"
        return f"the source at {self.url} answered {status}: {_detail(content)}"

    def table(self, select: str, order: str) -> Any:
        """Every row of `select` (SQL without ORDER BY or LIMIT) as one `pyarrow.Table`, or None.

        The first request asks for every row and counts them (`count(*) OVER ()`); a source that
        caps rows (Logfire: 10,000 a query, refusing a larger `limit`) is then read in pages of what
        it answers, in `order`, so that the pages fit together.
        """
        import pyarrow

        size = _ALL_ROWS
        counted = f"SELECT *, count(*) OVER () AS {_TOTAL} FROM ({select}) AS q"
        try:
            first = self._counted(counted, size)
        except QueryRefused as exc:
            if exc.status != 422:
                raise
            size, first = self.page_rows, None  # a source that caps `limit` refuses a larger one
        total = self._total(first) if first is not None and first.num_rows else None
        if first is not None and first.num_rows == (total or 0):
            return first.drop_columns([_TOTAL]) if first.num_rows else None
        size = min(size, first.num_rows) if first is not None and first.num_rows else size
        pages, fetched = [], 0
        while total is None or fetched < total:
            if total is not None and -(-total // size) > MAX_PAGES:
                raise StoreError(
                    f"the source at {self.url} claims {total:,} rows at {size:,} a query: "
                    f"more than {MAX_PAGES:,} queries, not read"
                )
            page = self._counted(f"{counted} ORDER BY {order} LIMIT {size} OFFSET {fetched}", size)
            total = self._total(page) if page.num_rows else 0 if total is None else total
            if not page.num_rows:
                break
            pages.append(page.drop_columns([_TOTAL]))
            fetched += page.num_rows
        if fetched != total:
            raise StoreError(f"the source at {self.url} answered {fetched} of {total} rows")
        return pyarrow.concat_tables(pages) if pages else None

    def _counted(self, sql: str, limit: int) -> Any:
        """The answer to a counted query, which must hold the count column it asked for."""
        answer = self.arrow(sql, limit)
        if _TOTAL not in answer.column_names:
            raise StoreError(f"the source at {self.url} answered columns that do not match the query")
        return answer

    def _total(self, table: Any) -> int:
        total = table.column(_TOTAL)[0].as_py()
        if not isinstance(total, int) or total < table.num_rows or total > _ALL_ROWS:
            raise StoreError(f"the source at {self.url} answered an impossible count of rows ({total!r})")
        return total


def _one_line(text: str, limit: int = 500) -> str:
    """A source's text as one line of at most `limit` characters (it may be a whole HTML page)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit] + "…"


def _count(value: str | None) -> int:
    """A count a source said in a header; 0 when it said none or nonsense."""
    return int(value) if value and value.isdigit() and len(value) < 19 else 0


def _retry_after(value: str | None) -> float:
    try:
        return min(_MAX_WAIT, max(0.0, float(value or 1)))
    except ValueError:
        return 1.0


def _detail(content: bytes | bytearray) -> str:
    try:
        body = json.loads(content)
    except (ValueError, RecursionError):
        return _one_line(content.decode("utf-8", "replace"))
    if isinstance(body, dict):
        legacy = body.get("error_details", body)
        detail = legacy.get("detail", body) if isinstance(legacy, dict) else legacy
        return _one_line(detail if isinstance(detail, str) else str(detail))
    return _one_line(str(body))


class SourceStore(TraceStore):
    """A `TraceStore` over a Logfire-compatible Query API.

    Args:
        url: `http(s)://…` of Logfire's API or of another `mastrace serve`.
        token: The read token (Logfire's, or the serve token), or None for a serve on loopback.
        retries: How often a rate-limited query is tried again.
        page_rows: Rows a page asks for from a source that answers no more at once.
        deadline: Seconds everything asked of the source may take in all (None: no deadline).
        max_bytes: Bytes one answer of the source may hold.

    Example:
        ```python
        with SourceStore("http://127.0.0.1:4318") as store:
            report = build_report(store, store.resolve("latest"))
        ```
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        retries: int = 3,
        page_rows: int = LOGFIRE_MAX_ROWS,
        deadline: float | None = DEFAULT_DEADLINE,
        max_bytes: int = SOURCE_MAX_BYTES,
    ) -> None:
        self.client = QueryAPIClient(
            url, token, retries=retries, page_rows=page_rows, deadline=deadline, max_bytes=max_bytes
        )
        self.paths = []
        self._generation: tuple[str, ...] = ()  # no local files: never compacted under the reader
        self.url = url
        self._loaded: set[str] = set()
        self._roots = True  # whether the source has mastrace's `roots` table
        self._fetched: list[Any] = []  # the Arrow tables read so far, which `records` reads in place
        self.con = _local_connection()
        _show_records(self.con, None)
        # What the local store's reader counts is the source's own to keep: nothing malformed or
        # stored twice reaches its answers, and it applies its own limits.
        self.limits = None
        self.truncated = False
        self._health = StoreHealth(0, 0)  # the local scan for malformed lines and copies never runs
        self._copies = 0  # extra copies of spans the source answered (shown once, as a store does)

    @property
    def where(self) -> str:
        return self.url

    def __enter__(self) -> SourceStore:
        return self

    def close(self) -> None:
        self.con.close()
        self.client.close()

    def health(self) -> StoreHealth:
        """What the source's store left out as malformed or showed once, as far as its answers said
        (a mastrace serve says it; Logfire does not). Asks once when no answer has said it yet, as
        a local store scans for it once."""
        if self.client.health is None:
            # What could not be asked is not reported; the command's answer stands.
            with contextlib.suppress(StoreError):
                self.client.arrow("SELECT 1 AS one FROM records WHERE false", 1)
        said = self.client.health or StoreHealth(0, 0)
        return StoreHealth(said.skipped, max(said.duplicates, self._copies))

    def ensure_not_empty(self) -> None:
        if self.client.table("SELECT 1 AS one FROM records LIMIT 1", "one") is None:
            raise StoreError(f"the source at {self.url} has no spans")

    def index(self) -> list[RunRef]:
        found = self._remote(
            "SELECT trace_id, min(start_timestamp) AS started, "
            f"max(CASE WHEN {_SESSION_ROOT} THEN 1 ELSE 0 END) AS is_session FROM records GROUP BY trace_id",
            "trace_id",
            "SELECT trace_id, epoch_us(started) AS start_us, is_session = 1 AS is_session FROM fetched",
        )
        refs = [RunRef(str(r["trace_id"]), int(r["start_us"]), bool(r["is_session"])) for r in found]
        refs.sort(key=lambda r: r.start_us, reverse=True)
        return refs

    def _latest_sessions(self, limit: int) -> list[str]:
        # Another mastrace serve answers from `roots` (root spans only, a small read); a source
        # without that table (Logfire) refuses it once, and `records` is asked from then on.
        for table in ("roots", "records") if self._roots else ("records",):
            try:
                found = self._remote(
                    f"SELECT trace_id, min(start_timestamp) AS started FROM {table} "
                    "WHERE parent_span_id IS NULL GROUP BY trace_id "
                    f"ORDER BY started DESC LIMIT {int(limit)}",
                    "started DESC",
                    "SELECT trace_id FROM fetched ORDER BY epoch_us(started) DESC",
                )
            except QueryRefused as exc:
                if table != "roots" or exc.status in (401, 403, 429):
                    raise
                self._roots = False
                continue
            return [str(r["trace_id"]) for r in found]
        return []

    def _matching(self, prefix: str) -> list[str]:
        if not re.fullmatch(r"[0-9a-f]+", prefix):  # `resolve` checks; the SQL below relies on it
            raise StoreError(f"{prefix!r} is not a trace id prefix")
        found = self._remote(
            f"SELECT DISTINCT trace_id FROM records WHERE trace_id LIKE '{prefix}%' LIMIT 3", "trace_id", None
        )
        return [str(r["trace_id"]) for r in found]

    def resolve(self, ref: str | None) -> str:
        """Turn `ref` into a trace id, as `TraceStore.resolve` does, and copy that trace's spans here."""
        trace_id = super().resolve(ref)
        self.load([trace_id])
        return trace_id

    def load(self, trace_ids: Sequence[str]) -> None:
        """Copy every span of these traces (full trace ids) from the source into the local `records`."""
        wanted = [t for t in dict.fromkeys(trace_ids) if t not in self._loaded]
        if not wanted:
            return
        if not all(re.fullmatch(r"[0-9a-f]{32}", t) for t in wanted):
            raise StoreError(f"not a trace id: {wanted}")
        ids = ", ".join(f"'{t}'" for t in wanted)
        table = self.client.table(
            f"SELECT * FROM records WHERE trace_id IN ({ids})", "trace_id, start_timestamp, span_id"
        )
        if table is not None:
            import pyarrow

            self._fetched.append(table)
            self._copies = max(self._copies, _show_records(self.con, pyarrow.concat_tables(self._fetched)))
        self._loaded.update(wanted)

    def runs(self, limit: int | None = None) -> list[RunSummary]:
        """One summary per trace of the source, newest first (reads every span's summary columns)."""
        table = self.client.table(
            f"SELECT {_RUNS_COLUMNS} FROM records", "trace_id, start_timestamp, span_id"
        )
        local, self.con = self.con, _local_connection()
        try:
            self._copies = max(self._copies, _show_records(self.con, table))
            return super().runs(limit)
        finally:
            self.con.close()
            self.con = local

    def remote_table(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run `sql` at the source and return its column names and rows, typed as `table()` types them."""
        answer = self.client.arrow(sql, _ALL_ROWS)
        con = _local_connection()
        try:
            con.register("answer", answer)
            names = list(answer.column_names)
            select = ", ".join(
                f"CAST(#{i} AS TIMESTAMP)" if str(t) == "TIMESTAMP WITH TIME ZONE" else f"#{i}"
                for i, t in enumerate(con.sql("SELECT * FROM answer").types, start=1)
            )
            return names, con.sql(f"SELECT {select} FROM answer").fetchall() if names else []
        finally:
            con.close()

    def _remote(self, select: str, order: str, local: str | None) -> list[dict[str, Any]]:
        """Rows of `select` asked at the source, read through the local SQL `local` over `fetched`."""
        table = self.client.table(select, order)
        if table is None:
            return []
        con = _local_connection()
        try:
            con.register("fetched", table)
            relation = con.sql(local or "SELECT * FROM fetched")
            return [dict(zip(relation.columns, row, strict=True)) for row in relation.fetchall()]
        finally:
            con.close()


def _local_connection() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    return con


_FETCHED: Final = "_mastrace_fetched"


def _show_records(con: duckdb.DuckDBPyConnection, table: Any) -> int:
    """Make `records` (and `roots`) read the Arrow `table` of `records` rows in place (None: no rows),
    with the store's columns and types whatever columns the source had, each span once (as a local
    store shows it: the copy that ended last); returns how many extra copies were left out."""
    copies = 0
    if table is None:
        select = ", ".join(f"CAST(NULL AS {t}) AS {name}" for name, (t, _) in COLUMNS.items())
        con.execute(f"CREATE OR REPLACE VIEW {VIEW_NAME} AS SELECT {select} WHERE false")
    else:
        missing = [name for name in _SPAN_COLUMNS if name not in table.column_names]
        if missing:
            raise StoreError(f"the source answered spans without the columns {', '.join(missing)}")
        con.register(_FETCHED, table)
        types = dict(zip(table.column_names, (str(t) for t in table.schema.types), strict=True))
        values = [f"{_column(name, sql_type, types)} AS {name}" for name, (sql_type, _) in COLUMNS.items()]
        keep = "kind IS DISTINCT FROM 'pending_span'" if "kind" in types else "true"  # Logfire's open spans
        row = con.execute(
            f'SELECT count(*) - count(DISTINCT ("trace_id", "span_id")) FROM {_FETCHED} WHERE {keep}'
        ).fetchone()
        copies = int(row[0]) if row else 0
        # Only when the source sent copies: the rows otherwise keep the order they came in.
        once = (
            "QUALIFY row_number() OVER (PARTITION BY trace_id, span_id "
            "ORDER BY end_timestamp DESC NULLS LAST) = 1"
            if copies
            else ""
        )
        con.execute(
            f"CREATE OR REPLACE VIEW {VIEW_NAME} AS SELECT * FROM (SELECT {', '.join(values)} "
            f"FROM {_FETCHED} WHERE {keep}) {once}"
        )
    con.execute(
        f"CREATE OR REPLACE VIEW {ROOTS_VIEW_NAME} AS SELECT * FROM {VIEW_NAME} WHERE parent_span_id IS NULL"
    )
    return copies


def _column(name: str, sql_type: str, present: dict[str, str]) -> str:
    """A `records` column over the fetched columns (named in `present`, with their Arrow types)."""
    if name in present:
        if sql_type == "JSON" and present[name] in ("string", "large_string"):
            return f'"{name}"'  # JSON text: reading it as VARCHAR spares parsing it on every scan
        return f'CAST("{name}" AS {sql_type})'
    if name == "span_type" and "kind" in present:
        return "CAST(kind AS VARCHAR)"
    return f"CAST({_DEFAULTS.get(name, 'NULL')} AS {sql_type})"
