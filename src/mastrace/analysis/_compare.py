"""Compare the configurations of an experiment: which wins, by how much, and whether it is real.

SQL gathers three kinds of rows from `records` (the same on a local store and on a `--source`):

- *runs*: spans with `mastrace.experiment.task_id` (an `experiment_run()` root, a MASEval
  repetition), or root spans with `mastrace.experiment.name` only (`configure(experiment=...)`;
  the task is then `massgen.task` when there is one). Each run's tokens and cost are summed over
  its subtree with the rules of `mastrace runs` (round spans' own usage, else the LLM calls').
- *evaluations*: `gen_ai.evaluation.result` spans; each belongs to the run that is its parent, else
  to the only run of its trace (a score recorded later by trace id alone).
- *configurations*: the distinct snapshots per configuration hash and task.

A run is *failed* when its span has an error status or its outcome is `error`; a failed run is
counted in `runs` and in the failure rate, and its scores (if any were recorded) count like any
other; a run without a value for a score is missing for that score. The arithmetic is `_stats`'.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .. import semconv
from ..pipeline._snapshots_on_spans import hashed_value
from . import _stats
from ._diff import compare_configs, flatten
from ._kinds import format_cost
from ._store import TraceStore, _usage_sum
from ._texttable import text_table

__all__ = [
    "Comparison",
    "ConfigSummary",
    "ExperimentSummary",
    "compare",
    "gather",
    "list_experiments",
    "render_comparison",
    "render_experiments",
    "trace_experiment_runs",
    "trace_scores",
]

_NO_CONFIG = "(no config)"
_NONE = "(none)"
_FAILED_OUTCOMES = ("error", "failed", "failure")


def _attr(key: str) -> str:
    return f"attributes->>'{key}'"


_TASK_SQL = f"coalesce({_attr(semconv.MASTRACE_EXPERIMENT_TASK_ID)}, {_attr(semconv.MASSGEN_TASK)})"
_RUN_WHERE = (
    f"({_attr(semconv.MASTRACE_EXPERIMENT_TASK_ID)} IS NOT NULL OR "
    f"(parent_span_id IS NULL AND {_attr(semconv.MASTRACE_EXPERIMENT_NAME)} IS NOT NULL))"
)

_RUNS_SQL = f"""
WITH RECURSIVE runs AS (
  SELECT trace_id, span_id,
         {_attr(semconv.MASTRACE_EXPERIMENT_NAME)} AS experiment,
         {_TASK_SQL} AS task,
         {_attr(semconv.MASTRACE_EXPERIMENT_TASK_ID)} IS NOT NULL AS has_task,
         TRY_CAST({_attr(semconv.MASTRACE_EXPERIMENT_REPETITION)} AS BIGINT) AS repetition,
         {_attr(semconv.MASTRACE_EXPERIMENT_OUTCOME)} AS outcome,
         {_attr(semconv.MASTRACE_CONFIG_HASH)} AS config_hash,
         duration,
         epoch_us(start_timestamp) AS start_us,
         (otel_status_code = 'ERROR' OR coalesce(is_exception, false)) AS errored,
         {{by}} AS by_value
  FROM {{table}}
  WHERE {_RUN_WHERE}
),
sub(trace_id, run_id, span_id) AS (
  SELECT trace_id, span_id, span_id FROM runs
  UNION ALL
  SELECT r.trace_id, sub.run_id, r.span_id
  FROM {{table}} r JOIN sub ON r.trace_id = sub.trace_id AND r.parent_span_id = sub.span_id
  WHERE r.attributes->>'{semconv.MASTRACE_EXPERIMENT_TASK_ID}' IS NULL
),
usage AS (
  SELECT sub.trace_id AS u_trace, sub.run_id AS u_run,
         {_usage_sum(semconv.MASSGEN_USAGE_INPUT, semconv.GEN_AI_USAGE_INPUT_TOKENS)} AS input_tokens,
         {_usage_sum(semconv.MASSGEN_USAGE_OUTPUT, semconv.GEN_AI_USAGE_OUTPUT_TOKENS)} AS output_tokens,
         coalesce(fsum(TRY_CAST(attributes->>'{semconv.MASSGEN_USAGE_COST}' AS DOUBLE))
                      FILTER (WHERE {{agent}}),
                  fsum(TRY_CAST(attributes->'{semconv.MASTRACE_USAGE}'->>'cost' AS DOUBLE))
                      FILTER (WHERE span_name LIKE '{semconv.SPAN_LLM_PREFIX}%')) AS cost,
         bool_or({_attr(semconv.MASTRACE_COST_UNKNOWN)} = 'true'
                 AND span_name LIKE '{semconv.SPAN_LLM_PREFIX}%') AS cost_unknown
  FROM sub JOIN {{table}} r ON r.trace_id = sub.trace_id AND r.span_id = sub.span_id
  GROUP BY 1, 2
)
SELECT runs.*, usage.input_tokens, usage.output_tokens, usage.cost, usage.cost_unknown
FROM runs LEFT JOIN usage ON usage.u_trace = runs.trace_id AND usage.u_run = runs.span_id
ORDER BY start_us, span_id
"""

_EVALS_SQL = f"""
SELECT trace_id, parent_span_id,
       {_attr(semconv.GEN_AI_EVALUATION_NAME)} AS name,
       TRY_CAST({_attr(semconv.GEN_AI_EVALUATION_SCORE_VALUE)} AS DOUBLE) AS score,
       coalesce(TRY_CAST({_attr(semconv.MASTRACE_EVALUATION_BOOLEAN)} AS BOOLEAN), false) AS boolean
