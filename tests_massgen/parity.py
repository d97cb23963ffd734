"""The same figures from three sources, per coordination turn: what the loopback server handed out
(the ledger), what MassGen wrote in its log folder, and what mastrace stored.

`test_parity.py` prints the side-by-side table of each scenario:
`.venv-massgen/bin/python -m pytest -s tests_massgen/test_parity.py`.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .conftest import Run, query

FIELDS = (
    "input tokens",
    "output tokens",
    "cost ($)",
    "cost unknown for",
    "LLM calls",
    "LLM calls, usage unknown",
    "rounds",
    "answers",
    "votes counted",
    "votes discarded",
    "winner",
    "agent errors",
    "HTTP errors",
    "HTTP retries",
    "enforcement retries",
    "MCP calls",
    "MCP errors",
    "MCP retries",
    "timeouts",
    "finish reason",
    "rounds cut short",
    "rounds without outcome",
    "turn failed",
)


@dataclass
class Figures:
    """One source's figures for one turn (None: the source does not say)."""

    values: dict[str, Any] = field(default_factory=dict)
    by_agent: dict[str, dict[str, Any]] = field(default_factory=dict)


def ledger_figures(run: Run, models: dict[str, str]) -> list[Figures]:
    agent_of = {model: f"agent_{x}" for x, model in models.items()}
    out = []
    for calls in run.ledger.turns():
        served = [c for c in calls if c["status"] == 200]
        fig = Figures()
        fig.values.update(
            {
                "input tokens": sum(c["prompt_tokens"] for c in served),
                "output tokens": sum(c["completion_tokens"] for c in served),
                "LLM calls": len(calls),
                "answers": sum(1 for c in served if c["kind"] == "new_answer"),
                "HTTP errors": sum(1 for c in calls if c["status"] >= 400),
                "MCP calls": sum(1 for c in served if str(c["kind"]).endswith("multiply")),
            }
        )
        for call in served:
            row = fig.by_agent.setdefault(agent_of[call["model"]], {"input": 0, "output": 0})
            row["input"] += call["prompt_tokens"]
            row["output"] += call["completion_tokens"]
        out.append(fig)
    return out


def massgen_figures(run: Run) -> list[Figures]:
    out = []
    for folder in run.massgen_turns():
        metrics = _json(folder / "metrics_summary.json")  # not written for a failed turn
        status = _json(folder / "status.json")
        events = _json(folder / "coordination_events.json").get("events", [])
        kinds = Counter(e["event_type"] for e in events)
        agents = status.get("agents", {})
        fig = Figures()
        totals = metrics.get("totals", {})
        fig.values.update(
            {
                "input tokens": totals.get("input_tokens"),
                "output tokens": totals.get("output_tokens"),
                "cost ($)": totals.get("estimated_cost"),
                "LLM calls": metrics.get("api_timing", {}).get("total_calls"),
                "rounds": metrics.get("rounds", {}).get("total_rounds"),
                "answers": kinds["new_answer"],
                "votes counted": sum((status.get("results", {}).get("votes") or {}).values()),
                "votes discarded": kinds["vote_ignored"],
                "winner": status.get("results", {}).get("winner"),
                "agent errors": sum(1 for a in agents.values() if a.get("error")),
                "enforcement retries": sum(
                    (a.get("reliability") or {}).get("total_enforcement_retries", 0) for a in agents.values()
                ),
                "MCP calls": metrics.get("tools", {}).get("total_calls"),
                "MCP errors": metrics.get("tools", {}).get("total_failures"),
                "timeouts": kinds["agent_timeout"],
                "finish reason": status.get("finish_reason"),
                "turn failed": status.get("finish_reason") not in ("completed", None),
            }
        )
        for agent, data in metrics.get("agents", {}).items():
            usage = data.get("token_usage", {})
            fig.by_agent[agent] = {
                "input": usage.get("input_tokens"),
                "output": usage.get("output_tokens"),
                "cost": usage.get("estimated_cost"),
            }
        out.append(fig)
    return out


def _json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


def spans(store: Path) -> list[dict[str, Any]]:
    rows = query(
        store,
        "SELECT trace_id, span_id, parent_span_id, span_name, attributes::VARCHAR AS attributes, "
        "otel_events::VARCHAR AS events, otel_status_code AS status, otel_status_message AS status_message, "
        "is_exception, exception_type FROM records ORDER BY start_timestamp",
    )
    for row in rows:
        row["attributes"] = json.loads(str(row["attributes"]))
        row["events"] = json.loads(str(row["events"])) if row["events"] else []
    return rows


