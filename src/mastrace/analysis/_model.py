"""The data of an analysis report: plain dataclasses, built by `build_report` and rendered elsewhere."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "AnswerRow",
    "ErrorRow",
    "FlowRow",
    "OperationRow",
    "Overview",
    "PhaseRow",
    "RecoveryRow",
    "Report",
    "RoundRow",
    "ToolRow",
    "UsageRow",
    "VoteRow",
]


@dataclass
class Overview:
    """Session-level facts: when, how long, who took part, and the totals."""

    trace_id: str
    root_name: str
    service_name: str | None
    task: str | None
    start_us: int
    end_us: int
    duration: float
    agents: list[str]
    winner: str | None
    answers: int
    votes: int
    spans: int
    errors: int
    input_tokens: float | None = None
    output_tokens: float | None = None
    total_cost: float | None = None
    cost_unknown_models: list[str] = field(default_factory=list)
    """Models of calls without a known price: the total cost is unknown when this is not empty."""
    discarded_votes: int = 0
    """Votes MassGen dropped because a new answer came after them (not in `votes`)."""
    final_answer: bool = False
    config_hash: str | None = None


@dataclass
class PhaseRow:
    """Agent time spent in one phase (initial_answer, voting, presentation, ...)."""

    phase: str
    count: int
    avg: float
    max: float
    total: float
    percent: float


@dataclass
class RoundRow:
    """One agent round or presentation with its tool wall time and non-tool time (seconds)."""

    agent: str | None
    segment: int
    round: int | None
    round_type: str
    outcome: str | None
    start_us: int
    end_us: int
    duration: float
    tool_wall: float
    non_tool: float
    tool_spans: int
    tool_errors: int


@dataclass
class FlowRow:
    """A coordination record (event, answer, vote, winner, final answer) in time order."""

    offset: float
    name: str
    agent: str | None
    detail: str


@dataclass
class AnswerRow:
    """An answer an agent submitted."""

    label: str | None
    agent: str | None
    offset: float


@dataclass
class VoteRow:
    """A vote an agent cast, with the reason it gave."""

    voter: str | None
    voted_for: str | None
    label: str | None
    reason: str | None
    offset: float
    discarded: bool = False
    """MassGen dropped the vote (a new answer came after it): it is not counted."""


@dataclass
class OperationRow:
    """A slow span inside the session (rounds and the root excluded)."""

    name: str
    agent: str | None
    duration: float
    offset: float
    percent: float


@dataclass
class ToolRow:
    """Calls of one tool span name: a framework's retry of a call (`mastrace.tool.attempt` > 1) is
    counted in `retries`, not as a call, and a call is an error when its last attempt failed."""

    name: str
    calls: int
    errors: int
    total: float
    avg: float
    max: float
    retries: int = 0


@dataclass
class ErrorRow:
    """A span that failed, recorded an exception, ended with outcome error or was interrupted."""

    name: str
    agent: str | None
    kind: str
    type: str | None
    message: str | None
    offset: float


@dataclass
class RecoveryRow:
    """What one agent recovered from, or did not: the SDK's HTTP retries inside its LLM calls,
    MassGen's enforcement retries (a reply without a valid tool call asked again), its restarts
    (a new answer made the agent start over), its timeouts and the retries of its tool calls."""

    agent: str
    http_retries: int = 0
    enforcement_retries: int = 0
    restarts: int = 0
    timeouts: int = 0
    tool_retries: int = 0
    """A framework's retries of a tool call (MassGen calls an MCP server again when a call raised)."""


@dataclass
class UsageRow:
    """Tokens and cost of one agent; `cache_hit_rate` is cached input over input, in percent."""

    agent: str | None
    spans: int
    time: float
    input: float | None
    output: float | None
    reasoning: float | None
    cached: float | None
    cost: float | None
    cache_hit_rate: float | None
    cost_unknown_models: list[str] = field(default_factory=list)
    """Models of this agent's calls without a known price (its cost is then unknown)."""


@dataclass
class ExperimentRunRow:
    """A run of an experiment inside the trace (see `mastrace.experiment_run()`), with its scores."""

    experiment: str | None
    task: str | None
    repetition: int | None
    outcome: str | None
    config_hash: str | None
    scores: dict[str, float] = field(default_factory=dict)


@dataclass
class Report:
    """Everything `analyze` reports about one trace.

    Tables list at most `max_rows` rows (see `build_report`); `totals` maps each listed section
    (`rounds`, `flow`, `answers`, `votes`, `tools`, `errors`) to its full row count.
    """

    overview: Overview
    phases: list[PhaseRow] = field(default_factory=list)
    rounds: list[RoundRow] = field(default_factory=list)
    flow: list[FlowRow] = field(default_factory=list)
    answers: list[AnswerRow] = field(default_factory=list)
    votes: list[VoteRow] = field(default_factory=list)
    slowest: list[OperationRow] = field(default_factory=list)
    tools: list[ToolRow] = field(default_factory=list)
    errors: list[ErrorRow] = field(default_factory=list)
    recovery: list[RecoveryRow] = field(default_factory=list)
    """Per agent: HTTP retries, enforcement retries, restarts and timeouts (agents with none left out)."""
    usage: list[UsageRow] = field(default_factory=list)
    usage_source: str | None = None
    config: Any = None
    experiment: list[ExperimentRunRow] = field(default_factory=list)
    """The experiment runs in the trace (empty when the trace belongs to no experiment)."""
    totals: dict[str, int] = field(default_factory=dict)
    generated_at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return asdict(self)
