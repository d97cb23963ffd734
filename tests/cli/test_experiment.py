"""Runs know their experiment (name, task, repetition, configuration hash, outcome), and evaluation
results are `gen_ai.evaluation.result` events under the run they judge, also from another process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import mastrace
from mastrace import semconv
from mastrace.analysis import TraceStore
from mastrace.testing import CapturedSpans, capture_spans

from .conftest import MASTRACE, clean_env


def test_each_run_is_its_own_trace_with_task_repetition_and_outcome(mastrace_spans: CapturedSpans) -> None:
    """A run is a new trace whose root carries the experiment fields, linked to the span around it."""
    with mastrace.get_tracer().span("benchmark") as outer:
        for rep in range(2):
            with (
                mastrace.experiment_run("t1", repetition=rep, experiment="exp-a"),
                mastrace.get_tracer().span("agent.work"),
            ):
                pass
        with pytest.raises(RuntimeError), mastrace.experiment_run("t2", experiment="exp-a"):
            raise RuntimeError("boom")
    runs = mastrace_spans.by_name(semconv.SPAN_EXPERIMENT_RUN)
    assert len({r.context.trace_id for r in runs}) == 3  # type: ignore[union-attr]
    assert all(r.parent is None for r in runs)
    assert all(r.links[0].context.span_id == outer.span_context.span_id for r in runs)  # type: ignore[union-attr]
    got = [
        (
            r.attributes[semconv.MASTRACE_EXPERIMENT_NAME],  # type: ignore[index]
            r.attributes[semconv.MASTRACE_EXPERIMENT_TASK_ID],  # type: ignore[index]
            r.attributes[semconv.MASTRACE_EXPERIMENT_REPETITION],  # type: ignore[index]
            r.attributes[semconv.MASTRACE_EXPERIMENT_OUTCOME],  # type: ignore[index]
        )
        for r in runs
    ]
    assert got == [("exp-a", "t1", 0, "success"), ("exp-a", "t1", 1, "success"), ("exp-a", "t2", 0, "error")]
    work = mastrace_spans.by_name("agent.work")
    assert [w.parent.span_id for w in work] == [r.context.span_id for r in runs[:2]]  # type: ignore[union-attr]
    assert mastrace_spans.parent_of(mastrace_spans.one("benchmark")) is None


def test_the_hash_groups_runs_of_one_configuration() -> None:
    """Per-run values stay in the snapshot but out of the hash; a changed setting changes it."""

    def config(task: str, rep: int, model: str) -> dict[str, object]:
        return {
            "agents": {"a": {"model": model, "task_id": task, "seed": 1000 + rep}},
            "run": {
                "repetition": rep,
                "out_dir": f"/tmp/run-{task}-{rep}",
                "started": "2026-11-27T10:00:0{rep}",
            },
        }

    with capture_spans() as spans:
        for model in ("gpt-4o", "gpt-4o-mini"):
            for task in ("t1", "t2"):
                for rep in range(2):
                    with mastrace.experiment_run(
                        task, repetition=rep, config=config(task, rep, model)
                    ) as run:
                        run.set_outcome("answered")
    runs = spans.by_name(semconv.SPAN_EXPERIMENT_RUN)
    hashes = [r.attributes[semconv.MASTRACE_CONFIG_HASH] for r in runs]  # type: ignore[index]
    assert len(set(hashes[:4])) == 1 and len(set(hashes[4:])) == 1 and hashes[0] != hashes[4]
    kept = json.loads(runs[3].attributes[semconv.MASTRACE_CONFIG])  # type: ignore[index, arg-type]
    assert kept["agents"]["a"] == {"model": "gpt-4o", "task_id": "t2", "seed": 1001}
    assert kept["run"]["out_dir"] == "/tmp/run-t2-1"
    assert {r.attributes[semconv.MASTRACE_EXPERIMENT_OUTCOME] for r in runs} == {"answered"}  # type: ignore[index]


def test_configure_experiment_names_every_root_span_only() -> None:
    """`configure(experiment=...)` (and MASTRACE_EXPERIMENT) puts the name on root spans, not on children."""
    with capture_spans(experiment="nightly") as spans:
        with mastrace.get_tracer().span("root"), mastrace.get_tracer().span("child"):
            pass
        with mastrace.experiment_run("t1"):
            pass
        with mastrace.experiment_run("t2", experiment="explicit"):
            pass
    assert spans.one("root").attributes[semconv.MASTRACE_EXPERIMENT_NAME] == "nightly"  # type: ignore[index]
    assert semconv.MASTRACE_EXPERIMENT_NAME not in spans.one("child").attributes  # type: ignore[operator]
    names = [r.attributes[semconv.MASTRACE_EXPERIMENT_NAME] for r in spans.by_name("experiment.run")]  # type: ignore[index]
    assert names == ["nightly", "explicit"]


def test_experiment_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASTRACE_EXPERIMENT", "from-env")
    with capture_spans() as spans, mastrace.get_tracer().span("root"):
        pass
    assert spans.one("root").attributes[semconv.MASTRACE_EXPERIMENT_NAME] == "from-env"  # type: ignore[index]


def test_configure_repetition_numbers_root_spans_and_runs_given_none() -> None:
    """`configure(repetition=N)` (one process per repetition) puts N on root spans that have no
    repetition of their own, never on children; `experiment_run()` without one takes it."""
    rep = semconv.MASTRACE_EXPERIMENT_REPETITION
    with capture_spans(experiment="e", repetition=2) as spans:
        with mastrace.get_tracer().span("root"), mastrace.get_tracer().span("child"):
            pass
        with mastrace.experiment_run("t1"):
            pass
        with mastrace.experiment_run("t1", repetition=0):
            pass
        with mastrace.get_tracer().span("own", attributes={rep: 7}):
            pass
    assert spans.one("root").attributes[rep] == 2  # type: ignore[index]
    assert rep not in spans.one("child").attributes  # type: ignore[operator]
    assert [r.attributes[rep] for r in spans.by_name("experiment.run")] == [2, 0]  # type: ignore[index]
    assert spans.one("own").attributes[rep] == 7  # type: ignore[index]
    # Once shut down, the next configuration starts without it.
    with capture_spans() as spans, mastrace.experiment_run("t1"):
        pass
    assert spans.one("experiment.run").attributes[rep] == 0  # type: ignore[index]


def test_repetition_from_the_environment_and_bad_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASTRACE_REPETITION", "3")
    with capture_spans() as spans, mastrace.get_tracer().span("root"):
        pass
    assert spans.one("root").attributes[semconv.MASTRACE_EXPERIMENT_REPETITION] == 3  # type: ignore[index]
    for bad in ("-1", "two", "1.5"):
        monkeypatch.setenv("MASTRACE_REPETITION", bad)
        with pytest.raises(mastrace.ConfigError, match="MASTRACE_REPETITION"):
            mastrace.configure(local=False)
    monkeypatch.delenv("MASTRACE_REPETITION")
    for value in (-1, True, "2"):
        with pytest.raises(mastrace.ConfigError, match="repetition"):
            mastrace.configure(local=False, repetition=value)  # type: ignore[arg-type]


def test_evaluations_go_under_the_run_with_the_genai_names(mastrace_spans: CapturedSpans) -> None:
    """Inside a run (even under a nested span) an evaluation is a log-style child of the run's root."""
    with mastrace.experiment_run("t1") as run:
        with mastrace.get_tracer().span("judge"):
            mastrace.record_evaluation("exact_match", score=True, evaluator="em")
        run.record_evaluation(
            "quality",
            score=0.75,
            label="good",
            explanation="clear and short",
            evaluator="judge-gpt",
            evaluator_version="prompt-v3",
            evaluator_type="llm_judge",
        )
    root = mastrace_spans.one(semconv.SPAN_EXPERIMENT_RUN)
    evals = mastrace_spans.by_name(semconv.GEN_AI_EVALUATION_RESULT)
    assert [e.parent.span_id for e in evals] == [root.context.span_id] * 2  # type: ignore[union-attr]
    first, second = (dict(e.attributes or {}) for e in evals)
    assert first[semconv.GEN_AI_EVALUATION_NAME] == "exact_match"
    assert first[semconv.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0
    assert first[semconv.GEN_AI_EVALUATION_SCORE_LABEL] == "pass"
    assert first[semconv.MASTRACE_EVALUATION_BOOLEAN] is True
    assert first[semconv.MASTRACE_EVALUATION_EVALUATOR] == "em"
    assert first[semconv.LOGFIRE_SPAN_TYPE] == "log"
    assert second[semconv.GEN_AI_EVALUATION_SCORE_VALUE] == 0.75
    assert second[semconv.GEN_AI_EVALUATION_SCORE_LABEL] == "good"
    assert second[semconv.GEN_AI_EVALUATION_EXPLANATION] == "clear and short"
    assert semconv.MASTRACE_EVALUATION_BOOLEAN not in second
    assert semconv.MASTRACE_EVALUATION_EVALUATOR_VERSION not in first
    assert (
        second[semconv.MASTRACE_EVALUATION_EVALUATOR],
        second[semconv.MASTRACE_EVALUATION_EVALUATOR_VERSION],
        second[semconv.MASTRACE_EVALUATION_EVALUATOR_TYPE],
    ) == ("judge-gpt", "prompt-v3", "llm_judge")


def test_bad_scores_and_ids_are_refused() -> None:
    with pytest.raises(TypeError, match="score must be a number"):
        mastrace.record_evaluation("x", score="high")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="trace_id must be 32 hex digits"):
        mastrace.record_evaluation("x", score=1, trace_id="abc")
    with pytest.raises(ValueError, match="span_id needs its trace_id"):
        mastrace.record_evaluation("x", score=1, span_id="0" * 15 + "1")


