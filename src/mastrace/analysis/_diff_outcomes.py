"""What happened differently in two runs: the winner, the votes, the answers, each agent's outcome
per round, and an aligned comparison of the two span trees (added, removed, slower, faster,
costlier, cheaper spans).

Spans are matched by name pattern and position: under matched parents, the i-th child of a pattern
in run A is matched with the i-th child of that pattern in run B, where the pattern is the span's
name with its numbers (and hex ids) replaced by `#` (`agent.agent_a.round_3` → `agent.agent_a.round_#`).
A subtree only one run has is one `added` or `removed` row (with the count of spans it holds).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from .. import semconv
from ._graph import build_graph
from ._kinds import format_cost
from ._spans import SpanRow, loads_as

__all__ = [
    "OutcomeDiff",
    "RoundOutcome",
    "TreeChange",
    "diff_outcomes",
    "read_outcome_diff",
    "render_outcome_diff",
]

_NUMBERS: Final = re.compile(r"\b[0-9a-f]{8,}\b|\d+")
_ROUND: Final = re.compile(r"round_(\d+)$")
SLOWER_RATIO: Final = 1.25
"""A matched span is slower (faster) when it took this many times as long (as short) in B…"""
SLOWER_MIN_S: Final = 0.005
"""…and at least this much longer (shorter) in seconds."""
COSTLIER_RATIO: Final = 1.10
"""A matched span is costlier (cheaper) when its cost grew (fell) by this factor."""
MAX_TREE_ROWS: Final = 200


@dataclass
class RoundOutcome:
    """One agent's outcome in one round of A and of B (`None`: that run had no such round)."""

    agent: str
    round: str
    outcome_a: str | None = None
    outcome_b: str | None = None
    voted_for_a: str | None = None
    voted_for_b: str | None = None

    @property
    def changed(self) -> bool:
        return (self.outcome_a, self.voted_for_a) != (self.outcome_b, self.voted_for_b)


@dataclass
class TreeChange:
    """A span (or subtree) that differs between the runs' trees."""

    path: str
    """The names from the root (run A's, else B's), with the occurrence among siblings of one
    pattern when there are several: `<session> / <round> / <LLM call> [2]`."""
    change: str  # "added", "removed", "slower", "faster", "costlier", "cheaper"
    name_a: str | None = None
    name_b: str | None = None
    duration_a: float | None = None
    duration_b: float | None = None
    cost_a: float | None = None
    cost_b: float | None = None
    spans: int = 1
    """Spans in the subtree (for `added` and `removed`)."""
    span_id_a: str | None = None
    span_id_b: str | None = None


@dataclass
class OutcomeDiff:
    """Winner, votes, answers, per-round outcomes and the aligned span trees of runs A and B."""

    winner_a: str | None = None
    winner_b: str | None = None
    votes_a: dict[str, int] = field(default_factory=dict)
    """`"voter → agent"` → count of counted votes in A."""
    votes_b: dict[str, int] = field(default_factory=dict)
    discarded_a: int = 0
    discarded_b: int = 0
    answers_a: dict[str, int] = field(default_factory=dict)
    """Agent → answers given in A."""
    answers_b: dict[str, int] = field(default_factory=dict)
    rounds: list[RoundOutcome] = field(default_factory=list)
    tree: list[TreeChange] = field(default_factory=list)
    matched: int = 0
    """Spans matched in both trees."""
    unchanged: int = 0
    """Matched spans without a notable change."""
    tree_rows_left_out: int = 0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["winner_changed"] = self.winner_a != self.winner_b
        return out


def _pattern(name: str) -> str:
    return _NUMBERS.sub("#", name)


