"""The MASEval integration: a small real benchmark (no network) run with `MastraceCallback`."""

from __future__ import annotations

import importlib
import json
import re
import sys
from typing import Any

import pytest
from maseval import (
    AgentAdapter,
    AgentError,
    ChatResponse,
    Environment,
    Evaluator,
    ModelAdapter,
    Task,
)
from opentelemetry import trace
from opentelemetry.trace import StatusCode

import mastrace
from mastrace import semconv
from mastrace.exceptions import ExportError
from mastrace.integrations.maseval import MastraceCallback
from mastrace.testing import CapturedSpans, assert_tree

from .maseval_kit import SingleAgentBenchmark


class EchoModel(ModelAdapter):
    """A model that upper-cases the last message and reports fixed token counts."""

    @property
    def model_id(self) -> str:
        return "echo-1"

    def _chat_impl(
        self,
        messages: list[dict[str, Any]],
        generation_params: Any = None,
        tools: Any = None,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> ChatResponse:
        text = str(messages[-1]["content"])
        return ChatResponse(
            content=text.upper(), usage={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
        )


class EchoAgent(AgentAdapter):
    """An agent that asks the model once, inside a span of its own; the query `fail` breaks it."""

    def _run_agent(self, query: str) -> Any:
        with mastrace.get_tracer().span("agent.echo.run"):
            if query == "fail":
                raise AgentError("the agent refused", component=self.name)
            return self.agent.generate(query)


class ExactMatch(Evaluator):
    def __init__(self, task: Task, environment: Environment, user: Any = None) -> None:
        self.expected = task.evaluation_data.get("expected")

    def filter_traces(self, traces: dict[str, Any]) -> dict[str, Any]:
        return traces

    def __call__(self, traces: dict[str, Any], final_answer: Any = None) -> dict[str, Any]:
        return {"correct": final_answer == self.expected}


class EchoBenchmark(SingleAgentBenchmark):
    """One model, one agent, exact-match scoring."""

    def setup_agents(
        self, agent_data: dict[str, Any], environment: Environment, task: Task, user: Any, seed_generator: Any
    ) -> tuple[list[AgentAdapter], dict[str, AgentAdapter]]:
        model = EchoModel()
        self.register("models", "echo", model)
        agent = EchoAgent(model, "echo")
        return [agent], {"echo": agent}

    def setup_evaluators(
        self, environment: Environment, task: Task, agents: Any, user: Any, seed_generator: Any
    ) -> list[Evaluator]:
        return [ExactMatch(task, environment, user)]

    def get_model_adapter(self, model_id: str, **kwargs: Any) -> ModelAdapter:
        return EchoModel()


def _task(task_id: str, query: str) -> Task:
    return Task(id=task_id, query=query, evaluation_data={"expected": query.upper()})


def _run(tasks: list[Task], callback: MastraceCallback | None = None, **options: Any) -> list[dict[str, Any]]:
    benchmark = EchoBenchmark(callbacks=[callback or MastraceCallback()], progress_bar=False, **options)
    return benchmark.run(tasks, agent_data={"temperature": 0.0})


def test_one_span_per_task_and_repetition(mastrace_spans: CapturedSpans) -> None:
    """A run gives a run span, a task span and one span per repetition, with agent spans inside."""
    _run([_task("t1", "hello")], n_task_repeats=2)
    assert_tree(
        mastrace_spans,
        """
        maseval.run [maseval.benchmark=EchoBenchmark, maseval.n_task_repeats=2]
          maseval.task [maseval.task.id=t1]
            maseval.repetition [maseval.repeat_idx=0, maseval.status=success, gen_ai.conversation.id=t1/0]
              agent.echo.run
              gen_ai.evaluation.result [gen_ai.evaluation.name=correct]
            maseval.repetition [maseval.repeat_idx=1, maseval.status=success, gen_ai.conversation.id=t1/1]
              agent.echo.run
              gen_ai.evaluation.result [gen_ai.evaluation.name=correct]
    """,
        ordered=True,
    )


def test_run_leaves_the_callers_context_unchanged(mastrace_spans: CapturedSpans) -> None:
    """After the run the caller's current span is what it was before."""
    with mastrace.get_tracer().span("experiment") as outer:
        _run([_task("t1", "hello")])
        assert trace.get_current_span() is outer.otel_span
    assert mastrace_spans.parent_of(mastrace_spans.one("maseval.run")).name == "experiment"


def test_repetition_carries_the_config_snapshot(mastrace_spans: CapturedSpans) -> None:
    """Each repetition span has MASEval's collected config, without its volatile fields."""
    _run([_task("t1", "hello")])
    config = mastrace_spans.attributes("maseval.repetition")[semconv.MASTRACE_CONFIG]
    assert config["models"]["echo"]["model_id"] == "echo-1"
    assert "metadata" not in config and "gathered_at" not in config["models"]["echo"]


def test_config_hash_is_stable_across_runs(mastrace_spans: CapturedSpans) -> None:
    """The same benchmark run twice gives the same config hash, although timestamps differ."""
    _run([_task("t1", "hello")])
    _run([_task("t1", "hello")])
    hashes = {
        s.attributes[semconv.MASTRACE_CONFIG_HASH] for s in mastrace_spans.by_name("maseval.repetition")
    }
    assert len(hashes) == 1 and re.fullmatch(r"[0-9a-f]{16}", hashes.pop())


def test_repetitions_and_tasks_of_one_configuration_share_one_hash(mastrace_spans: CapturedSpans) -> None:
    """Task ids, repetition indices and derived seeds stay in the snapshot but out of the hash."""
    _run([_task("t1", "hello"), _task("t2", "bye")], n_task_repeats=3, seed=11)
    spans = mastrace_spans.by_name("maseval.repetition")
    assert len(spans) == 6
    assert len({s.attributes[semconv.MASTRACE_CONFIG_HASH] for s in spans}) == 1  # type: ignore[index]
    kept = {json.dumps(json.loads(s.attributes[semconv.MASTRACE_CONFIG])["seeding"]) for s in spans}  # type: ignore[arg-type, index]
    assert len(kept) == 6  # each repetition's task id and index are kept in its snapshot
    _run([_task("t1", "hello")], seed=12)  # another global seed: another configuration
    assert (
        len(
            {s.attributes[semconv.MASTRACE_CONFIG_HASH] for s in mastrace_spans.by_name("maseval.repetition")}
        )
        == 2
    )  # type: ignore[index]


def test_repetition_carries_the_usage_report(mastrace_spans: CapturedSpans) -> None:
    """Each repetition span has that repetition's usage, as MASEval reported it."""
    _run([_task("t1", "hello")])
    usage = mastrace_spans.attributes("maseval.repetition")[semconv.MASTRACE_USAGE]
    assert (usage["models"]["echo"]["input_tokens"], usage["models"]["echo"]["output_tokens"]) == (10, 5)


def test_repetition_carries_the_evaluation(mastrace_spans: CapturedSpans) -> None:
    """The evaluation result of the repetition is on its span."""
    _run([_task("t1", "hello")])
    assert mastrace_spans.attributes("maseval.repetition")["maseval.eval"] == [{"correct": True}]


def test_repetition_is_an_experiment_run_with_evaluation_events(mastrace_spans: CapturedSpans) -> None:
    """Task id, repetition and outcome on the repetition; each evaluator value is an evaluation event."""
    benchmark = EchoBenchmark(callbacks=[MastraceCallback(experiment="echo-exp")], progress_bar=False)
    benchmark.run([_task("t1", "hello"), _task("t2", "fail")], agent_data={})
    reps = {
        s.attributes[semconv.MASTRACE_EXPERIMENT_TASK_ID]: s
        for s in mastrace_spans.by_name("maseval.repetition")
    }  # type: ignore[index]
    assert reps["t1"].attributes[semconv.MASTRACE_EXPERIMENT_OUTCOME] == "success"  # type: ignore[index]
    assert reps["t2"].attributes[semconv.MASTRACE_EXPERIMENT_OUTCOME] == "agent_error"  # type: ignore[index]
    assert {s.attributes[semconv.MASTRACE_EXPERIMENT_NAME] for s in reps.values()} == {"echo-exp"}  # type: ignore[index]
    evals = mastrace_spans.by_name(semconv.GEN_AI_EVALUATION_RESULT)
    assert len(evals) == 1  # the failed repetition was not evaluated
    assert evals[0].parent.span_id == reps["t1"].context.span_id  # type: ignore[union-attr]
    assert evals[0].attributes[semconv.GEN_AI_EVALUATION_NAME] == "correct"  # type: ignore[index]
    assert evals[0].attributes[semconv.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0  # type: ignore[index]
    assert evals[0].attributes[semconv.MASTRACE_EVALUATION_BOOLEAN] is True  # type: ignore[index]


def test_failed_repetition_is_an_error(mastrace_spans: CapturedSpans) -> None:
    """A repetition whose agent fails records the status, the error and an error status."""
    _run([_task("t1", "fail")])
    span = mastrace_spans.one("maseval.repetition")
    assert span.attributes["maseval.status"] == "agent_error"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "agent_error: AgentError: [echo] the agent refused"
    event = next(e for e in span.events if e.name == "exception")
    assert event.attributes["exception.type"] == "AgentError"


def test_task_and_run_count_statuses(mastrace_spans: CapturedSpans) -> None:
    """The task span is an error when a repetition failed; the run span counts statuses."""
    _run([_task("ok", "hello"), _task("bad", "fail")])
    failed = next(
        s for s in mastrace_spans.by_name("maseval.task") if s.attributes["maseval.task.id"] == "bad"
    )
    assert failed.status.status_code is StatusCode.ERROR
    assert mastrace_spans.attributes("maseval.run")["maseval.status_counts"] == {
        "success": 1,
        "agent_error": 1,
    }


def test_parallel_workers_nest_agent_spans_in_their_repetition(mastrace_spans: CapturedSpans) -> None:
    """With a thread pool, each agent span is a child of the repetition of its own task."""
    _run([_task(f"t{i}", f"q{i}") for i in range(4)], num_workers=2)
    agents = mastrace_spans.by_name("agent.echo.run")
    assert len(agents) == 4
    for span in agents:
        repetition = mastrace_spans.parent_of(span)
        task = mastrace_spans.parent_of(repetition)
        assert repetition.name == "maseval.repetition"
        assert repetition.attributes["maseval.task.id"] == task.attributes["maseval.task.id"]


def test_close_ends_spans_left_open_by_a_fail_fast_run(mastrace_spans: CapturedSpans) -> None:
    """When `run()` raises, `close(exc)` ends the open spans as errors and restores the context."""
    callback = MastraceCallback()
    with pytest.raises(AgentError):
        try:
            _run([_task("t1", "fail")], callback, fail_on_task_error=True)
        except AgentError as exc:
            callback.close(exc)
            raise
    assert sorted(mastrace_spans.names()) == [
        "agent.echo.run",
        "maseval.repetition",
        "maseval.run",
        "maseval.task",
    ]
    assert mastrace_spans.one("maseval.run").status.status_code is StatusCode.ERROR
    assert not trace.get_current_span().get_span_context().is_valid


def test_missing_maseval_raises_export_error_with_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the `maseval` package the integration fails with an install hint."""
    monkeypatch.setitem(sys.modules, "maseval", None)
    monkeypatch.delitem(sys.modules, "mastrace.integrations.maseval")
    with pytest.raises(ExportError, match=r"pip install 'mastrace\[maseval\]'"):
        importlib.import_module("mastrace.integrations.maseval")
