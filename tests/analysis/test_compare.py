"""`compare` over a store: every figure against an independent numpy/scipy computation on the data written.

Configuration A's runs are each their own trace (as `experiment_run()` writes them); configuration B's
are nested in one benchmark trace (as the MASEval callback writes them), so the per-run subtree sums
are exercised. The data has a failed run without a score, a score recorded later by trace id alone,
unbalanced repetitions (B has two repetitions of t7), and a missing score.
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import special

from mastrace import semconv
from mastrace.analysis import TraceStore
from mastrace.analysis._compare import compare, gather, list_experiments, render_comparison

from .conftest import TraceWriter

MASTRACE = Path(sys.executable).parent / "mastrace"


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("MASTRACE_", "OTEL_", "LOGFIRE_"))}


SEED = 3
RESAMPLES = 500
TASKS = [f"t{i}" for i in range(8)]
MODELS = {"A": "gpt-4o", "B": "gpt-4o-mini"}


def _config(group: str, task: str, rep: int) -> dict[str, Any]:
    return {
        "agents": {"a": {"model": MODELS[group], "temperature": 0.2, "seed": 100 * rep + int(task[1:])}},
        "task_id": task,
    }


class Expected:
    """What was written, per configuration: (task, rep) → correct, quality, duration, tokens, cost, failed."""

    def __init__(self) -> None:
        self.runs: dict[str, list[dict[str, Any]]] = defaultdict(list)


def _write(path: Path) -> tuple[Expected, dict[str, str]]:
    rng = random.Random(11)
    expected = Expected()
    w = TraceWriter(path, service="bench")
    w.span("bench", "maseval.run", 0, 1_000_000, None)  # B's runs nest under this one trace
    t = 0.0
    for group in ("A", "B"):
        for task in TASKS:
            reps = 2 if (group == "B" and task == "t7") else 3
            for rep in range(reps):
                key = f"{group}-{task}-{rep}"
                duration_ms = 100 + rng.randint(0, 900)
                failed = group == "A" and task == "t3" and rep == 1
                attrs = {
                    semconv.MASTRACE_EXPERIMENT_NAME: "exp",
                    semconv.MASTRACE_EXPERIMENT_TASK_ID: task,
                    semconv.MASTRACE_EXPERIMENT_REPETITION: rep,
                    semconv.MASTRACE_EXPERIMENT_OUTCOME: "error" if failed else "success",
                    semconv.MASTRACE_CONFIG: json.dumps(_config(group, task, rep)),
                    semconv.MASTRACE_CONFIG_HASH: f"hash{group}",
                }
                parent = "bench" if group == "B" else None
                w.span(key, "experiment.run", t, t + duration_ms, parent, **attrs)
                tokens_in, tokens_out = rng.randint(50, 500), rng.randint(5, 50)
                cost = round(tokens_in * 1e-5, 8)
                w.span(
                    key + "-llm",
                    "llm.openai.chat",
                    t + 1,
                    t + 2,
                    key,
                    **{
                        semconv.GEN_AI_USAGE_INPUT_TOKENS: tokens_in,
                        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: tokens_out,
                        semconv.MASTRACE_USAGE: json.dumps({"cost": cost}),
                        # As mastrace writes it: a JSON text named in Logfire's schema, read as an object.
                        semconv.LOGFIRE_JSON_SCHEMA: json.dumps(
                            {"type": "object", "properties": {semconv.MASTRACE_USAGE: {"type": "object"}}}
                        ),
                    },
                )
                row = {"task": task, "rep": rep, "duration": duration_ms / 1000, "failed": failed}
                row.update(tokens=tokens_in + tokens_out, input=tokens_in, cost=cost)
                if not failed:
                    p = 0.8 if group == "A" else 0.4
                    correct = rng.random() < p
                    w.log(
                        key + "-e1", semconv.GEN_AI_EVALUATION_RESULT, t + 3, key, **_eval("correct", correct)
                    )
                    row["correct"] = correct
                    if not (group == "B" and task == "t2" and rep == 0):  # a missing score
                        quality = round(rng.random(), 6)
                        row["quality"] = quality
                        if group == "A" and task == "t0" and rep == 0:
                            pass  # recorded later, by trace id alone (below)
                        else:
                            w.log(
                                key + "-e2",
                                semconv.GEN_AI_EVALUATION_RESULT,
                                t + 4,
                                key,
                                **_eval("quality", quality),
                            )
                expected.runs[group].append(row)
                t += duration_ms + 10
    w.close()
    # A judge in another process, later: the run's trace, a parent span id that is no span of it.
    late = TraceWriter(path, service="judge")
    from opentelemetry import trace as otel_trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    first_a = w.spans["A-t0-0"].get_span_context()
    remote = SpanContext(first_a.trace_id, 0xABCDEF, is_remote=True, trace_flags=TraceFlags(1))
    ctx = otel_trace.set_span_in_context(NonRecordingSpan(remote))
    quality_late = expected.runs["A"][0]["quality"]
    span = late.tracer.start_span(
        semconv.GEN_AI_EVALUATION_RESULT, context=ctx, attributes=_eval("quality", quality_late)
    )
    span.end()
    late.close()
    return expected, {"A": "hashA", "B": "hashB"}


def _eval(name: str, value: bool | float) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        semconv.GEN_AI_EVALUATION_NAME: name,
        semconv.GEN_AI_EVALUATION_SCORE_VALUE: float(value),
    }
    if isinstance(value, bool):
        attrs[semconv.MASTRACE_EVALUATION_BOOLEAN] = True
        attrs[semconv.GEN_AI_EVALUATION_SCORE_LABEL] = "pass" if value else "fail"
    return attrs


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Expected]:
    path = tmp_path_factory.mktemp("compare") / "store"
    expected, _ = _write(path)
    return path, expected


def _per_task(rows: list[dict[str, Any]], score: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if score in r:
            out[r["task"]].append(float(r[score]))
    return dict(out)


def _np_interval(points: np.ndarray) -> tuple[float, float]:
    rng = random.Random(SEED)
    n = len(points)
    idx = np.array([rng.choices(range(n), k=n) for _ in range(RESAMPLES)])
    low, high = np.percentile(points[idx].mean(axis=1), [2.5, 97.5])
    return float(low), float(high)


def _result(path: Path, **kwargs: Any) -> Any:
    with TraceStore(str(path)) as store:
        gathered = gather(store, experiment="exp", by=kwargs.pop("by", None))
    return compare(gathered, experiment="exp", seed=SEED, resamples=RESAMPLES, **kwargs)


def test_every_figure_per_configuration_matches_numpy(experiment: tuple[Path, Expected]) -> None:
    path, expected = experiment
    result = _result(path)
    assert [c.key for c in result.configs] == ["hashA", "hashB"]
    for group, summary in zip("AB", result.configs, strict=True):
        rows = expected.runs[group]
        assert summary.runs == len(rows)
        assert summary.tasks == len(TASKS)
        assert (summary.repetitions_min, summary.repetitions_max) == ((3, 3) if group == "A" else (2, 3))
        assert summary.failed == sum(r["failed"] for r in rows)
        assert summary.failure_rate == pytest.approx(np.mean([r["failed"] for r in rows]))
        assert summary.input_tokens == sum(r["input"] for r in rows)
        assert summary.tokens_per_run == pytest.approx(np.mean([r["tokens"] for r in rows]))
        assert summary.cost_total == pytest.approx(sum(r["cost"] for r in rows))
        assert summary.cost_per_run == pytest.approx(np.mean([r["cost"] for r in rows]))
        durations = [r["duration"] for r in rows]
        assert summary.duration_p50 == pytest.approx(np.percentile(durations, 50))
        assert summary.duration_p95 == pytest.approx(np.percentile(durations, 95))
        scores = {s.name: s for s in summary.scores}
        for name in ("correct", "quality"):
            per_task = _per_task(rows, name)
            means = np.array([np.mean(per_task[t]) for t in sorted(per_task)])
            s = scores[name]
            assert s.mean == pytest.approx(float(means.mean()), abs=1e-12)
            assert (s.low, s.high) == pytest.approx(_np_interval(means), abs=1e-12)
            assert s.values == sum(len(v) for v in per_task.values())
            within = np.mean([np.var(v, ddof=1) for v in per_task.values() if len(v) >= 2])
            assert s.within_task_variance == pytest.approx(float(within))
            assert s.between_task_variance == pytest.approx(float(np.var(means, ddof=1)))
        correct = _per_task(rows, "correct")
        for k in (1, 3):
            eligible = [v for v in correct.values() if len(v) >= k]
            at = np.mean([1 - special.comb(len(v) - sum(v), k) / special.comb(len(v), k) for v in eligible])
            hat = np.mean([special.comb(sum(v), k) / special.comb(len(v), k) for v in eligible])
            assert scores["correct"].pass_at_k[k] == pytest.approx(float(at))
            assert scores["correct"].pass_hat_k[k] == pytest.approx(float(hat))
        assert scores["correct"].boolean and not scores["quality"].boolean


def test_per_task_repetitions_and_flip_rates(experiment: tuple[Path, Expected]) -> None:
    path, expected = experiment
    result = _result(path)
    for group, key in (("A", "hashA"), ("B", "hashB")):
        for task in TASKS:
            cell = next(t for t in result.tasks if t.key == key and t.task == task and t.score == "correct")
            rows = [r for r in expected.runs[group] if r["task"] == task]
            assert cell.repetitions == [r["rep"] for r in rows]
            assert cell.values == [float(r["correct"]) if "correct" in r else None for r in rows]
            # Where each repetition is shown: A's runs are traces of their own, B's nest in one trace.
            assert cell.failed == [r["failed"] for r in rows]
            assert len(cell.trace_ids) == len(rows)
            assert len(set(cell.trace_ids)) == (len(rows) if group == "A" else 1)
            present = [r["correct"] for r in rows if "correct" in r]
            n, c = len(present), sum(present)
            assert cell.flip_rate == (None if n < 2 else pytest.approx(2 * c * (n - c) / (n * (n - 1))))


def test_baseline_paired_difference_and_changed_keys(experiment: tuple[Path, Expected]) -> None:
    path, expected = experiment
    result = _result(path, baseline="hashA")
    assert result.baseline == "hashA"
    deltas = {d.score: d for d in result.deltas}
    for name in ("correct", "quality"):
        a, b = _per_task(expected.runs["A"], name), _per_task(expected.runs["B"], name)
        shared = sorted(set(a) & set(b))
        d = np.array([np.mean(b[t]) - np.mean(a[t]) for t in shared])
        got = deltas[name]
        assert got.shared_tasks == len(shared)
        assert got.difference == pytest.approx(float(d.mean()), abs=1e-12)
        assert (got.low, got.high) == pytest.approx(_np_interval(d), abs=1e-12)
        assert got.excludes_zero == (got.low > 0 or got.high < 0)
        assert got.changes == ["agents.a.model: gpt-4o → gpt-4o-mini"]
    tokens = {g: np.mean([r["tokens"] for r in expected.runs[g]]) for g in "AB"}
    assert deltas["correct"].tokens_per_run_delta == pytest.approx(tokens["B"] - tokens["A"])
    with pytest.raises(ValueError, match="is not a configuration"):
        _result(path, baseline="nope")


def test_grouping_by_a_configuration_key_and_the_varying_keys_note(experiment: tuple[Path, Expected]) -> None:
    path, _ = experiment
    result = _result(path, by="agents.a.model")
    assert [c.key for c in result.configs] == ["gpt-4o", "gpt-4o-mini"]
    assert all(c.varying_keys == ["agents.a.seed"] for c in result.configs)
    assert "agents.a.seed" in render_comparison(result)
    with TraceStore(str(path)) as store:
        (row,) = list_experiments(gather(store))
    assert (row.experiment, row.runs, row.configurations, row.tasks, row.failed) == ("exp", 47, 2, 8, 1)


def _cli(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MASTRACE), "compare", "--store", str(path), "--experiment", "exp", "--seed", str(SEED),
         "--resamples", str(RESAMPLES), *args],
        capture_output=True, text=True, timeout=120, env=clean_env(),
    )  # fmt: skip


def test_the_command_prints_the_same_figures_in_every_format(experiment: tuple[Path, Expected]) -> None:
    path, _ = experiment
    want = _result(path, baseline="hashA").to_dict()
    done = _cli(path, "--baseline", "hashA", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(json.dumps(want, default=str))
    rows = list(csv.DictReader(io.StringIO(_cli(path, "--format", "csv").stdout)))
    assert [(r["configuration"], r["score"]) for r in rows] == [
        ("hashA", "correct"), ("hashA", "quality"), ("hashB", "correct"), ("hashB", "quality")
    ]  # fmt: skip
    assert float(rows[0]["mean"]) == pytest.approx(want["configs"][0]["scores"][0]["mean"])
    markdown = _cli(path, "--format", "markdown", "--baseline", "hashA", "--tasks").stdout
    assert "## Against the baseline hashA" in markdown and "| hashB | t7 | correct |" in markdown
    table = _cli(path, "--baseline", "hashA").stdout
    assert "agents.a.model: gpt-4o → gpt-4o-mini" in table
    bad = _cli(path, "--baseline", "zzz")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "not a configuration" in bad.stderr


def test_compare_and_experiments_through_a_source_equal_the_store(
    experiment: tuple[Path, Expected], tmp_path: Path
) -> None:
    """`--source` (another `mastrace serve`'s Query API) gives the same comparison as the store."""
    from mastrace.serve import start_intake

    path, _ = experiment
    copy = tmp_path / "store"
    shutil.copytree(path, copy)
    server = start_intake(copy, http_port=0, grpc_port=None)
    try:
        url = f"http://127.0.0.1:{server.http_port}"
        for command in (
            ["compare", "--baseline", "hashA", "--format", "json", "--seed", "5"],
            ["experiments"],
        ):
            local = subprocess.run(
                [str(MASTRACE), *command, "--store", str(copy)],
                capture_output=True, text=True, timeout=120, env=clean_env(),
            )  # fmt: skip
            remote = subprocess.run(
                [str(MASTRACE), *command, "--source", url],
                capture_output=True, text=True, timeout=120, env=clean_env(),
            )  # fmt: skip
            assert local.returncode == remote.returncode == 0, local.stderr + remote.stderr
            assert remote.stdout == local.stdout
            assert "hashB" in local.stdout or "exp" in local.stdout
    finally:
        server.stop()
