"""The web UI of `mastrace serve`: pages from package data, JSON read from the store.

- `/`: the runs list (live, filters, search by span content).
- `/runs/<trace>`: a run's waterfall (live: spans appear as they end; virtualised rows; a span's
  details on click; `#span=<span id>` selects a span), with filters by text, agent, round,
  errors and attribute value.
- `/runs/<trace>/view`: the static HTML view (`mastrace view`); `/runs/<trace>/report`: the report
  (HTML).
- `/diff?a=<trace>&b=<trace>`: the configuration and usage differences of two runs (`mastrace diff`).
- `/experiments?experiment=&by=&baseline=&score=`: an experiment's configurations side by side
  (`mastrace compare`): each score's mean with its 95% interval drawn, the differences against a
  baseline, and a task × repetition matrix coloured by score whose cells open their runs (live).
- `/api/runs`, `/api/runs/<trace>/spans?since_us=&q=`, `/api/runs/<trace>/spans/<span>`,
  `/api/runs/<trace>/graph` (the coordination graph), `/api/diff`, `/api/experiments` (what
`mastrace experiments --format json` prints), `/api/compare?experiment=&by=&baseline=&seed=` (what
`mastrace compare --format json` prints).

Every value from a span reaches the page as JSON and is inserted as text, never as HTML. Reads run
on threads of their own with one DuckDB thread each; an answer carries an ETag (the store's files and
what was asked), so a page polling a store that has not changed gets 304 and costs nothing, and the
counts of malformed rows and of spans stored twice (`X-Mastrace-Skipped-Rows`,
`X-Mastrace-Duplicate-Spans`).
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections.abc import Mapping
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

from ._guard import page_policy
from ._query_api import health_headers

__all__ = ["ui_routes"]

_RUNS_SEARCH_SQL = """
SELECT DISTINCT trace_id FROM records
WHERE (CAST(? AS VARCHAR) IS NULL
       OR span_name ILIKE ? OR message ILIKE ? OR CAST(attributes AS VARCHAR) ILIKE ?)
  AND (NOT ? OR otel_status_code = 'ERROR' OR is_exception)
"""
_SPANS_SEARCH_SQL = """
SELECT DISTINCT span_id FROM records
WHERE trace_id = ? AND (span_name ILIKE ? OR message ILIKE ? OR CAST(attributes AS VARCHAR) ILIKE ?)
"""
# Spans whose end is this close before the newest one seen are sent again: writers in other
# processes flush every half second, so a span can land after a later-ending one.
_SLACK_US = 30_000_000


def jsonable(value: Any) -> Any:
    """`value` with what JSON cannot hold (NaN and infinities, datetimes, bytes) as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _light(span: Any) -> dict[str, Any]:
    return {
        "span_id": span.span_id,
        "parent": span.parent_span_id,
        "name": span.name,
        "label": span.label,
        "start_us": span.start_us,
        "end_us": span.end_us,
        "error": span.is_error,
        "log": span.span_type == "log",
    }


# The trace's spans that ended: how many, the last end, and which of the start records given (`?`, span
# ids) are among them: the run page's poll finds its open spans in the pass it makes anyway.
_SPANS_SUMMARY_SQL = """
SELECT count(*), max(epoch_us(end_timestamp)),
       list(span_id) FILTER (WHERE list_contains(CAST(? AS VARCHAR[]), span_id))
FROM records WHERE trace_id = ?
"""


def _tag(store: Path, request: Any) -> str:
    """The ETag of an answer: the store's files as they are now, and what was asked."""
    from ..store.reader import store_fingerprint

    asked = f"{request.url.path}?{request.url.query}"
    return '"' + hashlib.sha256(f"{store_fingerprint(store)}|{asked}".encode()).hexdigest()[:32] + '"'


