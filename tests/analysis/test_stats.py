"""Every figure of the experiment statistics against an independent numpy/scipy computation.

The bootstrap's draws are defined in `_stats`' docstring (`random.Random(seed).choices` of task
indices); the tests draw the same indices and do the arithmetic with numpy, and also check the
interval against scipy's own bootstrap (different draws, so within a tolerance).
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import special, stats

from mastrace.analysis import _stats

SEED = 7
RESAMPLES = 2000

# Unbalanced repetitions, a missing score (None), one task with a single value, a task with no value.
DATA: dict[str, list[float | None]] = {
    "t01": [0.9, 0.7, 0.8],
    "t02": [0.1, 0.3],
    "t03": [0.5, None, 0.6, 0.4],
    "t04": [1.0],
    "t05": [0.0, 0.2, 0.1],
    "t06": [None, None],
    "t07": [0.75, 0.25, 0.5],
    "t08": [0.3, 0.35, 0.4],
}


def _np_task_means(data: dict[str, list[float | None]]) -> tuple[list[str], np.ndarray]:
    tasks = sorted(t for t, v in data.items() if any(x is not None for x in v))
    means = np.array([np.mean([x for x in data[t] if x is not None]) for t in tasks])
    return tasks, means


def _np_interval(points: np.ndarray, seed: int = SEED, level: float = 0.95) -> tuple[float, float]:
    rng = random.Random(seed)
    n = len(points)
    idx = np.array([rng.choices(range(n), k=n) for _ in range(RESAMPLES)])
    boot = points[idx].mean(axis=1)
    low, high = np.percentile(boot, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return float(low), float(high)


def test_mean_and_interval_match_numpy_on_the_same_draws() -> None:
    _, means = _np_task_means(DATA)
    est = _stats.mean_interval(DATA, seed=SEED, resamples=RESAMPLES)
    low, high = _np_interval(means)
    assert est.mean == pytest.approx(float(means.mean()), abs=1e-12)
    assert est.low == pytest.approx(low, abs=1e-12)
    assert est.high == pytest.approx(high, abs=1e-12)
    assert est.tasks == 7  # t06 has no value
    assert est.values == sum(x is not None for v in DATA.values() for x in v)
    assert est.low is not None and est.high is not None
    assert est.low < est.mean < est.high


def test_interval_is_close_to_scipy_bootstrap_of_task_means() -> None:
    rng = np.random.default_rng(1)
    data = {f"t{i:03}": list(rng.normal(i % 5, 1.0, size=3)) for i in range(60)}
    _, means = _np_task_means(data)  # type: ignore[arg-type]
    ref = stats.bootstrap(
        (means,), np.mean, n_resamples=20000, method="percentile", random_state=np.random.default_rng(2)
    ).confidence_interval
    est = _stats.mean_interval(data, seed=SEED, resamples=20000)  # type: ignore[arg-type]
    width = ref.high - ref.low
    assert est.low == pytest.approx(ref.low, abs=0.05 * width)
    assert est.high == pytest.approx(ref.high, abs=0.05 * width)


def test_same_seed_same_interval_other_seed_other_interval() -> None:
    a = _stats.mean_interval(DATA, seed=3)
    assert a == _stats.mean_interval(DATA, seed=3)
    assert (a.low, a.high) != (
        _stats.mean_interval(DATA, seed=4).low,
        _stats.mean_interval(DATA, seed=4).high,
    )


def test_interval_treats_tasks_as_clusters_not_runs() -> None:
    # Many identical repetitions per task must not narrow the interval: it depends on task means only.
    few = {f"t{i}": [float(i % 3)] for i in range(12)}
    many = {t: v * 20 for t, v in few.items()}
    a = _stats.mean_interval(few, seed=SEED)
    b = _stats.mean_interval(many, seed=SEED)
    assert (a.low, a.high) == (b.low, b.high)


def test_one_task_one_repetition_identical_scores_and_nothing() -> None:
    one_task = _stats.mean_interval({"t": [0.2, 0.4, 0.9]})
    assert one_task.mean == pytest.approx(np.mean([0.2, 0.4, 0.9]))
    assert (one_task.low, one_task.high, one_task.tasks) == (None, None, 1)
    one_rep = {f"t{i}": [float(i)] for i in range(5)}
    est = _stats.mean_interval(one_rep, seed=SEED, resamples=RESAMPLES)
    assert est.mean == 2.0
    assert (est.low, est.high) == pytest.approx(_np_interval(np.arange(5, dtype=float)))
    same = _stats.mean_interval({f"t{i}": [0.5, 0.5] for i in range(6)})
    assert (same.mean, same.low, same.high) == (0.5, 0.5, 0.5)
    assert _stats.mean_interval({}) == _stats.Estimate(None, None, None, 0, 0)
    assert _stats.mean_interval({"t": [None]}) == _stats.Estimate(None, None, None, 0, 0)


def test_paired_difference_over_shared_tasks_matches_numpy() -> None:
    baseline = {"t01": [0.5, 0.6], "t02": [0.2], "t03": [0.9, 0.8, 0.7], "t04": [0.4], "t09": [0.1]}
    shared = sorted(set(baseline) & {t for t, v in DATA.items() if any(x is not None for x in v)})
    cand = np.array([np.mean([x for x in DATA[t] if x is not None]) for t in shared])
    base = np.array([np.mean(baseline[t]) for t in shared])
    d = cand - base
    got = _stats.paired_difference(DATA, baseline, seed=SEED, resamples=RESAMPLES)
    assert got.shared_tasks == len(shared) == 4
    assert got.difference == pytest.approx(float(d.mean()), abs=1e-12)
    assert (got.low, got.high) == pytest.approx(_np_interval(d), abs=1e-12)
    assert got.excludes_zero == (got.low > 0 or got.high < 0)  # type: ignore[operator]


def test_paired_difference_excludes_zero_for_a_clear_gain_only() -> None:
    base = {f"t{i}": [0.1 * (i % 4), 0.1 * (i % 4)] for i in range(20)}
    better = {t: [v + 0.3 for v in vs] for t, vs in base.items()}
    noisy = {t: [v + (0.2 if i % 2 else -0.2) for v in vs] for i, (t, vs) in enumerate(sorted(base.items()))}
    assert _stats.paired_difference(better, base).excludes_zero
    assert _stats.paired_difference(better, base).difference == pytest.approx(0.3)
    assert not _stats.paired_difference(noisy, base).excludes_zero
    assert _stats.paired_difference(base, {}).shared_tasks == 0
    assert not _stats.paired_difference(base, {}).excludes_zero


BOOLS: dict[str, list[bool | None]] = {
    "a": [True, False, True, True],
    "b": [False, False, False],
    "c": [True, True, True],
    "d": [True, None, False],  # a failed run without a score: missing, so 2 values
    "e": [False, True, False, False, True],
}


def _np_pass(data: dict[str, list[bool | None]], k: int, hat: bool) -> float:
    per_task = []
    for v in data.values():
        vals = [x for x in v if x is not None]
        n, c = len(vals), sum(vals)
        if n < k:
            continue
        if hat:
            per_task.append(special.comb(c, k, exact=True) / special.comb(n, k, exact=True))
        else:
            per_task.append(1 - special.comb(n - c, k, exact=True) / special.comb(n, k, exact=True))
    return float(np.mean(per_task))


@pytest.mark.parametrize("k", [1, 2, 3])
def test_pass_at_k_and_pass_hat_k_match_scipy_comb(k: int) -> None:
    assert _stats.pass_at_k(BOOLS, k) == pytest.approx(_np_pass(BOOLS, k, hat=False), abs=1e-12)
    assert _stats.pass_hat_k(BOOLS, k) == pytest.approx(_np_pass(BOOLS, k, hat=True), abs=1e-12)


def test_pass_at_k_edges() -> None:
    # pass@1 is the mean pass rate per task; pass@k by brute force over k-subsets for a small case.
    assert _stats.pass_at_k(BOOLS, 1) == pytest.approx(
        np.mean([np.mean([x for x in v if x is not None]) for v in BOOLS.values()])
    )
    assert _stats.pass_at_k({"a": [True, False]}, 3) is None
    assert _stats.pass_hat_k({"a": [True, True]}, 2) == 1.0
    with pytest.raises(ValueError):
        _stats.pass_at_k(BOOLS, 0)


def test_flip_rate_matches_pairs_and_bool_formula() -> None:
    for v in BOOLS.values():
        vals = [x for x in v if x is not None]
        n, c = len(vals), sum(vals)
        expected = 2 * c * (n - c) / (n * (n - 1))
        assert _stats.flip_rate(v) == pytest.approx(expected)
    assert _stats.flip_rate([0.5, 0.5, 0.7]) == pytest.approx(2 / 3)
    assert _stats.flip_rate([1.0]) is None
    assert _stats.flip_rate([None, 1.0]) is None


def test_variance_split_matches_numpy() -> None:
    got = _stats.variance_split(DATA)
    present = [[x for x in DATA[t] if x is not None] for t in sorted(DATA)]
    within = np.mean([np.var(p, ddof=1) for p in present if len(p) >= 2])
    _, means = _np_task_means(DATA)
    assert got.within == pytest.approx(float(within), abs=1e-12)
    assert got.between == pytest.approx(float(np.var(means, ddof=1)), abs=1e-12)
    assert got.within_share == pytest.approx(float(within / (within + np.var(means, ddof=1))))
    assert _stats.variance_split({"t": [1.0]}) == _stats.VarianceSplit(None, None)
    assert _stats.variance_split({"t": [1.0, 1.0], "u": [1.0, 1.0]}).within_share is None


@pytest.mark.parametrize("q", [0.0, 0.5, 0.95, 1.0])
def test_quantiles_match_numpy_percentile(q: float) -> None:
    values = [3.0, 0.5, 9.25, 1.0, 7.5, 2.0, 2.0]
    assert _stats.quantile(values, q) == pytest.approx(float(np.percentile(values, 100 * q)), abs=1e-12)
    assert _stats.quantile([4.0], q) == 4.0
    assert _stats.quantile([], q) is None


def test_nan_counts_as_missing() -> None:
    est = _stats.mean_interval({"a": [math.nan, 1.0], "b": [0.0]})
    assert est.mean == 0.5
    assert est.values == 2
