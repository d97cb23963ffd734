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
from ..analysis._kinds import span_category
from ..analysis._store import TraceStore

__all__ = ["KEY_ATTRIBUTES", "report_page", "waterfall_rows"]

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
       json_extract_string(attributes, [{_PATHS}]) AS k
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
        if r["k"] and any(v is not None for v in r["k"]):
            *values, llm_cost = r["k"]
            keys = _keys(values)
            if row["kind"] == "llm" and "cost" not in keys and (cost := _number(llm_cost)) is not None:
                keys["cost"] = cost
            if keys:
                row["keys"] = keys
        out.append(row)
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
"""


def report_page(markdown: str, trace_id: str) -> str:
    """The analysis report (its Markdown) as a page of the UI, raw HTML in the text shown as text."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown)
    ref = html.escape(trace_id, quote=True)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">'
        f'<title>mastrace report {ref}</title><link rel="stylesheet" href="../../static/ui.css">'
        f"<style>{_STYLE}</style></head><body>"
        '<div class="topbar"><span class="brand">mastrace</span><a href="../../">runs</a>'
        f'<span class="crumb">/</span><code>{ref}</code><span class="crumb">/</span>'
        '<span>analysis report</span><span class="spacer"></span>'
        f'<a href="../{ref}">waterfall</a><a href="../{ref}/view">static view</a></div>'
        f'<main id="report">{body}</main></body></html>'
    )