def ui_routes(store: Path, pool: Executor | None = None, source: str | None = None) -> list[Any]:
    """The UI's Starlette routes over the store at `store` (or over ClickHouse's `otel_traces` at
    `source`); reads run on `pool` (their own threads, so that a page never delays intake)."""
    from importlib.resources import files

    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    from ..analysis import (
        TraceStore,
        build_graph,
        build_report,
        diff_reports,
        open_runs,
        open_spans,
        read_outcome_diff,
        render_markdown,
        render_trace_html,
        with_open_runs,
    )
    from ..exceptions import StoreError
    from ..store._limits import QueryLimits
    from ._experiments import CompareAsk, comparison_json, experiments_json
    from ._ui_pages import linked_spans, open_rows, report_page, waterfall_rows

    # One DuckDB thread a read (intake keeps the other cores), 1 GB, 30 s.
    limits = QueryLimits(timeout=30.0, memory=1000**3, max_rows=None, threads=1)

    def json_answer(content: Any, headers: Mapping[str, str]) -> Response:
        """`content` as JSON; what JSON cannot hold (a NaN or infinite number a sender recorded, a
        datetime) goes as text, so one odd span never makes a page's answer fail."""
        try:
            return JSONResponse(content, headers=headers)
        except (ValueError, TypeError):
            return JSONResponse(jsonable(content), headers=headers)

    assets = files(__package__) / "assets"
    index = (assets / "index.html").read_text(encoding="utf-8")
    run_page = (assets / "run.html").read_text(encoding="utf-8")
    diff_page = (assets / "diff.html").read_text(encoding="utf-8")
    experiments_page = (assets / "experiments.html").read_text(encoding="utf-8")
    shared = {
        "ui.js": ((assets / "ui.js").read_text(encoding="utf-8"), "text/javascript"),
        "ui.css": ((assets / "ui.css").read_text(encoding="utf-8"), "text/css"),
    }

    def open_store() -> TraceStore:
        if source is not None:
            from ..analysis import open_clickhouse

            return open_clickhouse(source, limits=limits)
        return TraceStore(store, limits=limits)

    def counted(traces: TraceStore) -> dict[str, str]:
        """What the store's views left out or showed once, said on every answer read from it."""
        return health_headers(*traces.health())

    def read_runs(text: str, errors: bool) -> tuple[list[dict[str, Any]], dict[str, str]]:
        if source is None and not (store / "segments").is_dir():
            return [], {}
        with open_store() as traces:
            # Runs with spans started and not ended: running, or left unfinished by their process.
            opened = open_runs(traces) if source is None else {}
            if source is not None:
                found = traces.runs(limit=500) if traces.newest_traces(1) else []  # type: ignore[attr-defined]
            elif not traces.rows("SELECT 1 AS one FROM records LIMIT 1"):  # no span ended yet
                if not opened:
                    return [], counted(traces)
                found = []
            else:
                found = traces.runs(limit=500)  # a failure is an error, not "no runs"
            marks = traces.aliases(found, 500) if found or opened else {}
            runs = [
                {
                    **vars(run),
                    "ref": marks.get(run.trace_id),
                    "state": getattr(opened.get(run.trace_id), "state", None),
                }
                for run in with_open_runs(found, opened)
            ]
            if text or errors:
                like = f"%{text}%"
                params = [text or None, like, like, like, errors]
                matching = {r["trace_id"] for r in traces.rows(_RUNS_SEARCH_SQL, params)}
                runs = [run for run in runs if run["trace_id"] in matching]
            return runs, counted(traces)

    def read_spans(ref: str, since_us: int, text: str) -> tuple[dict[str, Any], dict[str, str]]:
        with open_store() as traces:
            trace_id = traces.resolve(ref)
            # Every open span each time (they are few): the page drops those no longer open.
            started = open_spans(traces, trace_id, check=False) if source is None else []
            ids = [s.span_id for s in started]
            ((count, newest, ended),) = traces.table(_SPANS_SUMMARY_SQL, [ids, trace_id])[1]
            gone = set(ended or ())
            opened = [s for s in started if s.span_id not in gone]
            if not count and not opened:
                traces.require_trace(trace_id, found=False)
            # Only what ended since the page's newest span (less a margin): the page has the rest.
            rows = waterfall_rows(traces, trace_id, since_us - _SLACK_US if since_us else None)
            last = max([int(newest or 0), *(s.start_us for s in opened)])
            now_us = time.time_ns() // 1000
            reply: dict[str, Any] = {
                "trace_id": trace_id,
                "spans": rows,
                "open": open_rows(opened, now_us, last),
                "now_us": now_us,  # running bars grow from here on the page's clock
                "count": int(count),
                "newest_us": int(newest or 0),
            }
            if text:
                like = f"%{text}%"
                reply["matches"] = [
                    r["span_id"] for r in traces.rows(_SPANS_SEARCH_SQL, [trace_id, like, like, like])
                ]
            return reply, counted(traces)

    def read_span(ref: str, span_id: str) -> tuple[dict[str, Any] | None, dict[str, str]]:
        with open_store() as traces:
            trace_id = traces.resolve(ref)
            found = traces.spans(trace_id, only=[span_id])
            if not found and source is None:  # a span that started and has not ended (no end read just now)
                found = [s for s in open_spans(traces, trace_id, check=False) if s.span_id == span_id]
            if not found:
                return None, counted(traces)
            span = found[0]
            return {
                **_light(span),
                "open": span.state or None,
                "duration": span.duration,
                "message": span.message,
                "attributes": span.attributes,
                "events": span.events,
                "links": span.links,
                "status": span.otel_status_code,
                "status_message": span.otel_status_message,
                "exception": {
                    "type": span.exception_type,
                    "message": span.exception_message,
                    "stacktrace": span.exception_stacktrace,
                }
                if span.is_exception
                else None,
                "kind": span.otel_kind,
                "scope": span.scope_name,
                "service": span.service_name,
                "resource": span.resource,
                **linked_spans(traces, trace_id, span.span_id, span.name or "", span.links),
            }, counted(traces)

    def read_diff(ref_a: str, ref_b: str) -> tuple[dict[str, Any], dict[str, str]]:
        with open_store() as traces:
            trace_a, trace_b = traces.resolve(ref_a), traces.resolve(ref_b)
            diff = diff_reports(build_report(traces, trace_a), build_report(traces, trace_b)).to_dict()
            diff["outcomes"] = read_outcome_diff(traces, trace_a, trace_b).to_dict()
            return diff, counted(traces)

    def read_view(trace_id: str) -> tuple[str, dict[str, str]]:
        with open_store() as traces:
            page = render_trace_html(traces, traces.resolve(trace_id))
            return page, counted(traces)

    def read_report(ref: str) -> tuple[str, dict[str, str]]:
        with open_store() as traces:
            trace_id = traces.resolve(ref)
            graph = build_graph(trace_id, traces.spans(trace_id))
            markdown = render_markdown(build_report(traces, trace_id))
            return report_page(markdown, trace_id, graph), counted(traces)

    def read_graph(ref: str) -> tuple[dict[str, Any], dict[str, str]]:
        with open_store() as traces:
            trace_id = traces.resolve(ref)
            return build_graph(trace_id, traces.spans(trace_id)).to_dict(), counted(traces)

    def read_experiments() -> tuple[str, dict[str, str]]:
        if source is None and not (store / "segments").is_dir():
            return experiments_json(None), {}
        with open_store() as traces:
            return experiments_json(traces), counted(traces)

    def read_comparison(ask: CompareAsk) -> tuple[tuple[int, str], dict[str, str]]:
        """(200, the comparison as JSON), or (400, why) when the baseline names no configuration."""
        if source is None and not (store / "segments").is_dir():
            return (200, comparison_json(None, ask)), {}
        with open_store() as traces:
            try:
                return (200, comparison_json(traces, ask)), counted(traces)
            except ValueError as exc:
                return (400, str(exc)), counted(traces)

    def check_refs(ref_a: str, ref_b: str) -> tuple[None, dict[str, str]]:
        with open_store() as traces:
            for ref in (ref_a, ref_b):
                trace_id = traces.resolve(ref)
                found = traces.rows("SELECT 1 AS one FROM records WHERE trace_id = ? LIMIT 1", [trace_id])
                traces.require_trace(trace_id, found=bool(found))
            return None, counted(traces)

    async def off_loop(request: Request, read: Any, *args: Any) -> tuple[Any, dict[str, str]] | Response:
        """`read(*args)` on the UI's threads; 304 when the store has not changed since the page's
        copy (its ETag), and 404 with the reason when the store has no such run."""
        # ClickHouse changes without the store's files telling: its answers are never a 304.
        tag = _tag(store, request) if source is None else f'"{time.time_ns()}"'
        if request.headers.get("if-none-match") == tag:
            return Response(status_code=304, headers={"ETag": tag})
        try:
            value, headers = await asyncio.get_running_loop().run_in_executor(pool, read, *args)
        except StoreError as exc:
            # A trace that is not there is 404; a store that could not be read says so (never an empty list).
            failed = str(exc).startswith(("query failed", "cannot read", "cannot open", "the query"))
            status = 500 if failed else 404
            return PlainTextResponse(str(exc), status)
        return value, {**headers, "ETag": tag, "Cache-Control": "no-cache"}

    def html(text: str, headers: Mapping[str, str] | None = None) -> Response:
        # Every page carries its own Content-Security-Policy: its inline scripts by hash, nothing
        # fetched or run from another origin (see `page_policy`).
        return HTMLResponse(text, headers={**(headers or {}), "Content-Security-Policy": page_policy(text)})

    async def page(request: Request) -> Response:
        return html(index)

    async def static(request: Request) -> Response:
        """The script and style sheet the pages share."""
        found = shared.get(request.path_params["name"])
        if found is None:
            return PlainTextResponse("not found", 404)
        return Response(found[0], media_type=f"{found[1]}; charset=utf-8")

    async def run(request: Request) -> Response:
        return html(run_page)

    async def api_runs(request: Request) -> Response:
        """Runs, newest first; `q` keeps those with a span whose name, message or attributes contain
        it (an agent id, a round, a value), `errors=1` those with a failed span."""
        text = request.query_params.get("q", "").strip()
        errors = request.query_params.get("errors") in ("1", "true")
        answer = await off_loop(request, read_runs, text, errors)
        if isinstance(answer, Response):
            return answer
        return json_answer(answer[0], answer[1])

    async def api_spans(request: Request) -> Response:
        """A run's spans without details, in start order; with `since_us`, only those that ended
        since then (less a margin), for a page that already has the rest; `q` adds `matches`, the
        spans whose name, message or attributes contain it."""
        try:
            since = int(request.query_params.get("since_us") or 0)
        except ValueError:
            return PlainTextResponse("since_us must be an integer (microseconds)", 400)
        text = request.query_params.get("q", "").strip()
        answer = await off_loop(request, read_spans, request.path_params["trace_id"], since, text)
        if isinstance(answer, Response):
            return answer
        return json_answer(answer[0], answer[1])

    async def api_span(request: Request) -> Response:
        answer = await off_loop(
            request, read_span, request.path_params["trace_id"], request.path_params["span_id"]
        )
        if isinstance(answer, Response):
            return answer
        if answer[0] is None:
            return PlainTextResponse("no such span in this run", 404, headers=answer[1])
        return json_answer(answer[0], answer[1])

    async def diff(request: Request) -> Response:
        """The diff page; 404 (with the reason) when a run it names is not in the store."""
        a = request.query_params.get("a", "previous")
        b = request.query_params.get("b", "latest")
        try:
            await asyncio.get_running_loop().run_in_executor(pool, check_refs, a, b)
        except StoreError as exc:
            return PlainTextResponse(f"no diff: {exc}", 404)
        return html(diff_page)

    async def api_diff(request: Request) -> Response:
        """`mastrace diff` as JSON: `a` and `b` are trace ids, prefixes, `previous` or `latest`."""
        a = request.query_params.get("a", "previous")
        b = request.query_params.get("b", "latest")
        answer = await off_loop(request, read_diff, a, b)
        if isinstance(answer, Response):
            return answer
        return json_answer(answer[0], answer[1])

    async def experiments(request: Request) -> Response:
        return html(experiments_page)

    async def api_experiments(request: Request) -> Response:
        """The store's experiments, latest first (as `mastrace experiments --format json`)."""
        answer = await off_loop(request, read_experiments)
        if isinstance(answer, Response):
            return answer
        return Response(answer[0], media_type="application/json", headers=answer[1])

    async def api_compare(request: Request) -> Response:
        """One experiment's comparison (as `mastrace compare --format json`): `experiment`, `by` (a
        configuration key or attribute), `baseline` (a configuration key or prefix), `seed`."""
        try:
            ask = CompareAsk.from_query(dict(request.query_params))
        except ValueError as exc:
            return PlainTextResponse(str(exc), 400)
        answer = await off_loop(request, read_comparison, ask)
        if isinstance(answer, Response):
            return answer
        (status, text), headers = answer
        if status != 200:
            return PlainTextResponse(text, status, headers={k: v for k, v in headers.items() if k != "ETag"})
        return Response(text, media_type="application/json", headers=headers)

    async def view(request: Request) -> Response:
        answer = await off_loop(request, read_view, request.path_params["trace_id"])
        if isinstance(answer, Response):
            return answer
        return html(answer[0], answer[1])

    async def api_graph(request: Request) -> Response:
        """The run's coordination graph: nodes (agents, tools, MCP servers) with positions, edges."""
        answer = await off_loop(request, read_graph, request.path_params["trace_id"])
        if isinstance(answer, Response):
            return answer
        return json_answer(answer[0], answer[1])

    async def report(request: Request) -> Response:
        answer = await off_loop(request, read_report, request.path_params["trace_id"])
        if isinstance(answer, Response):
            return answer
        return html(answer[0], answer[1])

    return [
        Route("/", page),
        Route("/static/{name}", static),
        Route("/api/runs", api_runs),
        Route("/api/runs/{trace_id}/spans", api_spans),
        Route("/api/runs/{trace_id}/spans/{span_id}", api_span),
        Route("/api/runs/{trace_id}/graph", api_graph),
        Route("/diff", diff),
        Route("/api/diff", api_diff),
        Route("/experiments", experiments),
        Route("/api/experiments", api_experiments),
        Route("/api/compare", api_compare),
        Route("/runs/{trace_id}", run),
        Route("/runs/{trace_id}/view", view),
        Route("/runs/{trace_id}/report", report),
    ]
