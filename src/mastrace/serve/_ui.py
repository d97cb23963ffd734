"""The web UI of `mastrace serve`: pages from package data, JSON read from the store.

- `/`: the runs list (live, filters, search by span content).
- `/runs/<trace>`: a run's waterfall (live: spans appear as they end; virtualised rows; a span's
  details on click; `#span=<span id>` selects a span), with filters by text, agent, round,
  errors and attribute value.
- `/runs/<trace>/view`: the static HTML view (`mastrace view`); `/runs/<trace>/report`: the report
  (HTML).
- `/diff?a=<trace>&b=<trace>`: the configuration and usage differences of two runs (`mastrace diff`).
- `/api/runs`, `/api/runs/<trace>/spans?since_us=&q=`, `/api/runs/<trace>/spans/<span>`, `/api/diff`.

Every value from a span reaches the page as JSON and is inserted as text, never as HTML.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

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
_SPANS_SUMMARY_SQL = "SELECT count(*), max(epoch_us(end_timestamp)) FROM records WHERE trace_id = ?"


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


def ui_routes(store: Path) -> list[Any]:
    """The UI's Starlette routes over the store at `store`."""
    from importlib.resources import files

    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    from ..analysis import TraceStore, build_report, diff_reports, render_markdown, render_trace_html
    from ..exceptions import StoreError
    from ._ui_pages import report_page, waterfall_rows

    assets = files(__package__) / "assets"
    index = (assets / "index.html").read_text(encoding="utf-8")
    run_page = (assets / "run.html").read_text(encoding="utf-8")
    diff_page = (assets / "diff.html").read_text(encoding="utf-8")
    shared = {
        "ui.js": ((assets / "ui.js").read_text(encoding="utf-8"), "text/javascript"),
        "ui.css": ((assets / "ui.css").read_text(encoding="utf-8"), "text/css"),
    }

    def read_runs(text: str, errors: bool) -> list[dict[str, Any]]:
        if not (store / "segments").is_dir():
            return []
        with TraceStore(store) as traces:
            try:
                found = traces.runs(limit=500)
                marks = traces.aliases(found, 500)
                runs = [vars(run) for run in found]
            except StoreError:  # no spans yet
                return []
            for run in runs:
                run["ref"] = marks.get(run["trace_id"])
            if text or errors:
                like = f"%{text}%"
                params = [text or None, like, like, like, errors]
                matching = {r["trace_id"] for r in traces.rows(_RUNS_SEARCH_SQL, params)}
                runs = [run for run in runs if run["trace_id"] in matching]
            return runs

    def read_spans(ref: str, since_us: int, text: str) -> dict[str, Any]:
        with TraceStore(store) as traces:
            trace_id = traces.resolve(ref)
            ((count, newest),) = traces.table(_SPANS_SUMMARY_SQL, [trace_id])[1]
            if not count:
                traces.require_trace(trace_id, found=False)
            # Only what ended since the page's newest span (less a margin): the page has the rest.
            rows = waterfall_rows(traces, trace_id, since_us - _SLACK_US if since_us else None)
            reply: dict[str, Any] = {
                "trace_id": trace_id,
                "spans": rows,
                "count": int(count),
                "newest_us": int(newest or 0),
            }
            if text:
                like = f"%{text}%"
                reply["matches"] = [
                    r["span_id"] for r in traces.rows(_SPANS_SEARCH_SQL, [trace_id, like, like, like])
                ]
            return reply

    def read_span(ref: str, span_id: str) -> dict[str, Any] | None:
        with TraceStore(store) as traces:
            trace_id = traces.resolve(ref)
            found = [s for s in traces.spans(trace_id, details=False) if s.span_id == span_id]
            if not found:
                return None
            traces.fill(trace_id, found)
            span = found[0]
            return {
                **_light(span),
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
            }

    def read_diff(ref_a: str, ref_b: str) -> dict[str, Any]:
        with TraceStore(store) as traces:
            trace_a, trace_b = traces.resolve(ref_a), traces.resolve(ref_b)
            return diff_reports(build_report(traces, trace_a), build_report(traces, trace_b)).to_dict()

    def read_view(trace_id: str) -> str:
        with TraceStore(store) as traces:
            return render_trace_html(traces, traces.resolve(trace_id))

    def read_report(ref: str) -> str:
        with TraceStore(store) as traces:
            trace_id = traces.resolve(ref)
            return report_page(render_markdown(build_report(traces, trace_id)), trace_id)

    async def page(request: Request) -> Response:
        return HTMLResponse(index)

    async def static(request: Request) -> Response:
        """The script and style sheet the pages share."""
        found = shared.get(request.path_params["name"])
        if found is None:
            return PlainTextResponse("not found", 404)
        return Response(found[0], media_type=f"{found[1]}; charset=utf-8")

    async def run(request: Request) -> Response:
        return HTMLResponse(run_page)

    async def api_runs(request: Request) -> Response:
        """Runs, newest first; `q` keeps those with a span whose name, message or attributes contain
        it (an agent id, a round, a value), `errors=1` those with a failed span."""
        text = request.query_params.get("q", "").strip()
        errors = request.query_params.get("errors") in ("1", "true")
        return JSONResponse(await asyncio.to_thread(read_runs, text, errors))

    async def api_spans(request: Request) -> Response:
        """A run's spans without details, in start order; with `since_us`, only those that ended
        since then (less a margin), for a page that already has the rest; `q` adds `matches`, the
        spans whose name, message or attributes contain it."""
        try:
            since = int(request.query_params.get("since_us") or 0)
        except ValueError:
            return PlainTextResponse("since_us must be an integer (microseconds)", 400)
        text = request.query_params.get("q", "").strip()
        try:
            reply = await asyncio.to_thread(read_spans, request.path_params["trace_id"], since, text)
        except StoreError as exc:
            return PlainTextResponse(str(exc), 404)
        return JSONResponse(reply)

    async def api_span(request: Request) -> Response:
        try:
            reply = await asyncio.to_thread(
                read_span, request.path_params["trace_id"], request.path_params["span_id"]
            )
        except StoreError as exc:
            return PlainTextResponse(str(exc), 404)
        if reply is None:
            return PlainTextResponse("no such span in this run", 404)
        return JSONResponse(reply)

    def check_refs(ref_a: str, ref_b: str) -> None:
        with TraceStore(store) as traces:
            for ref in (ref_a, ref_b):
                trace_id = traces.resolve(ref)
                found = traces.rows("SELECT 1 AS one FROM records WHERE trace_id = ? LIMIT 1", [trace_id])
                traces.require_trace(trace_id, found=bool(found))

    async def diff(request: Request) -> Response:
        """The diff page; 404 (with the reason) when a run it names is not in the store."""
        a = request.query_params.get("a", "previous")
        b = request.query_params.get("b", "latest")
        try:
            await asyncio.to_thread(check_refs, a, b)
        except StoreError as exc:
            return PlainTextResponse(f"no diff: {exc}", 404)
        return HTMLResponse(diff_page)

    async def api_diff(request: Request) -> Response:
        """`mastrace diff` as JSON: `a` and `b` are trace ids, prefixes, `previous` or `latest`."""
        a = request.query_params.get("a", "previous")
        b = request.query_params.get("b", "latest")
        try:
            reply = await asyncio.to_thread(read_diff, a, b)
        except StoreError as exc:
            return PlainTextResponse(str(exc), 404)
        return JSONResponse(jsonable(reply))

    async def view(request: Request) -> Response:
        try:
            text = await asyncio.to_thread(read_view, request.path_params["trace_id"])
        except StoreError as exc:
            return PlainTextResponse(str(exc), 404)
        return HTMLResponse(text)

    async def report(request: Request) -> Response:
        try:
            text = await asyncio.to_thread(read_report, request.path_params["trace_id"])
        except StoreError as exc:
            return PlainTextResponse(str(exc), 404)
        return HTMLResponse(text)

    return [
        Route("/", page),
        Route("/static/{name}", static),
        Route("/api/runs", api_runs),
        Route("/api/runs/{trace_id}/spans", api_spans),
        Route("/api/runs/{trace_id}/spans/{span_id}", api_span),
        Route("/diff", diff),
        Route("/api/diff", api_diff),
        Route("/runs/{trace_id}", run),
        Route("/runs/{trace_id}/view", view),
        Route("/runs/{trace_id}/report", report),
    ]
