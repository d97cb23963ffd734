"""Build the analysis report of one trace: plain data, rendered elsewhere (markdown, JSON).

The report covers what a trace can answer: an overview, the phase breakdown, per-round timing by
agent with tool wall time (the union of tool intervals) and non-tool time, the coordination flow
(answers and votes as submitted), the slowest operations, tool calls, errors, and tokens and cost
by agent. It states what agents produced and never judges whether an answer is right.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any, TypeVar

from ._model import (
    AnswerRow,
    ErrorRow,
    ExperimentRunRow,
    FlowRow,
    OperationRow,
    Overview,
    PhaseRow,
    RecoveryRow,
    Report,
    RoundRow,
    ToolRow,
    UsageRow,
    VoteRow,
)
from ._sql import (
    ANSWERS_SQL,
    ERRORS_SQL,
    FLOW_SQL,
    LLM_USAGE_SQL,
    ORPHAN_ROOT_SQL,
    OWNER_SQL,
    PHASES_SQL,
    RECOVERY_SQL,
    REPEATED_ERRORS_SQL,
    ROOT_SQL,
    ROUND_USAGE_SQL,
    ROUNDS_SQL,
    SESSION_SQL,
    SLOWEST_SQL,
    TOOLS_SQL,
    TOTALS_SQL,
    UNKNOWN_COST_SQL,
    VOTES_SQL,
    WRAPPERS_SQL,
    load_trace_sql,
)
from ._store import TraceStore, unknown_models

__all__ = ["MAX_ROWS", "SLOWEST_LIMIT", "build_report"]

PHASE_ORDER = ("initial_answer", "voting", "presentation")
SLOWEST_LIMIT = 10
MAX_ROWS = 500
T = TypeVar("T")


def _json_attr(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _session_attributes(sid: int, store: TraceStore) -> tuple[Any, dict[str, Any]]:
    rows = store.rows(SESSION_SQL, [sid])
    values = (rows[0]["a"] if rows else None) or [None] * 5
    config, config_hash, task, agent_ids, winner = values
    extra = {"hash": config_hash, "task": task, "agent_ids": _json_attr(agent_ids), "winner": winner}
    return _json_attr(config), extra


def _offset(start_us: int, origin_us: int) -> float:
    return (start_us - origin_us) / 1e6


def _agents(listed: Any, seen: list[str] | None) -> list[str]:
    agents = [str(a) for a in listed] if isinstance(listed, (list, tuple)) else []
    return agents + [a for a in (seen or []) if a not in agents]


def _overview(store: TraceStore, trace_id: str) -> tuple[Overview, Any, int, dict[str, int]]:
    root = (store.rows(ROOT_SQL) or store.rows(ORPHAN_ROOT_SQL))[0]
    totals = store.rows(TOTALS_SQL)[0]
    config, extra = _session_attributes(root["sid"], store)
    winner = (
        extra.get("winner")
        or totals["winner_event"]
        or totals["winner_presenter"]
        or totals["winner_final"]
        or totals["winner_event_agent"]
    )
    overview = Overview(
        trace_id=trace_id,
        root_name=root["span_name"],
        service_name=root["service_name"],
        task=extra.get("task"),
        start_us=int(root["start_us"]),
        end_us=int(root["end_us"]),
        duration=float(root["duration"]),
        agents=_agents(extra.get("agent_ids"), totals["agents"]),
        winner=winner,
        answers=int(totals["answers"]),
        votes=int(totals["votes"]),
        discarded_votes=int(totals["discarded_votes"] or 0),
        spans=int(totals["spans"]),
        errors=int(totals["errors"]),
        final_answer=totals["winner_final"] is not None,
        config_hash=extra.get("hash"),
    )
    listed = {
        "rounds": "rounds",
        "flow": "records",
        "answers": "answers",
        "votes": "votes",
        "tools": "tool_names",
        "errors": "issues",
    }
    return overview, config, root["sid"], {name: int(totals[key]) for name, key in listed.items()}


def _phases(store: TraceStore) -> list[PhaseRow]:
    rows = store.rows(PHASES_SQL)
    grand = sum(r["total"] for r in rows) or 0.0

    def order(row: dict[str, Any]) -> tuple[int, int]:
        phase = row["phase"]
        return (PHASE_ORDER.index(phase) if phase in PHASE_ORDER else len(PHASE_ORDER), row["first_start"])

    return [
        PhaseRow(
            r["phase"],
            int(r["count"]),
            r["avg"],
            r["max"],
            r["total"],
            100.0 * r["total"] / grand if grand else 0.0,
        )
        for r in sorted(rows, key=order)
    ]


def _round_row(r: dict[str, Any]) -> RoundRow:
    wall = float(r["tool_wall"])
    return RoundRow(
        agent=r["agent"],
        segment=int(r["segment"]),
        round=r["round"],
        round_type=r["round_type"],
        outcome=r["outcome"],
        start_us=int(r["start_us"]),
        end_us=int(r["end_us"]),
        duration=float(r["duration"]),
        tool_wall=wall,
        non_tool=max(0.0, float(r["duration"]) - wall),
        tool_spans=int(r["tool_spans"]),
        tool_errors=int(r["tool_errors"]),
    )


def _flow_detail(row: dict[str, Any]) -> str:
    parts = []
    if row["winner"]:
        label = f" ({row['answer_label']})" if row["answer_label"] else ""
        parts.append(f"winner {row['winner']}{label}")
    elif row["answer_label"]:
        parts.append(f"answer {row['answer_label']}")
    if row["voted_for"] or row["voted_for_label"]:
        target = row["voted_for"] or ""
        label = f" ({row['voted_for_label']})" if row["voted_for_label"] else ""
        parts.append(f"voted for {target}{label}".strip())
    if row["vote_reason"]:
        parts.append(f"reason: {row['vote_reason']}")
    return "; ".join(parts)


def _usage(store: TraceStore, trace_id: str) -> tuple[list[UsageRow], str | None]:
    rows, source = store.rows(ROUND_USAGE_SQL), "round spans"
    if not any(r["input"] is not None or r["output"] is not None for r in rows):
        rows, source = store.rows(LLM_USAGE_SQL, [trace_id]), "llm spans"
        if not any(r["input"] is not None or r["output"] is not None for r in rows):
            return [], None
    usage = []
    for r in rows:
        rate = 100.0 * r["cached"] / r["input"] if r["input"] and r["cached"] is not None else None
        usage.append(
            UsageRow(
                r["agent"],
                int(r["spans"]),
                float(r["time"] or 0.0),
                r["input"],
                r["output"],
                r["reasoning"],
                r["cached"],
                r["cost"],
                rate,
            )
        )
    return usage, source


def _error_kind(row: dict[str, Any]) -> str:
    if row["interrupted"]:
        return "interrupted"
    if row["is_exception"]:
        return "exception"
    if row["error_outcome"] and not row["error_status"]:
        return "agent outcome"
    return "failed tool call" if row["is_tool"] else "error status"


# Cost totals are rounded to 1e-12 USD, as the SQL rounds them: a float sum's last bits depend on the
# order its terms are added in, which another DuckDB version, thread or page size changes.
_COST_DIGITS = 12


def _sum(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(math.fsum(present), _COST_DIGITS) if present else None


def _listed(store: TraceStore, sql: str, limit: int, make: Callable[[dict[str, Any]], T]) -> list[T]:
    return [make(row) for row in store.rows(sql, [limit])]


def build_report(
    store: TraceStore, trace_id: str, *, slowest: int = SLOWEST_LIMIT, max_rows: int = MAX_ROWS
) -> Report:
    """Analyse one trace of the store.

    Args:
        store: The open store.
        trace_id: A full trace id (see `TraceStore.resolve`).
        slowest: How many of the slowest operations to list.
        max_rows: The most rows listed per table (rounds, coordination flow, answers, votes, tools,
            errors); `Report.totals` has the full counts.

    Raises:
        StoreError: The trace is not in the store.
    """
    # Every query below orders its own output, so DuckDB may build the temp tables in parallel
    # without keeping the scan order (a large part of the cost on big traces).
    store.execute("SET preserve_insertion_order = false")
    try:
        store.execute(load_trace_sql(), [trace_id])
        store.execute(OWNER_SQL)
        store.execute(WRAPPERS_SQL)
        store.execute(REPEATED_ERRORS_SQL)
    finally:
        store.execute("RESET preserve_insertion_order")
    if not store.rows("SELECT 1 AS one FROM mt_spans LIMIT 1"):
        store.require_trace(trace_id, found=False)
    overview, config, root_id, totals = _overview(store, trace_id)
    origin = overview.start_us
    usage, source = _usage(store, trace_id)
    overview.input_tokens = _sum([u.input for u in usage])
    overview.output_tokens = _sum([u.output for u in usage])
    overview.total_cost = _sum([u.cost for u in usage])
    unpriced = {r["agent"]: unknown_models(r["models"]) for r in store.rows(UNKNOWN_COST_SQL, [trace_id])}
    for row in usage:
        row.cost_unknown_models = unpriced.get(row.agent, [])
    overview.cost_unknown_models = sorted({m for models in unpriced.values() for m in models})
    session = overview.duration or 0.0

    def offset(row: dict[str, Any]) -> float:
        return _offset(row["start_us"], origin)

    from ._compare import trace_experiment_runs

    experiment = [ExperimentRunRow(**row) for row in trace_experiment_runs(store, trace_id)]
    return Report(
        overview=overview,
        experiment=experiment,
        phases=_phases(store),
        rounds=_listed(store, ROUNDS_SQL, max_rows, _round_row),
        flow=_listed(
            store, FLOW_SQL, max_rows, lambda r: FlowRow(offset(r), r["name"], r["agent"], _flow_detail(r))
        ),
        answers=_listed(store, ANSWERS_SQL, max_rows, lambda r: AnswerRow(r["label"], r["agent"], offset(r))),
        votes=_listed(
            store,
            VOTES_SQL,
            max_rows,
            lambda r: VoteRow(
                r["voter"], r["voted_for"], r["label"], r["reason"], offset(r), bool(r["discarded"])
            ),
        ),
        slowest=[
            OperationRow(
                r["name"],
                r["agent"],
                r["duration"],
                offset(r),
                100.0 * r["duration"] / session if session else 0.0,
            )
            for r in store.rows(SLOWEST_SQL, [root_id, slowest])
        ],
        tools=_listed(
            store,
            TOOLS_SQL,
            max_rows,
            lambda r: ToolRow(
                r["name"],
                int(r["calls"]),
                int(r["errors"]),
                r["total"],
                r["avg"],
                r["max"],
                int(r["retries"]),
            ),
        ),
        errors=_listed(
            store,
            ERRORS_SQL,
            max_rows,
            lambda r: ErrorRow(
                r["name"], r["agent"], _error_kind(r), r["exception_type"], r["message"], offset(r)
            ),
        ),
        recovery=[
            RecoveryRow(
                str(r["agent"]),
                int(r["http_retries"]),
                int(r["enforcement_retries"]),
                int(r["restarts"]),
                int(r["timeouts"]),
                int(r["tool_retries"]),
            )
            for r in store.rows(RECOVERY_SQL, [trace_id])
        ],
        usage=usage,
        usage_source=source,
        config=config,
        totals=totals,
    )
