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
    from ._diff import RunDiff, diff_reports, render_diff
    from ._html import render_html, render_trace_html
    from ._kinds import format_cost
    from ._markdown import render_markdown
    from ._model import Report
    from ._prefix import render_trace
    from ._report import build_report
    from ._source import SourceStore
    from ._store import RunSummary, SpanRow, TraceStore
    from ._tree import render_runs, render_tree

# Loaded on first use: a command that lists runs does not load the report, the HTML view or the diff.
_LAZY = {
    "RunDiff": "._diff",
    "diff_reports": "._diff",
    "render_diff": "._diff",
    "render_html": "._html",
    "render_trace_html": "._html",
    "format_cost": "._kinds",
    "render_markdown": "._markdown",
    "Report": "._model",
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
    "Report",
    "RunDiff",
    "RunSummary",
    "SourceStore",
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
