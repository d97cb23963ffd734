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

from ._diff import RunDiff, diff_reports, render_diff
from ._html import render_html, render_trace_html
from ._kinds import format_cost
from ._markdown import render_markdown
from ._model import Report
from ._prefix import render_trace
from ._report import build_report
from ._store import RunSummary, SpanRow, TraceStore
from ._tree import render_runs, render_tree

__all__ = [
    "Report",
    "RunDiff",
    "RunSummary",
    "SpanRow",
    "TraceStore",
    "build_report",
    "diff_reports",
    "format_cost",
    "render_diff",
    "render_html",
    "render_markdown",
    "render_runs",
    "render_trace",
    "render_trace_html",
    "render_tree",
]
