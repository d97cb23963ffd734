"""What the UI's pages read beyond the store's plain spans: the waterfall's rows with their kind and
key attributes, the analysis report as an HTML page, and the check behind a diff link.

Every value read from a span reaches the browser as JSON (inserted as text by the pages) or, for the
report, through a Markdown renderer with raw HTML turned off: span content is never markup.
"""

from __future__ import annotations

import html
import json
from typing import Any, Final

from .. import semconv
from ..analysis import CoordinationGraph, SpanRow, TraceStore
from ..analysis._kinds import span_category

__all__ = ["KEY_ATTRIBUTES", "linked_spans", "open_rows", "report_page", "waterfall_rows"]

# The attributes a row shows inline (and the run summary adds up), by their short name in the page.
KEY_ATTRIBUTES: Final[dict[str, tuple[str, ...]]] = {
    "model": (semconv.GEN_AI_REQUEST_MODEL, semconv.GEN_AI_RESPONSE_MODEL),
    "in": (semconv.MASSGEN_USAGE_INPUT, semconv.GEN_AI_USAGE_INPUT_TOKENS),
    "out": (semconv.MASSGEN_USAGE_OUTPUT, semconv.GEN_AI_USAGE_OUTPUT_TOKENS),
    "cost": (semconv.MASSGEN_USAGE_COST, semconv.GEN_AI_USAGE_COST_AMOUNT),
    "cost_unknown": (semconv.MASTRACE_COST_UNKNOWN,),
    "cost_unknown_models": (semconv.MASTRACE_COST_UNKNOWN_MODELS,),
    "outcome": (semconv.MASSGEN_OUTCOME,),
    "agent": (semconv.MASSGEN_AGENT_ID, semconv.GEN_AI_AGENT_ID),
    "tool": (semconv.GEN_AI_TOOL_NAME,),
}
# An instrumented SDK call keeps its price in its usage record: an LLM row shows it as its cost.
_LLM_COST_PATH: Final = "'$.\"" + semconv.MASTRACE_USAGE + "\".cost'"
_PATHS = ", ".join(
    ["'$.\"" + key + "\"'" for keys in KEY_ATTRIBUTES.values() for key in keys] + [_LLM_COST_PATH]
)
_ROWS_SQL = f"""
SELECT span_id, parent_span_id, span_name, message, span_type, level,
       epoch_us(start_timestamp) AS start_us, epoch_us(end_timestamp) AS end_us,
       is_exception, otel_status_code,
       json_extract_string(attributes, [{_PATHS}]) AS k,
       CASE WHEN json_array_length(otel_links) > 0
            THEN json_extract_string(otel_links, '$[*].span_id') END AS links
FROM records
WHERE trace_id = ? AND epoch_us(end_timestamp) >= ?
ORDER BY start_timestamp, span_id
"""


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _models(text: str) -> list[str]:
    try:
        value = json.loads(text)
    except ValueError:
        return [text]
    return [str(m) for m in value if m] if isinstance(value, list) else [str(value)]