FROM {{table}}
WHERE span_name = '{semconv.GEN_AI_EVALUATION_RESULT}'
ORDER BY start_timestamp, span_id
"""

_CONFIGS_SQL = f"""
SELECT DISTINCT {_attr(semconv.MASTRACE_CONFIG_HASH)} AS config_hash, {_TASK_SQL} AS task,
       {_attr(semconv.MASTRACE_CONFIG)} AS config
FROM {{table}}
WHERE {_RUN_WHERE} AND {_attr(semconv.MASTRACE_CONFIG)} IS NOT NULL
"""

# What a `--source` is asked for: the columns the queries above read, for every span.
_SOURCE_COLUMNS = (
    "trace_id, span_id, parent_span_id, span_name, start_timestamp, end_timestamp, duration, "
    "otel_status_code, is_exception, attributes"
)


# --- gathering ------------------------------------------------------------------------------------
@dataclass
class Run:
    """One run of an experiment, as gathered."""

    trace_id: str
    span_id: str
    experiment: str | None
    task: str
    repetition: int | None
    outcome: str | None
    config_hash: str | None
    group: str
    duration: float | None
    failed: bool
    start_us: int = 0
    input_tokens: float | None = None
    output_tokens: float | None = None
    cost: float | None = None
    cost_unknown: bool = False
    scores: dict[str, float] = field(default_factory=dict)

    @property
    def tokens(self) -> float | None:
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)


@dataclass
class Gathered:
    """The rows `compare` works from."""

    runs: list[Run]
    boolean_scores: set[str]
    configs: dict[str, list[tuple[str, Any]]]
    """Configuration hash → (task, snapshot) for each distinct snapshot."""


_TABLE = "_mastrace_experiment_spans"


def _query(store: TraceStore, sqls: Sequence[str]) -> list[list[dict[str, Any]]]:
    """Each of `sqls` (over `{table}`) on one read of the spans: the store is scanned once, not per query."""
    from ._source import SourceStore, _local_connection, _show_records

    copy = f"CREATE OR REPLACE TEMP TABLE {_TABLE} AS SELECT {_SOURCE_COLUMNS} FROM records"
    if not isinstance(store, SourceStore):
        load_newest = getattr(store, "load_newest", None)
        if load_newest is not None:  # ClickHouse's `otel_traces`: its spans are copied here first
            load_newest(None)
        store.execute(copy)
        try:
            return [store.rows(sql.format(table=_TABLE)) for sql in sqls]
        finally:
            store.execute(f"DROP TABLE IF EXISTS {_TABLE}")
    table = store.client.table(f"SELECT {_SOURCE_COLUMNS} FROM records", "trace_id, start_timestamp, span_id")
    con = _local_connection()
    try:
        _show_records(con, table)
        con.execute(copy)
        out = []
        for sql in sqls:
            relation = con.sql(sql.format(table=_TABLE))
            out.append([dict(zip(relation.columns, row, strict=True)) for row in relation.fetchall()])
        return out
    finally:
        con.close()


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def gather(store: TraceStore, *, experiment: str | None = None, by: str | None = None) -> Gathered:
    """Read the runs, evaluations and configurations of `experiment` (default: every experiment)."""
    from ._kinds import AGENT_SPAN_SQL

    by_sql = f"attributes->>{_sql_text(by)}".replace("{", "{{").replace("}", "}}") if by else "NULL"
    runs_sql = _RUNS_SQL.format(by=by_sql, agent=AGENT_SPAN_SQL, table="{table}")
    run_rows, eval_rows, config_rows = _query(store, [runs_sql, _EVALS_SQL, _CONFIGS_SQL])
    configs: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for row in config_rows:
        try:
            value = json.loads(row["config"])
        except (TypeError, ValueError):
            continue
        configs[row["config_hash"] or _NO_CONFIG].append((str(row["task"]), value))
    # A root named by `configure(experiment=...)` is no run of its own when runs of tasks are inside.
    with_tasks = {row["trace_id"] for row in run_rows if row["has_task"]}
    runs: list[Run] = []
    for row in run_rows:
        if not row["has_task"] and row["trace_id"] in with_tasks:
            continue
        if experiment is not None and row["experiment"] != experiment:
            continue
        runs.append(_run(row, by, configs))
    boolean_scores = _attach_scores(runs, eval_rows)
    return Gathered(runs, boolean_scores, dict(configs))


def _run(row: Mapping[str, Any], by: str | None, configs: Mapping[str, list[tuple[str, Any]]]) -> Run:
    config_hash = row["config_hash"]
    group = config_hash or _NO_CONFIG
    if by:
        value: Any = row["by_value"]
        if value is None:
            snapshots = configs.get(config_hash or _NO_CONFIG)
            if snapshots:
                value = flatten(snapshots[0][1]).get(by)
        group = _NONE if value is None else value if isinstance(value, str) else json.dumps(value)
    outcome = row["outcome"]
    failed = bool(row["errored"]) or (outcome is not None and str(outcome).lower() in _FAILED_OUTCOMES)
    cost = row["cost"]
    return Run(
        trace_id=row["trace_id"],
        span_id=row["span_id"],
        experiment=row["experiment"],
        task=str(row["task"]) if row["task"] is not None else f"trace {row['trace_id'][:8]}",
        repetition=row["repetition"],
        outcome=outcome,
        config_hash=config_hash,
        group=group,
        duration=row["duration"],
        failed=failed,
        start_us=int(row["start_us"] or 0),
        input_tokens=row["input_tokens"],
        output_tokens=row["output_tokens"],
        cost=cost,
        cost_unknown=bool(row["cost_unknown"]),
    )


def _attach_scores(runs: list[Run], eval_rows: Iterable[Mapping[str, Any]]) -> set[str]:
    by_span = {(r.trace_id, r.span_id): r for r in runs}
    by_trace: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        by_trace[r.trace_id].append(r)
    values: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    booleans: set[str] = set()
    for row in eval_rows:
        name, score = row["name"], row["score"]
        if name is None or score is None:
            continue
        run = by_span.get((row["trace_id"], row["parent_span_id"]))
        if run is None:
            candidates = by_trace.get(row["trace_id"], [])
            if len(candidates) != 1:
                continue
            run = candidates[0]
        values[(run.trace_id, run.span_id)][name].append(float(score))
        if row["boolean"]:
            booleans.add(name)
    for key, scores in values.items():
        run = by_span[key]
        # Several results of one name on one run (judged twice): their mean.
        run.scores = {name: sum(v) / len(v) for name, v in scores.items()}
    return booleans


_TRACE_SCORES_SQL = f"""
SELECT {_attr(semconv.GEN_AI_EVALUATION_NAME)} AS name,
       avg(TRY_CAST({_attr(semconv.GEN_AI_EVALUATION_SCORE_VALUE)} AS DOUBLE)) AS score
