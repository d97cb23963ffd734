"""Render a `Report` as the markdown of ANALYSIS_REPORT.md."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from .. import semconv
from ._diff import flatten
from ._kinds import format_cost, format_value, utc_clock
from ._model import Report, RoundRow

__all__ = ["render_markdown"]

_PACKAGES = "benchmark.packages."


def _cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], align: str = "") -> list[str]:
    """A markdown table; `align` has one letter per column, `r` for right-aligned."""
    marks = ["---:" if align[i : i + 1] == "r" else "---" for i in range(len(headers))]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(marks) + "|"]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines


def _s(seconds: float | None, digits: int = 3) -> str:
    return "-" if seconds is None else f"{seconds:.{digits}f}"


def _int(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _usd(value: float | None, unknown_models: Sequence[str] = ()) -> str:
    return format_cost(value, unknown_models)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _more(report: Report, section: str, shown: int) -> list[str]:
    total = report.totals.get(section, shown)
    if total <= shown:
        return []
    return ["", f"_Showing the first {shown} of {total} rows; `mastrace query` lists them all._"]


def _total(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _header(report: Report) -> list[str]:
    o = report.overview
    generated = datetime.fromtimestamp(report.generated_at, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    started = datetime.fromtimestamp(o.start_us / 1e6, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = ["# Trace Analysis Report", ""]
    lines += [f"- **Trace ID:** `{o.trace_id}`", f"- **Root span:** `{o.root_name}`"]
    if o.service_name:
        lines.append(f"- **Service:** {o.service_name}")
    if o.task:
        lines.append(f"- **Task:** {format_value(o.task, 200)}")
    lines += [f"- **Started:** {started}", f"- **Generated:** {generated}", ""]
    return lines


def _summary(report: Report) -> list[str]:
    o = report.overview
    text = f"The run took {o.duration:.3f} s"
    if o.agents:
        winner = f"`{o.winner}` was selected as winner" if o.winner else "no winner was recorded"
        final = "a final answer was recorded" if o.final_answer else "no final answer was recorded"
        text += (
            f" with {len(o.agents)} agent(s) ({', '.join(o.agents)}). Agents submitted {o.answers} answer(s) "
            f"and cast {o.votes} vote(s); {winner} and {final}."
        )
    else:
        text += "; it has no agent rounds."
    text += f" The trace holds {o.spans} span(s), {o.errors} of them with errors."
    return ["## Summary", "", text, ""]


def _overview(report: Report) -> list[str]:
    o = report.overview
    rows = [
        ("Duration", f"{o.duration:.3f} s ({o.duration / 60:.2f} min)"),
        ("Agents", ", ".join(o.agents) or "-"),
        ("Winner", o.winner or "-"),
        ("Total Cost", _usd(o.total_cost, o.cost_unknown_models)),
        ("Total Answers", o.answers),
        ("Total Votes", o.votes),
        *([("Discarded Votes", o.discarded_votes)] if o.discarded_votes else []),
        ("Input / Output Tokens", f"{_int(o.input_tokens)} / {_int(o.output_tokens)}"),
        ("Spans", o.spans),
        ("Spans with errors", o.errors),
        ("Config hash", f"`{o.config_hash}`" if o.config_hash else "-"),
    ]
    return ["## Session Overview", "", *_table(["Metric", "Value"], rows), ""]


def _phases(report: Report) -> list[str]:
    lines = ["## Phase Duration Breakdown", ""]
    if not report.phases:
        return [*lines, "No agent rounds in this trace.", ""]
    rows = [(p.phase, p.count, _s(p.avg), _s(p.max), _s(p.total), _pct(p.percent)) for p in report.phases]
    lines += _table(["Phase", "Count", "Avg (s)", "Max (s)", "Total (s)", "% of Total"], rows, "lrrrrr")
    lines += [
        "",
        "_% of Total is the share of all agent round time; rounds of different agents overlap._",
        "",
    ]
    return lines


def _round_row(r: RoundRow) -> tuple[Any, ...]:
    span = f"{utc_clock(r.start_us)}-{utc_clock(r.end_us)}"
    round_no = f"r{r.round}" if r.round is not None else "-"
    return (
        r.agent,
        r.segment,
        round_no,
        r.round_type,
        r.outcome,
        span,
        _s(r.duration),
        _s(r.tool_wall),
        _s(r.non_tool),
        r.tool_spans,
    )


def _rounds(report: Report) -> list[str]:
    lines = ["## Per-Round Timing (Sorted by Agent)", ""]
    if not report.rounds:
        return [*lines, "No agent rounds in this trace.", ""]
    headers = [
        "Agent",
        "Segment",
        "Round",
        "Type",
        "Outcome",
        "Start-End (UTC)",
        "Total (s)",
        "Tool wall (s)",
        "Non-tool (s)",
        "Tool calls",
    ]
    lines += _table(headers, [_round_row(r) for r in report.rounds], "lrllllrrrr")
    lines += _more(report, "rounds", len(report.rounds))
    lines += [
        "",
        f"_Tool wall time is the union of the `{semconv.SPAN_MCP_PREFIX}*` and `Tool execution:*` span "
        "intervals inside the round, so overlapping calls count once; non-tool time is the rest "
        "(model, streaming, waiting). A `Tool execution:` span that holds or records an MCP call "
        "is that one call._",
        "",
    ]
    return lines


def _flow(report: Report) -> list[str]:
    lines = ["## Coordination Flow", ""]
    if report.flow:
        flow = [(f"+{f.offset:.3f}", f.name, f.agent, f.detail) for f in report.flow]
        lines += [
            *_table(["Offset (s)", "Record", "Agent", "Details"], flow, "r"),
            *_more(report, "flow", len(flow)),
            "",
        ]
    else:
        lines += ["No coordination records in this trace.", ""]
    if report.answers:
        answers = [(a.label, a.agent, f"+{a.offset:.3f}") for a in report.answers]
        lines += ["### Answers submitted", "", *_table(["Label", "Agent", "Offset (s)"], answers, "llr")]
        lines += [*_more(report, "answers", len(answers)), ""]
    if report.votes:
        rows = [
            (
                v.voter,
                v.voted_for,
                v.label,
                format_value(v.reason or "", 120),
                "discarded (a new answer came after it)" if v.discarded else "counted",
                f"+{v.offset:.3f}",
            )
            for v in report.votes
        ]
        lines += [
            "### Votes cast",
            "",
            *_table(
                ["Voter", "Voted For", "Answer label", "Reason given", "Status", "Offset (s)"], rows, "lllllr"
            ),
            *_more(report, "votes", len(rows)),
            "",
        ]
    return lines


def _slowest(report: Report) -> list[str]:
    lines = ["## Slowest Operations", ""]
    if not report.slowest:
        return [*lines, "No timed operations inside the session.", ""]
    rows = [
        (i, op.name, op.agent, _s(op.duration), _pct(op.percent), f"+{op.offset:.3f}")
        for i, op in enumerate(report.slowest, start=1)
    ]
    lines += _table(["#", "Operation", "Agent", "Duration (s)", "% of session", "Offset (s)"], rows, "rllrrr")
    return [*lines, ""]


def _tools(report: Report) -> list[str]:
    lines = ["## Tool Calls", ""]
    if not report.tools:
        return [*lines, "No tool calls in this trace.", ""]
    rows = [(t.name, t.calls, t.errors, t.retries, _s(t.total), _s(t.avg), _s(t.max)) for t in report.tools]
    lines += _table(
        ["Tool", "Calls", "Errors", "Retries", "Total (s)", "Avg (s)", "Max (s)"], rows, "lrrrrrr"
    )
    lines += _more(report, "tools", len(rows))
    if any(t.retries for t in report.tools):
        lines += [
            "",
            "_Retries: the framework calling a tool again after an attempt failed; a call counts once, "
            "as an error when its last attempt failed._",
        ]
    return [*lines, ""]


def _errors(report: Report) -> list[str]:
    lines = ["## Errors & Issues", ""]
    if not report.errors:
        return [*lines, "No exceptions, failed spans or agent errors were recorded.", ""]
    rows = [
        (f"+{e.offset:.3f}", e.kind, e.name, e.agent, e.type, format_value(e.message or "", 160))
        for e in report.errors
    ]
    lines += _table(["Offset (s)", "Kind", "Span", "Agent", "Type", "Message"], rows, "r")
    return [*lines, *_more(report, "errors", len(rows)), ""]


def _recovery(report: Report) -> list[str]:
    lines = ["## Retries, Restarts & Timeouts", ""]
    rows = report.recovery
    if not rows:
        return [
            *lines,
            "No HTTP retries, enforcement retries, restarts, timeouts or tool retries were recorded.",
            "",
        ]
    table = [
        (r.agent, r.http_retries, r.enforcement_retries, r.restarts, r.timeouts, r.tool_retries) for r in rows
    ]
    if len(rows) > 1:
        table.append(
            (
                "**Total**",
                sum(r.http_retries for r in rows),
                sum(r.enforcement_retries for r in rows),
                sum(r.restarts for r in rows),
                sum(r.timeouts for r in rows),
                sum(r.tool_retries for r in rows),
            )
        )
    headers = ["Agent", "HTTP retries", "Enforcement retries", "Restart signals", "Timeouts", "Tool retries"]
    lines += _table(headers, table, "lrrrrr")
    lines += [
        "",
        "_HTTP retries: the LLM SDK's own retries inside one call (429, 5xx, dropped connection). "
        "Enforcement retries: MassGen asking an agent again after a reply without a valid tool call. "
        "Restart signals: MassGen's `Agent restart` records (a new answer asks the agent to start over; "
        "an agent that has failed or finished does not). Timeouts: MassGen's `agent_timeout` events. "
        "Tool retries: a tool called again after an attempt failed (MassGen retries an MCP call that "
        "raised)._",
    ]
    return [*lines, ""]


def _usage(report: Report) -> list[str]:
    lines = ["## Cost & Token Analysis", ""]
    if not report.usage:
        return [*lines, "No token usage was recorded in this trace.", ""]
    count_header = "Rounds" if report.usage_source == "round spans" else "LLM calls"
    rows: list[tuple[Any, ...]] = [
        (
            u.agent,
            u.spans,
            _int(u.input),
            _int(u.output),
            _int(u.reasoning),
            _int(u.cached),
            _pct(u.cache_hit_rate),
            _usd(u.cost, u.cost_unknown_models),
        )
        for u in report.usage
    ]
    total_in = _total([u.input for u in report.usage])
    total_cached = _total([u.cached for u in report.usage])
    rate = 100.0 * total_cached / total_in if total_in and total_cached is not None else None
    rows.append(
        (
            "**Total**",
            sum(u.spans for u in report.usage),
            _int(total_in),
            _int(_total([u.output for u in report.usage])),
            _int(_total([u.reasoning for u in report.usage])),
            _int(total_cached),
            _pct(rate),
            _usd(report.overview.total_cost, report.overview.cost_unknown_models),
        )
    )
    headers = [
        "Agent",
        count_header,
        "Input Tokens",
        "Output Tokens",
        "Reasoning",
        "Cached Input",
        "Cache hit rate",
        "Cost",
    ]
    lines += _table(headers, rows, "lrrrrrrr")
    lines += [
        "",
        f"_Usage read from {report.usage_source}; cache hit rate is cached input tokens over input tokens._",
        "",
    ]
    return lines


def _experiment(report: Report) -> list[str]:
    if not report.experiment:
        return []
    rows = [
        (
            r.experiment or "-",
            r.task or "-",
            "-" if r.repetition is None else r.repetition,
            r.outcome or "-",
            r.config_hash or "-",
            ", ".join(f"{k} {v:.3g}" for k, v in r.scores.items()) or "-",
        )
        for r in report.experiment
    ]
    headers = ["Experiment", "Task", "Repetition", "Outcome", "Config hash", "Scores"]
    note = "Compare the configurations of the experiment with `mastrace compare --experiment NAME`."
    return ["## Experiment", "", *_table(headers, rows, "llrlll"), "", note, ""]


def _config(report: Report) -> list[str]:
    if report.config is None:
        return []
    flat = flatten(report.config)
    packages = [k for k in flat if k.startswith(_PACKAGES)]
    rows = [
        (f"`{key}`", format_value(value, 100)) for key, value in flat.items() if not key.startswith(_PACKAGES)
    ]
    lines = [
        "## Appendix: Configuration Snapshot",
        "",
        f"The `{semconv.MASTRACE_CONFIG}` attribute of the session span, flattened.",
        "",
    ]
    lines += _table(["Key", "Value"], rows)
    if packages:
        lines += ["", f"_`{_PACKAGES[:-1]}` lists {len(packages)} installed package versions (not shown)._"]
    return [*lines, ""]


def render_markdown(report: Report) -> str:
    """The markdown text of ANALYSIS_REPORT.md for `report`."""
    sections = (
        _header,
        _summary,
        _overview,
        _phases,
        _rounds,
        _flow,
        _slowest,
        _tools,
        _errors,
        _recovery,
        _usage,
        _experiment,
        _config,
    )
    lines: list[str] = []
    for section in sections:
        lines += section(report)
    return "\n".join(lines).rstrip() + "\n"
