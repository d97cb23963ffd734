"""The `analyze`, `view`, `diff` and `export` subcommands."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TextIO

from ..analysis import (
    build_report,
    diff_reports,
    read_outcome_diff,
    render_diff,
    render_markdown,
    render_outcome_diff,
    render_trace_html,
    trace_scores,
)
from ._commands import open_store
from ._export import to_jaeger_json, to_otlp_json
from ._output import json_default, progress, write_output
from ._parser import DEFAULT_REPORT, DEFAULT_VIEW

__all__ = ["cmd_analyze", "cmd_diff", "cmd_export", "cmd_view"]


def _wrote(path: Path | None, what: str, trace_id: str, out: TextIO) -> None:
    if path is not None:
        out.write(f"wrote {what} for trace {trace_id} to {path}\n")


def cmd_analyze(args: argparse.Namespace, out: TextIO) -> int:
    """Write the analysis report of a trace (markdown, or JSON with `--format json`)."""
    with open_store(args) as store, progress("analyzing"):
        trace_id = store.resolve(args.trace)
        report = build_report(store, trace_id)
    if args.format == "json":
        text = json.dumps(report.to_dict(), indent=2, ensure_ascii=False, default=json_default) + "\n"
        path = write_output(text, args.output, None, out)
    else:
        path = write_output(render_markdown(report), args.output, DEFAULT_REPORT, out)
    _wrote(path, "the analysis report", trace_id, out)
    return 0


def cmd_view(args: argparse.Namespace, out: TextIO) -> int:
    """Write a self-contained HTML waterfall of a trace."""
    with open_store(args) as store, progress("rendering"):
        trace_id = store.resolve(args.trace)
        page = (
            render_trace_html(store, trace_id)
            if args.max_spans is None
            else render_trace_html(store, trace_id, max_spans=args.max_spans)
        )
    path = write_output(page, args.output, DEFAULT_VIEW, out)
    _wrote(path, "the trace view", trace_id, out)
    return 0


def cmd_diff(args: argparse.Namespace, out: TextIO) -> int:
    """Compare two runs: configuration snapshot differences and duration, token and cost deltas."""
    with open_store(args) as store, progress("comparing"):
        trace_a, trace_b = store.resolve(args.run_a), store.resolve(args.run_b)
        diff = diff_reports(
            build_report(store, trace_a),
            build_report(store, trace_b),
            scores_a=trace_scores(store, trace_a),
            scores_b=trace_scores(store, trace_b),
        )
        outcomes = read_outcome_diff(store, trace_a, trace_b)
    if args.format == "json":
        document = {**diff.to_dict(), "outcomes": outcomes.to_dict()}
        out.write(json.dumps(document, indent=2, ensure_ascii=False, default=json_default) + "\n")
    else:
        out.write(render_diff(diff))
        out.write("\n" + render_outcome_diff(outcomes))
    return 0


def cmd_export(args: argparse.Namespace, out: TextIO) -> int:
    """Export a trace as OTLP/JSON or as Jaeger JSON (for Jaeger UI's JSON upload)."""
    with open_store(args) as store, progress("exporting"):
        trace_id = store.resolve(args.trace)
        spans = store.spans(trace_id)
    document = to_otlp_json(spans) if args.format == "otlp-json" else to_jaeger_json(spans)
    text = json.dumps(document, ensure_ascii=False, default=json_default) + "\n"
    path = write_output(text, args.output, None, out)
    if path is not None:
        _wrote(path, f"{len(spans)} spans as {args.format}", trace_id, out)
    return 0