def mastrace_figures(rows: list[dict[str, Any]]) -> list[Figures]:
    sessions = [r for r in rows if r["span_name"] == "coordination.session"]
    out = []
    for session in sessions:
        mine = [r for r in rows if r["trace_id"] == session["trace_id"]]
        rounds = [r for r in mine if r["span_name"].startswith("agent.")]
        llm = [r for r in mine if r["span_name"].startswith("llm.")]
        votes = [r for r in mine if r["span_name"].startswith("Agent vote:")]
        winners = [r for r in mine if r["span_name"].startswith("Winner selected:")]
        mcp = [r for r in mine if r["span_name"].startswith("mcp.")]
        retries = [r for r in mcp if int(r["attributes"].get("mastrace.tool.attempt", 1)) > 1]
        attrs = session["attributes"]
        fig = Figures()
        unknown = sorted(
            {m for r in llm if r["attributes"].get("mastrace.cost.unknown") for m in r["attributes"].get(
                "mastrace.cost.unknown_models", [])}
        )  # fmt: skip
        fig.values.update(
            {
                "input tokens": attrs.get("massgen.usage.input"),
                "output tokens": attrs.get("massgen.usage.output"),
                "cost ($)": attrs.get("massgen.usage.cost"),
                "cost unknown for": ", ".join(unknown) or "-",
                "LLM calls": sum(
                    1 + sum(1 for e in r["events"] if e["name"] == "mastrace.http.retry") for r in llm
                ),
                "LLM calls, usage unknown": sum(
                    1 for r in llm if r["attributes"].get("mastrace.usage.unknown") is True
                ),
                "rounds": len(rounds),
                "answers": sum(1 for r in mine if r["span_name"].startswith("Agent answer:")),
                "votes counted": sum(1 for v in votes if not v["attributes"].get("massgen.vote.discarded")),
                "votes discarded": sum(1 for v in votes if v["attributes"].get("massgen.vote.discarded")),
                "winner": winners[0]["attributes"].get("massgen.winner") if winners else None,
                "agent errors": len(
                    {r["attributes"].get("massgen.agent_id") for r in rounds if r["is_exception"]}
                ),
                "HTTP errors": sum(
                    sum(1 for e in r["events"] if e["name"] == "mastrace.http.retry")
                    + (r["status"] == "ERROR" and not str(r["status_message"]).startswith("cut off:"))
                    for r in llm
                ),
                "HTTP retries": sum(
                    1 for r in llm for e in r["events"] if e["name"] == "mastrace.http.retry"
                ),
                "enforcement retries": sum(
                    1 for r in rounds for e in r["events"] if e["name"] == "massgen.enforcement"
                ),
                "MCP calls": len(mcp) - len(retries),
                # A retry follows a failed attempt: a call failed when its last attempt did.
                "MCP errors": sum(1 for r in mcp if r["status"] == "ERROR") - len(retries),
                "MCP retries": len(retries),
                "timeouts": sum(1 for r in mine if r["span_name"] == "Coordination event: agent_timeout"),
                "finish reason": attrs.get("massgen.finish_reason"),
                "rounds cut short": sum(
                    1
                    for r in rounds
                    if r["attributes"].get("massgen.outcome") in ("timeout", "interrupted", "cancelled")
                ),
                "rounds without outcome": sum(
                    1 for r in rounds if not r["attributes"].get("massgen.outcome")
                ),
                "turn failed": session["status"] == "ERROR",
            }
        )
        for r in rounds:
            agent = r["attributes"].get("massgen.agent_id")
            row = fig.by_agent.setdefault(agent, {"input": 0, "output": 0, "cost": 0.0})
            row["input"] += int(r["attributes"].get("massgen.usage.input", 0))
            row["output"] += int(r["attributes"].get("massgen.usage.output", 0))
            row["cost"] += float(r["attributes"].get("massgen.usage.cost", 0.0))
        out.append(fig)
    return out


def table(name: str, sources: dict[str, list[Figures]]) -> str:
    """A markdown table: one row per figure and turn, one column per source."""
    turns = max(len(v) for v in sources.values())
    lines = [
        f"**{name}**",
        "",
        "| turn | figure | " + " | ".join(sources) + " |",
        "|---|---|" + "---|" * len(sources),
    ]
    for turn in range(turns):
        for key in FIELDS:
            cells = []
            for figures in sources.values():
                value = figures[turn].values.get(key) if turn < len(figures) else None
                cells.append(
                    "·" if value is None else f"{value:.6f}" if isinstance(value, float) else str(value)
                )
            lines.append(f"| {turn + 1} | {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