RUN_SCRIPT = """
import mastrace
mastrace.configure(local={store!r}, experiment="judged")
with mastrace.experiment_run("t1", repetition=2) as run:
    print(run.trace_id, format(run.span.span_context.span_id, "016x"))
mastrace.shutdown()
"""

JUDGE_SCRIPT = """
import sys
import mastrace
mastrace.configure(local={store!r}, service_name="judge")
tid, sid = sys.argv[1], sys.argv[2]
mastrace.record_evaluation("judge_score", score=0.4, explanation="meh", trace_id=tid, span_id=sid)
mastrace.record_evaluation("judge_pass", score=False, trace_id=sys.argv[1])
mastrace.shutdown()
"""


def _python(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True, text=True, timeout=120, env=clean_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_judge_in_another_process_attaches_scores_by_trace_id(tmp_path: Path) -> None:
    """Scores recorded later in another process land in the run's trace, queryable in SQL."""
    store = str(tmp_path / "store")
    trace_id, span_id = _python(RUN_SCRIPT.format(store=store)).split()
    _python(JUDGE_SCRIPT.format(store=store), trace_id, span_id)
    with TraceStore(store) as ts:
        rows = ts.rows(
            f"""SELECT trace_id, parent_span_id, service_name,
                       attributes->>'{semconv.GEN_AI_EVALUATION_NAME}' AS name,
                       CAST(attributes->>'{semconv.GEN_AI_EVALUATION_SCORE_VALUE}' AS DOUBLE) AS score,
                       attributes->>'{semconv.GEN_AI_EVALUATION_SCORE_LABEL}' AS label
                FROM records WHERE span_name = '{semconv.GEN_AI_EVALUATION_RESULT}' ORDER BY name"""
        )
        run = ts.rows(
            f"SELECT attributes->>'{semconv.MASTRACE_EXPERIMENT_NAME}' AS name FROM records "
            f"WHERE span_name = '{semconv.SPAN_EXPERIMENT_RUN}'"
        )
    assert run == [{"name": "judged"}]
    assert [(r["trace_id"], r["name"], r["score"], r["label"], r["service_name"]) for r in rows] == [
        (trace_id, "judge_pass", 0.0, "fail", "judge"),
        (trace_id, "judge_score", 0.4, None, "judge"),
    ]
    assert rows[1]["parent_span_id"] == span_id


def test_mastrace_run_experiment_and_repetition_options(tmp_path: Path) -> None:
    """`mastrace run --experiment NAME --repetition N` names and numbers the program's root spans;
    a negative repetition is refused before the program starts."""
    (tmp_path / "app.py").write_text(
        "import mastrace\nwith mastrace.get_tracer().span('app.work'):\n    pass\n"
    )
    done = subprocess.run(
        [str(MASTRACE), "run", "--store", str(tmp_path / "store"), "--instrument", "none",
         "--experiment", "cli-exp", "--repetition", "4", "--", "app.py"],
        capture_output=True, text=True, timeout=600, env=clean_env(), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with TraceStore(str(tmp_path / "store")) as ts:
        rows = ts.rows(
            f"SELECT span_name, attributes->>'{semconv.MASTRACE_EXPERIMENT_NAME}' AS e, "
            f"(attributes->>'{semconv.MASTRACE_EXPERIMENT_REPETITION}')::INT AS r FROM records"
        )
    assert rows == [{"span_name": "app.work", "e": "cli-exp", "r": 4}]
    refused = subprocess.run(
        [str(MASTRACE), "run", "--store", str(tmp_path / "store"), "--repetition", "-1", "--", "app.py"],
        capture_output=True, text=True, timeout=600, env=clean_env(), cwd=tmp_path,
    )  # fmt: skip
    assert refused.returncode == 2 and "--repetition -1" in refused.stderr, refused.stderr


def test_analyze_has_an_experiment_section_for_an_experiment_run(tmp_path: Path) -> None:
    """A run of an experiment gets an Experiment section with its task, repetition, outcome and scores."""
    store = str(tmp_path / "store")
    trace_id, _ = _python(RUN_SCRIPT.format(store=store)).split()
    _python(JUDGE_SCRIPT.format(store=store), trace_id, "0" * 15 + "1")
    done = subprocess.run(
        [str(MASTRACE), "analyze", trace_id, "--store", store, "-o", "-"],
        capture_output=True, text=True, timeout=120, env=clean_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    section = done.stdout.split("## Experiment\n", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith("| judged"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:4] == ["judged", "t1", "2", "success"]
    assert cells[5] == "judge_pass 0, judge_score 0.4"