def _cost(span: SpanRow) -> float | None:
    a = span.attributes
    value = a.get(semconv.MASSGEN_USAGE_COST)
    if value is None:
        record = a.get(semconv.MASTRACE_USAGE)
        record = loads_as(record, {}) if isinstance(record, str) else record
        value = record.get("cost") if isinstance(record, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _vote_counts(
    trace_id: str, spans: Sequence[SpanRow]
) -> tuple[str | None, dict[str, int], int, dict[str, int]]:
    graph = build_graph(trace_id, spans)
    votes = {f"{e.source} → {e.target}": e.count for e in graph.edges if e.kind == "vote"}
    discarded = sum(e.count for e in graph.edges if e.kind == "vote_discarded")
    answers = {n.id: n.answers for n in graph.nodes if n.kind == "agent" and n.answers}
    return graph.winner, votes, discarded, answers


def _round_outcomes(spans: Sequence[SpanRow]) -> dict[tuple[str, str], tuple[str | None, str | None]]:
    out: dict[tuple[str, str], tuple[str | None, str | None]] = {}
    for span in spans:
        if not span.name.startswith(semconv.SPAN_AGENT_PREFIX):
            continue
        a = span.attributes
        agent = a.get(semconv.MASSGEN_AGENT_ID) or a.get(semconv.GEN_AI_AGENT_ID)
        if not isinstance(agent, str):
            continue
        number = a.get(semconv.MASSGEN_ROUND)
        m = _ROUND.search(span.name)
        label = (
            "presentation"
            if span.name.endswith(".presentation")
            else str(number)
            if number is not None
            else m.group(1)
            if m
            else "?"
        )
        outcome = a.get(semconv.MASSGEN_OUTCOME)
        voted = a.get(semconv.MASSGEN_VOTED_FOR)
        if label == "presentation" and outcome is None:
            outcome = "winner" if a.get(semconv.MASSGEN_IS_WINNER) is True else "presented"
        out[(agent, label)] = (
            str(outcome) if outcome is not None else None,
            str(voted) if voted is not None else None,
        )
    return out


def _round_key(key: tuple[str, str]) -> tuple[str, int, str]:
    agent, label = key
    return (agent, int(label) if label.isdigit() else 1_000_000, label)


class _Tree:
    def __init__(self, spans: Sequence[SpanRow]) -> None:
        ids = {s.span_id for s in spans}
        self.children: dict[str | None, list[SpanRow]] = {}
        for s in sorted(spans, key=lambda s: (s.start_us, s.end_us, s.span_id)):
            parent = s.parent_span_id if s.parent_span_id in ids else None
            self.children.setdefault(parent, []).append(s)
        self._sizes: dict[str, int] = {}

    def size(self, span: SpanRow) -> int:
        if span.span_id not in self._sizes:
            self._sizes[span.span_id] = 1 + sum(self.size(c) for c in self.children.get(span.span_id, []))
        return self._sizes[span.span_id]


def _align(diff: OutcomeDiff, ta: _Tree, tb: _Tree, pa: str | None, pb: str | None, path: str) -> None:
    kids_a = ta.children.get(pa, []) if pa is not None or path == "" else []
    kids_b = tb.children.get(pb, []) if pb is not None or path == "" else []
    by_a: dict[str, list[SpanRow]] = {}
    by_b: dict[str, list[SpanRow]] = {}
    order: list[str] = []
    for s in kids_a:
        p = _pattern(s.name)
        if p not in by_a and p not in by_b:
            order.append(p)
        by_a.setdefault(p, []).append(s)
    for s in kids_b:
        p = _pattern(s.name)
        if p not in by_a and p not in by_b:
            order.append(p)
        by_b.setdefault(p, []).append(s)
    for p in order:
        list_a, list_b = by_a.get(p, []), by_b.get(p, [])
        count = max(len(list_a), len(list_b))
        seen: dict[str, int] = {}
        names_a, names_b = Counter(s.name for s in list_a), Counter(s.name for s in list_b)
        for i in range(count):
            a = list_a[i] if i < len(list_a) else None
            b = list_b[i] if i < len(list_b) else None
            shown = a.name if a is not None else b.name if b is not None else p
            seen[shown] = seen.get(shown, 0) + 1
            repeated = names_a[shown] > 1 or names_b[shown] > 1
            step = f"{shown} [{seen[shown]}]" if repeated else shown
            here = f"{path} / {step}" if path else step
            if a is None and b is not None:
                diff.tree.append(
                    TreeChange(
                        here,
                        "added",
                        None,
                        b.name,
                        None,
                        b.duration,
                        None,
                        _cost(b),
                        tb.size(b),
                        None,
                        b.span_id,
                    )
                )
                continue
            if b is None and a is not None:
                diff.tree.append(
                    TreeChange(
                        here, "removed", a.name, None, a.duration, None, _cost(a), None, ta.size(a), a.span_id
                    )
                )
                continue
            assert a is not None and b is not None
            diff.matched += 1
            changes = []
            if b.duration >= a.duration * SLOWER_RATIO and b.duration - a.duration >= SLOWER_MIN_S:
                changes.append("slower")
            elif a.duration >= b.duration * SLOWER_RATIO and a.duration - b.duration >= SLOWER_MIN_S:
                changes.append("faster")
            ca, cb = _cost(a), _cost(b)
            if ca is not None and cb is not None:
                if cb > ca * COSTLIER_RATIO and cb > 0:
                    changes.append("costlier")
                elif ca > cb * COSTLIER_RATIO and ca > 0:
                    changes.append("cheaper")
            if not changes:
                diff.unchanged += 1
            for change in changes:
                diff.tree.append(
                    TreeChange(
                        here, change, a.name, b.name, a.duration, b.duration, ca, cb, 1, a.span_id, b.span_id
                    )
                )
            _align(diff, ta, tb, a.span_id, b.span_id, here)


def diff_outcomes(
    trace_a: str, spans_a: Sequence[SpanRow], trace_b: str, spans_b: Sequence[SpanRow]
) -> OutcomeDiff:
    """Compare what happened in run A (`spans_a`, with attributes) and run B."""
    diff = OutcomeDiff()
    diff.winner_a, diff.votes_a, diff.discarded_a, diff.answers_a = _vote_counts(trace_a, spans_a)
    diff.winner_b, diff.votes_b, diff.discarded_b, diff.answers_b = _vote_counts(trace_b, spans_b)
    rounds_a, rounds_b = _round_outcomes(spans_a), _round_outcomes(spans_b)
    for key in sorted(set(rounds_a) | set(rounds_b), key=_round_key):
        oa, va = rounds_a.get(key, (None, None))
        ob, vb = rounds_b.get(key, (None, None))
        diff.rounds.append(RoundOutcome(key[0], key[1], oa, ob, va, vb))
    _align(diff, _Tree(spans_a), _Tree(spans_b), None, None, "")
    # Whole subtrees first, then the largest time and cost changes.
    rank = {"added": 0, "removed": 0, "slower": 1, "faster": 1, "costlier": 1, "cheaper": 1}

    def weight(c: TreeChange) -> float:
        if c.change in ("added", "removed"):
            return -float(c.spans)
        if c.change in ("costlier", "cheaper"):
            return -abs((c.cost_b or 0) - (c.cost_a or 0)) * 1000
        return -abs((c.duration_b or 0) - (c.duration_a or 0))

    diff.tree.sort(key=lambda c: (rank[c.change], weight(c)))
    if len(diff.tree) > MAX_TREE_ROWS:
        diff.tree_rows_left_out = len(diff.tree) - MAX_TREE_ROWS
        diff.tree = diff.tree[:MAX_TREE_ROWS]
    return diff


def _votes_text(votes: dict[str, int]) -> str:
    return ", ".join(f"{k}{f' ×{n}' if n > 1 else ''}" for k, n in sorted(votes.items())) or "-"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}s"


