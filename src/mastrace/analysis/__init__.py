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

from ._diff import AgentDelta, ConfigChange, RunDiff, compare_configs, diff_reports, flatten, render_diff
from ._html import render_html
from ._kinds import format_duration, span_category
from ._markdown import render_markdown
from ._model import (
    AnswerRow,
    ErrorRow,
    FlowRow,
    OperationRow,
    Overview,
    PhaseRow,
    Report,
    RoundRow,
    ToolRow,
    UsageRow,
    VoteRow,
)
from ._report import build_report
from ._store import RunRef, RunSummary, SpanRow, TraceStore
from ._texttable import text_table
from ._tree import TreeNode, build_tree, render_tree

__all__ = [
    "AgentDelta",
    "AnswerRow",
    "ConfigChange",
    "ErrorRow",
    "FlowRow",
    "OperationRow",
    "Overview",
    "PhaseRow",
    "Report",
    "RoundRow",
    "RunDiff",
    "RunRef",
    "RunSummary",
    "SpanRow",
    "ToolRow",
    "TraceStore",
    "TreeNode",
    "UsageRow",
    "VoteRow",
    "build_report",
    "build_tree",
    "compare_configs",
    "diff_reports",
    "flatten",
    "format_duration",
    "render_diff",
    "render_html",
    "render_markdown",
    "render_tree",
    "span_category",
    "text_table",
]