def _keys(values: list[str | None]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    at = 0
    for name, keys in KEY_ATTRIBUTES.items():
        found = next((v for v in values[at : at + len(keys)] if v not in (None, "")), None)
        at += len(keys)
        if found is None:
            continue
        if name in ("in", "out", "cost"):
            number = _number(found)
            if number is not None:
                out[name] = number
        elif name == "cost_unknown":
            out[name] = found.lower() == "true"
        elif name == "cost_unknown_models":
            models = _models(found)
            if models:
                out[name] = models
        else:
            out[name] = found
    return out


def waterfall_rows(
    traces: TraceStore, trace_id: str, ended_since_us: int | None = None
) -> list[dict[str, Any]]:
    """The spans of a trace as the waterfall draws them, in start order: ids (`parent` for a child),
    times, display kind (`session`, `agent`, `llm`, `tool`, `event`, `other`), and when they apply
    `label` (a message other than the name), `error`, `log` and key attributes (`keys`); with
    `ended_since_us`, only the spans that ended since then."""
    out = []
    # What is false, empty or the same as the name is left out: a 10,000-span run is one answer.
    for r in traces.rows(_ROWS_SQL, [trace_id, ended_since_us or 0]):
        name = r["span_name"] or ""
        row: dict[str, Any] = {
            "span_id": r["span_id"],
            "name": name,
            "start_us": int(r["start_us"]),
            "end_us": int(r["end_us"]),
            "kind": span_category(name, r["span_type"]),
        }
        if r["parent_span_id"]:
            row["parent"] = r["parent_span_id"]
        if r["message"] and r["message"] != name:
            row["label"] = r["message"]
        if r["otel_status_code"] == "ERROR" or r["is_exception"] or (r["level"] or 0) >= semconv.LEVEL_ERROR:
            row["error"] = True
        if r["span_type"] == "log":
            row["log"] = True
        if r["links"]:
            row["links"] = [link for link in r["links"] if link]
        if r["k"] and any(v is not None for v in r["k"]):
            *values, llm_cost = r["k"]
            keys = _keys(values)
            if row["kind"] == "llm" and "cost" not in keys and (cost := _number(llm_cost)) is not None:
                keys["cost"] = cost
            if keys:
                row["keys"] = keys
        out.append(row)
    return out


def _as_text(value: Any) -> str | None:
    """An attribute value as `json_extract_string` gives it (what `_keys` reads)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value)


def open_rows(spans: list[SpanRow], now_us: int, last_us: int) -> list[dict[str, Any]]:
    """The waterfall's rows of spans that started and have not ended (see `analysis._open`): as
    `waterfall_rows` gives them, with `open` (`running` or `unfinished`); a running span's bar reaches
    `now_us`, an unfinished one's the trace's last end (`last_us`)."""
    out = []
    for span in spans:
        end = now_us if span.state == "running" else last_us
        row: dict[str, Any] = {
            "span_id": span.span_id,
            "name": span.name,
            "start_us": span.start_us,
            "end_us": max(span.start_us, end),
            "kind": span_category(span.name, span.span_type),
            "open": span.state,
        }
        if span.parent_span_id:
            row["parent"] = span.parent_span_id
        if span.message and span.message != span.name:
            row["label"] = span.message
        values = [_as_text(span.attributes.get(key)) for keys in KEY_ATTRIBUTES.values() for key in keys]
        if keys := _keys(values):
            row["keys"] = keys
        out.append(row)
    return out


_LINKED_FROM_SQL = """
SELECT span_id, span_name, message, epoch_us(start_timestamp) AS start_us,
       CAST(otel_links AS VARCHAR) AS links
FROM records
WHERE trace_id = ? AND json_array_length(otel_links) > 0 AND CAST(otel_links AS VARCHAR) LIKE ?
ORDER BY start_timestamp, span_id
"""
_NAMES_SQL = """
SELECT span_id, span_name, message FROM records WHERE trace_id = ? AND list_contains(?, span_id)
"""


def _link_kind(source_name: str, attributes: Any) -> str:
    """What a link means, as the page names it: `vote`, `winner`, `retry` or `link`."""
    if isinstance(attributes, dict):
        for key in (semconv.MASTRACE_LINK_KIND, "kind"):
            if isinstance(attributes.get(key), str):
                return str(attributes[key])
    for prefix, kind in (("Agent vote:", "vote"), ("Winner selected:", "winner")):
        if source_name.startswith(prefix):
            return kind
    return "retry" if "retry" in source_name.lower() else "link"


def linked_spans(
    traces: TraceStore, trace_id: str, span_id: str, name: str, links: list[dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """The spans a span links to (`links_to`: vote → answer, retry → original, any span link) and
    those that link to it (`linked_from`: answer → the votes it received), with their names, the
    link's kind and attributes; a link to another trace says so (`trace_id`)."""
    import json

    targets = [str(link.get("span_id")) for link in links if isinstance(link, dict) and link.get("span_id")]
    names = {
        r["span_id"]: r["message"] or r["span_name"]
        for r in (traces.rows(_NAMES_SQL, [trace_id, targets]) if targets else [])
    }
    out: dict[str, list[dict[str, Any]]] = {"links_to": [], "linked_from": []}
    for link in links:
        if not isinstance(link, dict) or not link.get("span_id"):
            continue
        target = str(link["span_id"])
        entry: dict[str, Any] = {
            "span_id": target,
            "name": names.get(target),
            "kind": _link_kind(name, link.get("attributes")),
            "attributes": link.get("attributes") or {},
        }
        if link.get("trace_id") and link["trace_id"] != trace_id:
            entry["trace_id"] = link["trace_id"]
        out["links_to"].append(entry)
    for r in traces.rows(_LINKED_FROM_SQL, [trace_id, f"%{span_id}%"]):
        try:
            found = json.loads(r["links"])
        except ValueError:
            continue
        for link in found if isinstance(found, list) else []:
            if (
                isinstance(link, dict)
                and link.get("span_id") == span_id
                and link.get("trace_id", trace_id) == trace_id
            ):
                out["linked_from"].append(
                    {
                        "span_id": r["span_id"],
                        "name": r["message"] or r["span_name"],
                        "kind": _link_kind(r["span_name"] or "", link.get("attributes")),
                        "attributes": link.get("attributes") or {},
                    }
                )
    return out


_STYLE = """
main { max-width: 1100px; margin: 1.2rem auto; padding: 1rem 2rem 2rem; background: #fff;
       border: 1px solid var(--line); border-radius: 8px; font-size: 14px; }
main h1 { font-size: 1.4rem; }
main h2 { font-size: 1.1rem; margin-top: 1.6rem; border-bottom: 1px solid var(--line); }
main table { border-collapse: collapse; margin: .5rem 0; font-size: .9rem; }
main th, main td { padding: .3rem .6rem; border-bottom: 1px solid var(--line); text-align: left;
                   vertical-align: top; }
main th { background: var(--soft); }
main td { overflow-wrap: anywhere; font-variant-numeric: tabular-nums; }
main code { background: var(--soft); padding: 0 .2rem; border-radius: 3px; overflow-wrap: anywhere; }
main em { color: var(--muted); }
main .graph { overflow-x: auto; }
"""


def report_page(markdown: str, trace_id: str, graph: CoordinationGraph | None = None) -> str:
    """The analysis report (its Markdown) as a page of the UI, raw HTML in the text shown as text;
    with `graph`, its coordination graph as an inline SVG (names escaped) at the end."""
    from markdown_it import MarkdownIt

    # Span text is text: a name, a message or an exception written as Markdown must not become an
    # image (a tracking pixel) or a link, so those rules are off and such text shows as written.
    parser = MarkdownIt("commonmark", {"html": False}).enable("table").disable(["image", "link", "autolink"])
    body = parser.render(markdown)
    ref = html.escape(trace_id, quote=True)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">'
        f'<title>mastrace report {ref}</title><link rel="stylesheet" href="../../static/ui.css">'
        f"<style>{_STYLE}</style></head><body>"
        '<div class="topbar"><span class="brand">mastrace</span><a href="../../">runs</a>'
        f'<span class="crumb">/</span><code>{ref}</code><span class="crumb">/</span>'
        '<span>analysis report</span><span class="spacer"></span>'
        f'<a href="../{ref}">waterfall</a><a href="../{ref}/view">static view</a></div>'
        f'<main id="report">{body}{_graph_section(graph)}</main></body></html>'
    )


def _graph_section(graph: CoordinationGraph | None) -> str:
    if graph is None or not graph.nodes:
        return ""
    legend = (
        "Agents (winner in green) with their answers, tokens and cost; edges: votes (blue; dashed: "
        "discarded), restarts (red), handoffs (violet), tool (amber) and MCP (teal) calls, with counts."
    )
    return (
        f'<h2 id="coordination-graph">Coordination graph</h2><p><em>{legend}</em></p>'
        f'<div class="graph">{graph.to_svg()}</div>'
    )