def render_outcome_diff(diff: OutcomeDiff) -> str:
    """The outcome diff as text: winner, votes, answers, rounds, then the span trees' differences."""
    mark = "  (changed)" if diff.winner_a != diff.winner_b else ""
    lines = ["What happened (A → B)", f"  winner: {diff.winner_a or '-'} → {diff.winner_b or '-'}{mark}"]
    lines.append(f"  votes A: {_votes_text(diff.votes_a)}")
    lines.append(f"  votes B: {_votes_text(diff.votes_b)}")
    if diff.discarded_a or diff.discarded_b:
        lines.append(f"  discarded votes: {diff.discarded_a} → {diff.discarded_b}")
    agents = sorted(set(diff.answers_a) | set(diff.answers_b))
    if agents:
        answers = ", ".join(f"{a} {diff.answers_a.get(a, 0)} → {diff.answers_b.get(a, 0)}" for a in agents)
        lines.append(f"  answers: {answers}")
    changed = [r for r in diff.rounds if r.changed]
    if diff.rounds:
        lines.append(f"  rounds: {len(diff.rounds) - len(changed)} alike, {len(changed)} different")
    for r in changed:

        def side(outcome: str | None, voted: str | None) -> str:
            if outcome is None:
                return "(no round)"
            return f"{outcome} {voted}" if voted else outcome

        before, after = side(r.outcome_a, r.voted_for_a), side(r.outcome_b, r.voted_for_b)
        lines.append(f"    {r.agent} round {r.round}: {before} → {after}")
    lines.append("")
    lines.append(
        f"Span trees (matched by name pattern and position): {diff.matched} matched, "
        f"{diff.unchanged} alike, {len(diff.tree) + diff.tree_rows_left_out} difference(s)"
    )
    for c in diff.tree:
        if c.change == "added":
            lines.append(f"  + {c.path}  ({c.spans} span(s))")
        elif c.change == "removed":
            lines.append(f"  - {c.path}  ({c.spans} span(s))")
        elif c.change in ("slower", "faster"):
            lines.append(f"  ~ {c.path}  {c.change}: {_seconds(c.duration_a)} → {_seconds(c.duration_b)}")
        else:
            lines.append(f"  ~ {c.path}  {c.change}: {format_cost(c.cost_a)} → {format_cost(c.cost_b)}")
    if diff.tree_rows_left_out:
        lines.append(f"  … {diff.tree_rows_left_out} more (the largest are shown)")
    return "\n".join(lines) + "\n"


def read_outcome_diff(store: Any, trace_a: str, trace_b: str) -> OutcomeDiff:
    """`diff_outcomes` of two runs of a `TraceStore`."""
    return diff_outcomes(trace_a, store.spans(trace_a), trace_b, store.spans(trace_b))