FROM records
WHERE trace_id = ? AND span_name = '{semconv.GEN_AI_EVALUATION_RESULT}'
GROUP BY 1
HAVING name IS NOT NULL AND score IS NOT NULL
ORDER BY 1
"""


def trace_experiment_runs(store: TraceStore, trace_id: str) -> list[dict[str, Any]]:
    """The experiment runs of one trace, each with its scores (`scores`: name → mean)."""
    where = f"trace_id = {_sql_text(trace_id)}"
    runs_sql = _RUNS_SQL.format(by="NULL", agent="false", table="{table}")
    sub = f"(SELECT * FROM records WHERE {where})"
    run_rows = store.rows(runs_sql.format(table=sub))
    eval_rows = store.rows(_EVALS_SQL.format(table=sub))
    if any(r["has_task"] for r in run_rows):
        run_rows = [r for r in run_rows if r["has_task"]]
    runs = [_run(r, None, {}) for r in run_rows]
    _attach_scores(runs, eval_rows)
    return [
        {
            "experiment": r.experiment,
            "task": r.task,
            "repetition": r.repetition,
            "outcome": r.outcome,
            "config_hash": r.config_hash,
            "scores": dict(sorted(r.scores.items())),
        }
        for r in runs
    ]


def trace_scores(store: TraceStore, trace_id: str) -> dict[str, float]:
    """The evaluation scores recorded in a trace (the mean of each name's results)."""
    return {row["name"]: row["score"] for row in store.rows(_TRACE_SCORES_SQL, [trace_id])}


# --- the comparison -------------------------------------------------------------------------------
@dataclass
class ScoreSummary:
    """One score of one configuration."""

    name: str
    boolean: bool
    mean: float | None
    low: float | None
    high: float | None
    tasks: int
    values: int
    pass_at_k: dict[int, float | None] = field(default_factory=dict)
    pass_hat_k: dict[int, float | None] = field(default_factory=dict)
    within_task_variance: float | None = None
    between_task_variance: float | None = None
    mean_flip_rate: float | None = None
    flipped_tasks: int = 0


@dataclass
class ConfigSummary:
    """One configuration (or `--by` group) of the experiment."""

    key: str
    config_hashes: list[str]
    experiments: list[str]
    runs: int
    tasks: int
    repetitions_min: int
    repetitions_max: int
    failed: int
    failure_rate: float
    scores: list[ScoreSummary]
    input_tokens: float | None
    output_tokens: float | None
    tokens_per_run: float | None
    cost_total: float | None
    cost_per_run: float | None
    cost_unknown: bool
    duration_p50: float | None
    duration_p95: float | None
    varying_keys: list[str] = field(default_factory=list)
    """Configuration keys whose values differ between repetitions of one task here."""


@dataclass
class TaskScores:
    """The values of one score for one task under one configuration, by repetition."""

    key: str
    task: str
    score: str
    repetitions: list[int | None]
    values: list[float | None]
    flip_rate: float | None
    trace_ids: list[str] = field(default_factory=list)
    """Each repetition's trace (where its run is shown), in the order of `values`."""
    failed: list[bool] = field(default_factory=list)
    """Whether each repetition's run failed, in the order of `values`."""


@dataclass
class BaselineDelta:
    """A configuration against the baseline."""

    key: str
    score: str
    difference: float | None
    low: float | None
    high: float | None
    excludes_zero: bool
    shared_tasks: int
    tokens_per_run_delta: float | None
    cost_per_run_delta: float | None
    changes: list[str] = field(default_factory=list)


@dataclass
class Comparison:
    """What `mastrace compare` reports."""

    experiment: str | None
    by: str | None
    seed: int
    resamples: int
    baseline: str | None
    configs: list[ConfigSummary]
    tasks: list[TaskScores]
    deltas: list[BaselineDelta]

    def to_dict(self) -> dict[str, Any]:
        """As JSON-ready data."""
        return asdict(self)


def _sum(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _by_task(runs: Sequence[Run], score: str) -> dict[str, list[float | None]]:
    out: dict[str, list[float | None]] = defaultdict(list)
    for r in sorted(runs, key=lambda r: (r.task, r.repetition if r.repetition is not None else -1)):
        out[r.task].append(r.scores.get(score))
    return dict(out)


def _score_summary(name: str, boolean: bool, runs: Sequence[Run], seed: int, resamples: int) -> ScoreSummary:
    values = _by_task(runs, name)
    est = _stats.mean_interval(values, seed=seed, resamples=resamples)
    split = _stats.variance_split(values)
    flips = [f for f in (_stats.flip_rate(v) for v in values.values()) if f is not None]
    summary = ScoreSummary(
        name,
        boolean,
        est.mean,
        est.low,
        est.high,
        est.tasks,
        est.values,
        within_task_variance=split.within,
        between_task_variance=split.between,
        mean_flip_rate=sum(flips) / len(flips) if flips else None,
        flipped_tasks=sum(1 for f in flips if f > 0),
    )
    if boolean:
        most = max((sum(v is not None for v in vs) for vs in values.values()), default=0)
        for k in sorted({1, most} - {0}):
            summary.pass_at_k[k] = _stats.pass_at_k(values, k)
            summary.pass_hat_k[k] = _stats.pass_hat_k(values, k)
    return summary


def _varying_keys(snapshots: Sequence[tuple[str, Any]]) -> list[str]:
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for task, config in snapshots:
        by_task[task].append(flatten(config))
    keys: set[str] = set()
    for flats in by_task.values():
        if len(flats) < 2:
            continue
        for key in set().union(*flats):
            seen = {json.dumps(f.get(key), sort_keys=True, default=str) for f in flats}
            if len(seen) > 1:
                keys.add(key)
    return sorted(keys)


def _config_summary(
    key: str,
    runs: Sequence[Run],
    scores: Sequence[tuple[str, bool]],
    gathered: Gathered,
    seed: int,
    resamples: int,
) -> ConfigSummary:
    per_task: dict[str, int] = defaultdict(int)
    for r in runs:
        per_task[r.task] += 1
    durations = [r.duration for r in runs if r.duration is not None]
    cost_unknown = any(r.cost_unknown for r in runs)
    cost_total = None if cost_unknown else _sum(r.cost for r in runs)
    tokens_total = _sum(r.tokens for r in runs)
    hashes = sorted({r.config_hash for r in runs if r.config_hash})
    varying: set[str] = set()
    for h in hashes:
        varying.update(_varying_keys(gathered.configs.get(h, [])))
    failed = sum(r.failed for r in runs)
    return ConfigSummary(
        key=key,
        config_hashes=hashes,
        experiments=sorted({r.experiment for r in runs if r.experiment}),
        runs=len(runs),
        tasks=len(per_task),
        repetitions_min=min(per_task.values(), default=0),
        repetitions_max=max(per_task.values(), default=0),
        failed=failed,
        failure_rate=failed / len(runs) if runs else 0.0,
        scores=[_score_summary(name, boolean, runs, seed, resamples) for name, boolean in scores],
        input_tokens=_sum(r.input_tokens for r in runs),
        output_tokens=_sum(r.output_tokens for r in runs),
        tokens_per_run=None if tokens_total is None else tokens_total / len(runs),
        cost_total=cost_total,
        cost_per_run=None if cost_total is None else cost_total / len(runs),
        cost_unknown=cost_unknown,
        duration_p50=_stats.quantile(durations, 0.5),
        duration_p95=_stats.quantile(durations, 0.95),
        varying_keys=sorted(varying),
    )


def _representative(gathered: Gathered, summary: ConfigSummary) -> Any:
    for h in summary.config_hashes:
        snapshots = gathered.configs.get(h)
        if snapshots:
            config = snapshots[0][1]
            if isinstance(config, dict):
                config = {k: v for k, v in config.items() if k != "benchmark"}
            return hashed_value(config)
    return None


def _changes(before: Any, after: Any) -> list[str]:
    def show(value: Any) -> str:
        return "-" if value is None else json.dumps(value, ensure_ascii=False, default=str).strip('"')

    return [f"{c.key}: {show(c.before)} → {show(c.after)}" for c in compare_configs(before, after)]


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _pick(key: str, summaries: Sequence[ConfigSummary]) -> ConfigSummary:
    exact = [s for s in summaries if s.key == key]
    if exact:
        return exact[0]
    found = [s for s in summaries if s.key.startswith(key)]
    if len(found) == 1:
        return found[0]
    known = ", ".join(s.key for s in summaries) or "none"
    what = "matches several configurations" if found else "is not a configuration of this experiment"
    raise ValueError(f"--baseline {key!r} {what}; they are: {known}")


def compare(
    gathered: Gathered,
    *,
    experiment: str | None = None,
    by: str | None = None,
    baseline: str | None = None,
    seed: int = 0,
    resamples: int = _stats.DEFAULT_RESAMPLES,
) -> Comparison:
    """Summarise each configuration, each task under it, and each against `baseline` (a key or prefix).

    Raises:
        ValueError: `baseline` names no configuration, or several.
    """
    groups: dict[str, list[Run]] = defaultdict(list)
    for r in gathered.runs:
        groups[r.group].append(r)
    names = sorted({n for r in gathered.runs for n in r.scores})
    scores = [(n, n in gathered.boolean_scores) for n in names]
    summaries = [_config_summary(k, groups[k], scores, gathered, seed, resamples) for k in sorted(groups)]
    tasks: list[TaskScores] = []
    for key in sorted(groups):
        for name in names:
            ordered = sorted(
                groups[key], key=lambda r: (r.task, r.repetition if r.repetition is not None else -1)
            )
            by_task: dict[str, list[Run]] = defaultdict(list)
            for r in ordered:
                by_task[r.task].append(r)
            for task, task_runs in by_task.items():
                values = [r.scores.get(name) for r in task_runs]
                tasks.append(
                    TaskScores(
                        key,
                        task,
                        name,
                        [r.repetition for r in task_runs],
                        values,
                        _stats.flip_rate(values),
                        [r.trace_id for r in task_runs],
                        [r.failed for r in task_runs],
                    )
                )
    comparison = Comparison(experiment, by, seed, resamples, None, summaries, tasks, [])
    if baseline is not None and summaries:
        base = _pick(baseline, summaries)
        comparison.baseline = base.key
        base_config = _representative(gathered, base)
        for summary in summaries:
            if summary is base:
                continue
            changes = _changes(base_config, _representative(gathered, summary))
            for name, _ in scores or [("", False)]:
                diff = (
                    _stats.paired_difference(
                        _by_task(groups[summary.key], name),
                        _by_task(groups[base.key], name),
                        seed=seed,
                        resamples=resamples,
                    )
                    if name
                    else _stats.PairedDifference(None, None, None, 0)
                )
                comparison.deltas.append(
                    BaselineDelta(
                        summary.key,
                        name,
                        diff.difference,
                        diff.low,
                        diff.high,
                        diff.excludes_zero,
                        diff.shared_tasks,
                        _delta(summary.tokens_per_run, base.tokens_per_run),
                        _delta(summary.cost_per_run, base.cost_per_run),
                        changes,
                    )
                )
    return comparison


# --- experiments ----------------------------------------------------------------------------------
@dataclass
class ExperimentSummary:
    """One row of `mastrace experiments`."""

    experiment: str
    runs: int
    configurations: int
    tasks: int
    failed: int
    evaluations: int
    first_start_us: int
    last_start_us: int


def list_experiments(gathered: Gathered) -> list[ExperimentSummary]:
    """One summary per experiment name (runs without one are `(unnamed)`), latest first."""
    groups: dict[str, list[Run]] = defaultdict(list)
    for r in gathered.runs:
        groups[r.experiment or "(unnamed)"].append(r)
    out = []
    for name, runs in groups.items():
        starts = [r.start_us for r in runs]
        out.append(
            ExperimentSummary(
                name,
                len(runs),
                len({r.config_hash for r in runs}),
                len({r.task for r in runs}),
                sum(r.failed for r in runs),
                sum(len(r.scores) for r in runs),
                min(starts, default=0),
                max(starts, default=0),
            )
        )
    out.sort(key=lambda e: e.last_start_us, reverse=True)
    return out


# --- rendering ------------------------------------------------------------------------------------
def _num(value: float | None, digits: int = 3, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _interval(mean: float | None, low: float | None, high: float | None, signed: bool = False) -> str:
    if mean is None:
        return "-"
    if low is None or high is None:
        return _num(mean, signed=signed)
    return f"{_num(mean, signed=signed)} [{_num(low, signed=signed)}, {_num(high, signed=signed)}]"


def _cost(value: float | None, unknown: bool, signed: bool = False) -> str:
    if unknown:
        return "unknown"
    return "-" if value is None else format_cost(value, signed=signed)


def _passes(s: ScoreSummary) -> tuple[str, str]:
    if not s.boolean:
        return "-", "-"
    return (
        " ".join(f"@{k}={_num(v)}" for k, v in s.pass_at_k.items()),
        " ".join(f"^{k}={_num(v)}" for k, v in s.pass_hat_k.items()),
    )


_SUMMARY_HEADERS = (
    "configuration",
    "runs",
    "tasks",
    "reps",
    "failed",
    "score",
    "mean [95% CI]",
    "pass@k",
    "pass^k",
    "flip",
    "var within/between",
    "tokens/run",
    "cost/run",
    "cost total",
    "p50 s",
    "p95 s",
)


def _or_none(scores: list[ScoreSummary]) -> list[ScoreSummary | None]:
    return list(scores) if scores else [None]


def _summary_rows(c: Comparison) -> list[list[str]]:
    rows = []
    for s in c.configs:
        reps = (
            str(s.repetitions_max)
            if s.repetitions_min == s.repetitions_max
            else f"{s.repetitions_min}-{s.repetitions_max}"
        )
        common = [
            s.key,
            str(s.runs),
            str(s.tasks),
            reps,
            f"{s.failed} ({s.failure_rate:.0%})",
        ]
        tail = [
            "-" if s.tokens_per_run is None else f"{s.tokens_per_run:,.0f}",
            _cost(s.cost_per_run, s.cost_unknown),
            _cost(s.cost_total, s.cost_unknown),
            _num(s.duration_p50),
            _num(s.duration_p95),
        ]
        for score in _or_none(s.scores):
            if score is None:
                rows.append([*common, "-", "-", "-", "-", "-", "-", *tail])
                continue
            at, hat = _passes(score)
            flip = (
                "-" if score.mean_flip_rate is None else f"{score.mean_flip_rate:.2f} ({score.flipped_tasks})"
            )
            var = f"{_num(score.within_task_variance, 4)}/{_num(score.between_task_variance, 4)}"
            rows.append(
                [*common, score.name, _interval(score.mean, score.low, score.high), at, hat, flip, var, *tail]
            )
    return rows


_DELTA_HEADERS = (
    "configuration",
    "score",
    "Δ vs baseline [95% CI]",
    "real?",
    "tasks",
    "Δ tokens/run",
    "Δ cost/run",
    "changed",
)


def _delta_rows(c: Comparison) -> list[list[str]]:
    rows = []
    for d in c.deltas:
        rows.append(
            [
                d.key,
                d.score or "-",
                _interval(d.difference, d.low, d.high, signed=True),
                "yes" if d.excludes_zero else "no",
                str(d.shared_tasks),
                "-" if d.tokens_per_run_delta is None else f"{d.tokens_per_run_delta:+,.0f}",
                "-" if d.cost_per_run_delta is None else format_cost(d.cost_per_run_delta, signed=True),
                "; ".join(d.changes) or "-",
            ]
        )
    return rows


_TASK_HEADERS = ("configuration", "task", "score", "by repetition", "flip rate")


def _task_rows(c: Comparison) -> list[list[str]]:
    return [
        [
            t.key,
            t.task,
            t.score,
            " ".join("·" if v is None else f"{v:.3g}" for v in t.values),
            "-" if t.flip_rate is None else f"{t.flip_rate:.2f}",
        ]
        for t in c.tasks
    ]


def _notes(c: Comparison) -> list[str]:
    notes = []
    by_keys: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for s in c.configs:
        if s.varying_keys:
            by_keys[tuple(s.varying_keys)].append(s.key)
    for keys, configs in by_keys.items():
        shown = ", ".join(keys[:12]) + (" …" if len(keys) > 12 else "")
        where = "every configuration" if len(configs) == len(c.configs) > 1 else ", ".join(configs)
        notes.append(f"keys whose values differ between repetitions of one task ({where}): {shown}")
    notes.append(
        f"intervals: cluster bootstrap over tasks, {c.resamples} resamples, seed {c.seed}; "
        "'real?' = the interval of the paired difference excludes 0"
    )
    return notes


def _markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def render_comparison(c: Comparison, fmt: str = "table", *, tasks: bool = False) -> str:
    """The comparison as `table`, `markdown`, `csv` (one row per configuration and score) or `json`."""
    if fmt == "json":
        return json.dumps(c.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n"
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(
            ["configuration", "runs", "tasks", "repetitions_min", "repetitions_max", "failed",
             "failure_rate", "score", "mean", "low", "high", "pass_at_k", "pass_hat_k", "mean_flip_rate",
             "within_task_variance", "between_task_variance", "tokens_per_run", "cost_per_run", "cost_total",
             "duration_p50", "duration_p95"]
        )  # fmt: skip
        for s in c.configs:
            for score in _or_none(s.scores):
                writer.writerow(
                    [s.key, s.runs, s.tasks, s.repetitions_min, s.repetitions_max, s.failed, s.failure_rate]
                    + (
                        [score.name, score.mean, score.low, score.high, json.dumps(score.pass_at_k),
                         json.dumps(score.pass_hat_k), score.mean_flip_rate, score.within_task_variance,
                         score.between_task_variance]
                        if score is not None
                        else [""] * 9
                    )
                    + [s.tokens_per_run, "" if s.cost_unknown else s.cost_per_run,
                       "" if s.cost_unknown else s.cost_total, s.duration_p50, s.duration_p95]
                )  # fmt: skip
        return buffer.getvalue()
    if fmt == "markdown":
        parts = ["## Configurations\n", _markdown_table(_SUMMARY_HEADERS, _summary_rows(c))]
        if c.deltas:
            parts += [
                f"\n## Against the baseline {c.baseline}\n",
                _markdown_table(_DELTA_HEADERS, _delta_rows(c)),
            ]
        if tasks:
            parts += ["\n## Tasks\n", _markdown_table(_TASK_HEADERS, _task_rows(c))]
        parts += ["\n" + "".join(f"- {n}\n" for n in _notes(c))]
        return "".join(parts)
    if not c.configs:
        return (
            "no experiment runs found (runs carry mastrace.experiment.* attributes: see experiment_run())\n"
        )
    parts = [text_table(_SUMMARY_HEADERS, _summary_rows(c), align="lrrrrlllllrrrrrr")]
    if c.deltas:
        parts += [
            f"\nagainst the baseline {c.baseline}:\n",
            text_table(_DELTA_HEADERS, _delta_rows(c), max_cell=80),
        ]
    if tasks:
        parts += ["\n", text_table(_TASK_HEADERS, _task_rows(c))]
    parts += ["\n" + "".join(f"note: {n}\n" for n in _notes(c))]
    return "".join(parts)


def render_experiments(rows: Sequence[ExperimentSummary], fmt: str = "table") -> str:
    """`mastrace experiments` as a table or JSON."""
    if fmt == "json":
        return json.dumps([asdict(r) for r in rows], indent=2, ensure_ascii=False) + "\n"
    if not rows:
        return "no experiment runs found\n"
    return text_table(
        ("experiment", "runs", "configurations", "tasks", "failed", "scores"),
        [
            [
                r.experiment,
                str(r.runs),
                str(r.configurations),
                str(r.tasks),
                str(r.failed),
                str(r.evaluations),
            ]
            for r in rows
        ],
        align="lrrrrr",
    )
