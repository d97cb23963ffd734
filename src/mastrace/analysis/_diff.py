"""Compare two runs: their configuration snapshots and their duration, tokens and cost per agent."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from .. import semconv
from ._kinds import format_cost
from ._model import Report
from ._texttable import text_table

__all__ = [
    "AgentDelta",
    "ConfigChange",
    "OutcomeDelta",
    "RunDiff",
    "compare_configs",
    "diff_reports",
    "flatten",
    "render_diff",
]

_MISSING = object()


@dataclass
class ConfigChange:
    """One flattened configuration key that differs between run A and run B."""

    key: str
    change: str  # "added", "removed" or "changed"
    before: Any = None
    after: Any = None


@dataclass
class AgentDelta:
    """Duration (s), tokens (input + output) and cost of one agent (or the whole run) in A and B."""

    agent: str
    duration_a: float | None = None
    duration_b: float | None = None
    tokens_a: float | None = None
    tokens_b: float | None = None
    cost_a: float | None = None
    cost_b: float | None = None
    unknown_a: list[str] = field(default_factory=list)
    """Models without a known price in A (A's cost is then unknown)."""
    unknown_b: list[str] = field(default_factory=list)

    def cost_texts(self) -> tuple[str, str, str]:
        """The costs of A and B and their difference as printed (unknown costs as unknown)."""
        unknown = self.unknown_a or self.unknown_b
        delta = "—" if unknown else _num(self.delta(self.cost_a, self.cost_b), "$", True)
        return format_cost(self.cost_a, self.unknown_a), format_cost(self.cost_b, self.unknown_b), delta

    @staticmethod
    def delta(a: float | None, b: float | None) -> float | None:
        """`b - a`, or None when either side is unknown."""
        return None if a is None or b is None else b - a


@dataclass
class OutcomeDelta:
    """What each run ended with: the winner, answers, votes per agent voted for, and evaluation scores."""

    winner_a: str | None = None
    winner_b: str | None = None
    answers_a: int = 0
    answers_b: int = 0
    votes_a: dict[str, int] = field(default_factory=dict)
    votes_b: dict[str, int] = field(default_factory=dict)
    scores_a: dict[str, float] = field(default_factory=dict)
    """Each evaluation's score (from the GenAI evaluation events; the mean when judged more than once)."""
    scores_b: dict[str, float] = field(default_factory=dict)


@dataclass
class RunDiff:
    """What changed from run A to run B."""

    trace_a: str
    trace_b: str
    hash_a: str | None
    hash_b: str | None
    has_config_a: bool
    has_config_b: bool
    changes: list[ConfigChange] = field(default_factory=list)
    total: AgentDelta = field(default_factory=lambda: AgentDelta("total"))
    agents: list[AgentDelta] = field(default_factory=list)
    outcome: OutcomeDelta = field(default_factory=OutcomeDelta)

    def to_dict(self) -> dict[str, Any]:
        """As JSON-ready data; each row also has its costs as printed (`cost_text_a`, `cost_text_b`)."""
        out = asdict(self)
        for row, delta in zip([out["total"], *out["agents"]], [self.total, *self.agents], strict=True):
            row["cost_text_a"], row["cost_text_b"], row["cost_text_delta"] = delta.cost_texts()
        return out


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Flatten nested dicts and lists into `a.b[0].c` keys; empty containers stay as leaves."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, inner in enumerate(value):
            out.update(flatten(inner, f"{prefix}[{i}]"))
        return out
    return {prefix or "(config)": value}


def compare_configs(a: Any, b: Any) -> list[ConfigChange]:
    """The differences between two configuration snapshots, sorted by key."""
    flat_a = flatten(a) if a is not None else {}
    flat_b = flatten(b) if b is not None else {}
    changes = []
    for key in sorted(set(flat_a) | set(flat_b)):
        before, after = flat_a.get(key, _MISSING), flat_b.get(key, _MISSING)
        if before is _MISSING:
            changes.append(ConfigChange(key, "added", after=after))
        elif after is _MISSING:
            changes.append(ConfigChange(key, "removed", before=before))
        elif before != after or type(before) is not type(after):
            changes.append(ConfigChange(key, "changed", before, after))
    return changes


def _per_agent(report: Report) -> dict[str, tuple[float | None, float | None, float | None, list[str]]]:
    durations: dict[str, float] = {}
    for row in report.rounds:
        durations[row.agent or "-"] = durations.get(row.agent or "-", 0.0) + row.duration
    usage = {u.agent or "-": u for u in report.usage}
    out = {}
    for agent in sorted(set(durations) | set(usage)):
        u = usage.get(agent)
        tokens = (
            None if u is None or (u.input is None and u.output is None) else (u.input or 0) + (u.output or 0)
        )
        out[agent] = (
            durations.get(agent),
            tokens,
            u.cost if u is not None else None,
            list(u.cost_unknown_models) if u is not None else [],
        )
    return out


def _total_tokens(report: Report) -> float | None:
    o = report.overview
    if o.input_tokens is None and o.output_tokens is None:
        return None
    return (o.input_tokens or 0) + (o.output_tokens or 0)


def _votes(report: Report) -> dict[str, int]:
    out: dict[str, int] = {}
    for vote in report.votes:
        if not vote.discarded:
            key = vote.voted_for or "-"
            out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def diff_reports(
    a: Report,
    b: Report,
    *,
    scores_a: dict[str, float] | None = None,
    scores_b: dict[str, float] | None = None,
) -> RunDiff:
    """Compare run A (`a`) with run B (`b`); `scores_*` are their evaluation scores (see `trace_scores`)."""
    result = RunDiff(
        trace_a=a.overview.trace_id,
        trace_b=b.overview.trace_id,
        hash_a=a.overview.config_hash,
        hash_b=b.overview.config_hash,
        has_config_a=a.config is not None,
        has_config_b=b.config is not None,
        changes=compare_configs(a.config, b.config),
        total=AgentDelta(
            "total",
            a.overview.duration,
            b.overview.duration,
            _total_tokens(a),
            _total_tokens(b),
            a.overview.total_cost,
            b.overview.total_cost,
            list(a.overview.cost_unknown_models),
            list(b.overview.cost_unknown_models),
        ),
    )
    result.outcome = OutcomeDelta(
        a.overview.winner,
        b.overview.winner,
        a.overview.answers,
        b.overview.answers,
        _votes(a),
        _votes(b),
        dict(scores_a or {}),
        dict(scores_b or {}),
    )
    agents_a, agents_b = _per_agent(a), _per_agent(b)
    for agent in sorted(set(agents_a) | set(agents_b)):
        da, ta, ca, ua = agents_a.get(agent, (None, None, None, []))
        db, tb, cb, ub = agents_b.get(agent, (None, None, None, []))
        result.agents.append(AgentDelta(agent, da, db, ta, tb, ca, cb, ua, ub))
    return result


def _show(value: Any) -> str:
    if value is _MISSING:
        return "-"
    return json.dumps(value, ensure_ascii=False, default=str)


def _num(value: float | None, kind: str, signed: bool = False) -> str:
    if value is None:
        return "-"
    sign = "+" if signed and value > 0 else ""
    if kind == "s":
        return f"{sign}{value:.3f}"
    if kind == "$":
        return format_cost(value, signed=signed)
    return f"{sign}{value:,.0f}"


def _delta_rows(rows: Iterable[AgentDelta]) -> list[list[str]]:
    out = []
    for r in rows:
        out.append(
            [
                r.agent,
                _num(r.duration_a, "s"),
                _num(r.duration_b, "s"),
                _num(AgentDelta.delta(r.duration_a, r.duration_b), "s", True),
                _num(r.tokens_a, "n"),
                _num(r.tokens_b, "n"),
                _num(AgentDelta.delta(r.tokens_a, r.tokens_b), "n", True),
                *r.cost_texts(),
            ]
        )
    return out


def _config_lines(diff: RunDiff) -> list[str]:
    lines = [f"Configuration ({semconv.MASTRACE_CONFIG})"]
    if not diff.has_config_a and not diff.has_config_b:
        return [*lines, "  neither run recorded a configuration snapshot", ""]
    if diff.hash_a and diff.hash_a == diff.hash_b:
        lines.append(f"  same hash {diff.hash_a}")
    elif diff.hash_a or diff.hash_b:
        lines.append(f"  hash {diff.hash_a or '-'} → {diff.hash_b or '-'}")
    if not diff.changes:
        return [*lines, "  no differences", ""]
    marks = {"added": "+", "removed": "-", "changed": "~"}
    for c in diff.changes:
        if c.change == "changed":
            lines.append(f"  ~ {c.key}: {_show(c.before)} → {_show(c.after)}")
        else:
            lines.append(
                f"  {marks[c.change]} {c.key}: {_show(c.after if c.change == 'added' else c.before)}"
            )
    return [*lines, f"  {len(diff.changes)} difference(s)", ""]


def _outcome_lines(o: OutcomeDelta) -> list[str]:
    lines = []
    if o.winner_a or o.winner_b:
        same = " (same)" if o.winner_a == o.winner_b else ""
        lines.append(f"winner: {o.winner_a or '-'} → {o.winner_b or '-'}{same}")
    if o.answers_a or o.answers_b or o.votes_a or o.votes_b:
        lines.append(f"answers: {o.answers_a} → {o.answers_b}")

        def tally(votes: dict[str, int]) -> str:
            return ", ".join(f"{k} {n}" for k, n in votes.items()) or "none"

        lines.append(f"votes: {tally(o.votes_a)} → {tally(o.votes_b)}")
    for name in sorted(set(o.scores_a) | set(o.scores_b)):
        sa, sb = o.scores_a.get(name), o.scores_b.get(name)
        delta = "" if sa is None or sb is None else f" ({sb - sa:+.3g})"
        show_a = "-" if sa is None else f"{sa:.3g}"
        show_b = "-" if sb is None else f"{sb:.3g}"
        lines.append(f"score {name}: {show_a} → {show_b}{delta}")
    return ["Outcome (A → B)", *(f"  {line}" for line in lines), ""] if lines else []


def render_diff(diff: RunDiff) -> str:
    """The diff as text: config differences, the outcome, then duration, tokens and cost deltas."""
    lines = [
        f"A: {diff.trace_a}",
        f"B: {diff.trace_b}",
        "",
        *_config_lines(diff),
        *_outcome_lines(diff.outcome),
    ]
    headers = [
        "",
        "dur A (s)",
        "dur B (s)",
        "Δ dur",
        "tokens A",
        "tokens B",
        "Δ tokens",
        "cost A ($)",
        "cost B ($)",
        "Δ cost",
    ]
    lines.append("Totals and per-agent deltas (B − A; agent duration is the sum of its rounds)")
    lines.append(text_table(headers, _delta_rows([diff.total, *diff.agents]), align="lrrrrrrrrr").rstrip())
    return "\n".join(lines) + "\n"
