"""Statistics for experiments: plain inputs in, plain numbers out, no third-party dependency.

Every function takes the values of one configuration as a mapping *task id → the values of its
repetitions* (`{"t1": [1.0, 0.0, 1.0], "t2": [0.5]}`). `None` is a missing value (a run that
recorded no such score) and is skipped; a task left with no value is left out. Repeated runs of one
task are not independent, so intervals come from a *cluster bootstrap over tasks*: each resample
draws tasks with replacement and keeps all of a drawn task's repetitions.

Definitions (each is what the tests recompute independently with numpy/scipy):

- `mean`: the mean over tasks of each task's mean (every task weighs the same, however many
  repetitions it has).
- Bootstrap: `random.Random(seed)`; each of `resamples` draws is `rng.choices(range(n), k=n)` over
  the tasks sorted by id; the interval is the percentiles `(1 - level) / 2` and `(1 + level) / 2` of
  the resampled means, interpolated linearly (numpy's default). Fewer than two tasks: no interval.
- `paired_difference`: over the tasks both sides scored, the mean of `mean_t(candidate) -
  mean_t(baseline)`, its interval by the same bootstrap over those shared tasks.
- `pass_at_k`: the unbiased estimator of Chen et al. (2021), `1 - C(n - c, k) / C(n, k)` per task with
  `n` repetitions of which `c` passed, averaged over tasks with at least `k` repetitions;
  `pass_hat_k` (pass^k: all `k` pass) is `C(c, k) / C(n, k)`, averaged the same way.
- `flip_rate`: the share of pairs of repetitions of one task whose values differ.
- `variance_split`: *within* = the mean over tasks (with ≥ 2 values) of each task's sample variance
  (ddof 1); *between* = the sample variance (ddof 1) of the task means (≥ 2 tasks).
- `quantile`: linear interpolation between order statistics (numpy's default method).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "DEFAULT_RESAMPLES",
    "Estimate",
    "PairedDifference",
    "VarianceSplit",
    "bootstrap_means",
    "flip_rate",
    "mean_interval",
    "paired_difference",
    "pass_at_k",
    "pass_hat_k",
    "quantile",
    "task_means",
    "variance_split",
]

DEFAULT_RESAMPLES = 2000
"""Bootstrap resamples used unless told otherwise."""

Values = Mapping[str, Sequence[float | bool | None]]
"""Task id → the values of its repetitions (None = missing)."""


@dataclass(frozen=True)
class Estimate:
    """A mean with its bootstrap interval (None when fewer than two tasks give one)."""

    mean: float | None
    low: float | None
    high: float | None
    tasks: int
    values: int


@dataclass(frozen=True)
class PairedDifference:
    """Candidate minus baseline over the tasks both scored, with its bootstrap interval."""

    difference: float | None
    low: float | None
    high: float | None
    shared_tasks: int

    @property
    def excludes_zero(self) -> bool:
        """True when the whole interval lies on one side of zero."""
        if self.low is None or self.high is None:
            return False
        return self.low > 0 or self.high < 0


@dataclass(frozen=True)
class VarianceSplit:
    """Variance within a task across repetitions vs between the tasks' means."""

    within: float | None
    between: float | None

    @property
    def within_share(self) -> float | None:
        """The within-task part of the total (None when unknown or both are zero)."""
        if self.within is None or self.between is None or self.within + self.between == 0:
            return None
        return self.within / (self.within + self.between)


def _present(values: Sequence[float | bool | None]) -> list[float]:
    return [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]


def task_means(values: Values) -> dict[str, float]:
    """Each task's mean over its present values, tasks sorted by id (tasks with none left out)."""
    out = {}
    for task in sorted(values):
        present = _present(values[task])
        if present:
            out[task] = math.fsum(present) / len(present)
    return out


def quantile(values: Sequence[float], q: float) -> float | None:
    """The `q` quantile (0..1) by linear interpolation, as numpy's default; None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    position = (len(ordered) - 1) * q
    lower = math.floor(position)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)


def bootstrap_means(points: Sequence[float], *, seed: int, resamples: int = DEFAULT_RESAMPLES) -> list[float]:
    """The means of `resamples` draws with replacement from `points` (see the module's definition)."""
    rng = random.Random(seed)
    n = len(points)
    choices = rng.choices
    return [sum(choices(points, k=n)) / n for _ in range(resamples)]


def _interval(
    points: Sequence[float], seed: int, resamples: int, level: float
) -> tuple[float | None, float | None]:
    if len(points) < 2:
        return None, None
    means = bootstrap_means(points, seed=seed, resamples=resamples)
    return quantile(means, (1 - level) / 2), quantile(means, (1 + level) / 2)


def mean_interval(
    values: Values, *, seed: int = 0, resamples: int = DEFAULT_RESAMPLES, level: float = 0.95
) -> Estimate:
    """The mean over tasks and its cluster-bootstrap interval."""
    means = task_means(values)
    points = list(means.values())
    count = sum(len(_present(v)) for v in values.values())
    if not points:
        return Estimate(None, None, None, 0, 0)
    low, high = _interval(points, seed, resamples, level)
    return Estimate(math.fsum(points) / len(points), low, high, len(points), count)


def paired_difference(
    candidate: Values,
    baseline: Values,
    *,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = 0.95,
) -> PairedDifference:
    """`candidate - baseline` over the tasks both have values for, with its cluster-bootstrap interval."""
    a, b = task_means(candidate), task_means(baseline)
    shared = sorted(set(a) & set(b))
    points = [a[t] - b[t] for t in shared]
    if not points:
        return PairedDifference(None, None, None, 0)
    low, high = _interval(points, seed, resamples, level)
    return PairedDifference(math.fsum(points) / len(points), low, high, len(points))


def _passes(values: Sequence[float | bool | None]) -> tuple[int, int]:
    present = _present(values)
    return len(present), sum(1 for v in present if v)


def pass_at_k(values: Values, k: int) -> float | None:
    """Unbiased pass@k over tasks with at least `k` values (truthy = pass); None when there are none."""
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    per_task = []
    for task in sorted(values):
        n, c = _passes(values[task])
        if n >= k:
            per_task.append(1.0 - math.comb(n - c, k) / math.comb(n, k))
    return math.fsum(per_task) / len(per_task) if per_task else None


def pass_hat_k(values: Values, k: int) -> float | None:
    """pass^k (all of `k` repetitions pass) over tasks with at least `k` values; None when none."""
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    per_task = []
    for task in sorted(values):
        n, c = _passes(values[task])
        if n >= k:
            per_task.append(math.comb(c, k) / math.comb(n, k))
    return math.fsum(per_task) / len(per_task) if per_task else None


def flip_rate(values: Sequence[float | bool | None]) -> float | None:
    """The share of pairs of one task's repetitions whose values differ; None below two values."""
    present = _present(values)
    n = len(present)
    if n < 2:
        return None
    differing = sum(1 for i in range(n) for j in range(i + 1, n) if present[i] != present[j])
    return differing / (n * (n - 1) / 2)


def _sample_variance(points: Sequence[float]) -> float:
    mean = math.fsum(points) / len(points)
    return math.fsum((p - mean) ** 2 for p in points) / (len(points) - 1)


def variance_split(values: Values) -> VarianceSplit:
    """Within-task variance (across repetitions) and between-task variance (of the task means)."""
    per_task = [_present(values[t]) for t in sorted(values)]
    within = [_sample_variance(p) for p in per_task if len(p) >= 2]
    means = list(task_means(values).values())
    return VarianceSplit(
        math.fsum(within) / len(within) if within else None,
        _sample_variance(means) if len(means) >= 2 else None,
    )
