"""Analyse traces in the local store: runs, trace trees, the analysis report, run diffs, HTML views.

The functions here read the store through `TraceStore` (the `records` table) and return plain
data; `render_*` functions turn that data into text, markdown or HTML.

Example:
    ```python
    from mastrace.analysis import TraceStore, build_report, render_markdown

    with TraceStore(".mastrace") as store:
        report = build_report(store, store.resolve("latest"))
    print(render_markdown(report))
    ```
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from ._clickhouse import ClickHouseStore, open_clickhouse
    from ._compare import (
        Comparison,
        ExperimentSummary,
        Gathered,
        compare,
        gather,
        list_experiments,
        render_comparison,
        render_experiments,
        trace_scores,
    )
    from ._diff import RunDiff, diff_reports, render_diff
    from ._diff_outcomes import OutcomeDiff, read_outcome_diff, render_outcome_diff
    from ._graph import CoordinationGraph, build_graph
    from ._html import render_html, render_trace_html
    from ._kinds import format_cost
    from ._markdown import render_markdown
    from ._model import Report
    from ._open import OpenRun, open_runs, open_spans, with_open_runs
    from ._prefix import render_trace
    from ._report import build_report
    from ._select import check_read_only
    from ._source import SourceStore, source_url
    from ._store import RunSummary, SpanRow, TraceStore
    from ._tree import render_runs, render_tree

# Loaded on first use: a command that lists runs does not load the report, the HTML view or the diff.
_LAZY = {
    "ClickHouseStore": "._clickhouse",
    "open_clickhouse": "._clickhouse",
    "Comparison": "._compare",
    "ExperimentSummary": "._compare",
    "Gathered": "._compare",
    "compare": "._compare",
    "gather": "._compare",
    "list_experiments": "._compare",
    "render_comparison": "._compare",
    "render_experiments": "._compare",
    "trace_scores": "._compare",
    "OutcomeDiff": "._diff_outcomes",
    "read_outcome_diff": "._diff_outcomes",
    "render_outcome_diff": "._diff_outcomes",
    "CoordinationGraph": "._graph",
    "build_graph": "._graph",
    "check_read_only": "._select",
    "source_url": "._source",
    "RunDiff": "._diff",
    "diff_reports": "._diff",
    "render_diff": "._diff",
    "render_html": "._html",
    "render_trace_html": "._html",
    "format_cost": "._kinds",
    "render_markdown": "._markdown",
    "Report": "._model",
    "OpenRun": "._open",
    "open_runs": "._open",
    "open_spans": "._open",
    "with_open_runs": "._open",
    "render_trace": "._prefix",
    "build_report": "._report",
    "SourceStore": "._source",
    "RunSummary": "._store",
    "SpanRow": "._store",
    "TraceStore": "._store",
    "render_runs": "._tree",
    "render_tree": "._tree",
}


__getattr__, __dir__ = _lazy_exports(__name__, globals(), _LAZY)


__all__ = [
    "ClickHouseStore",
    "Comparison",
    "CoordinationGraph",
    "ExperimentSummary",
    "Gathered",
    "OpenRun",
    "OutcomeDiff",
    "Report",
    "RunDiff",
    "RunSummary",
    "SourceStore",
    "SpanRow",
    "TraceStore",
    "build_graph",
    "build_report",
    "check_read_only",
    "compare",
    "diff_reports",
    "format_cost",
    "gather",
    "list_experiments",
    "open_clickhouse",
    "open_runs",
    "open_spans",
    "read_outcome_diff",
    "render_comparison",
    "render_diff",
    "render_experiments",
    "render_html",
    "render_markdown",
    "render_outcome_diff",
    "render_runs",
    "render_trace",
    "render_trace_html",
    "render_tree",
    "source_url",
    "trace_scores",
    "with_open_runs",
]
