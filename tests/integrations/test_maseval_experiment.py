"""A real MASEval experiment, compared by mastrace: two agent configurations × 10 tasks × 3 repetitions.

The agents call a loopback OpenAI-compatible server through the real `openai` client (traced by
mastrace's OpenAI integration); its answers depend on the model, the question and the per-repetition
seed MASEval derives, so some tasks flip between repetitions. mastrace's per-configuration scores and
tokens must equal what is computed from MASEval's own reports.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest
from maseval import AgentAdapter, Environment, Evaluator, ModelAdapter, Task
from maseval.core.model import ChatResponse

from genai_peer import send_json, serve
from mastrace.analysis import TraceStore
from mastrace.analysis._compare import compare, gather
from mastrace.integrations.maseval import MastraceCallback
from mastrace.integrations.openai import instrument_openai, uninstrument_openai
from mastrace.testing import capture_spans

from .maseval_kit import SingleAgentBenchmark

TASKS = 10
REPEATS = 3
SKILL = {"model-a": 0.8, "model-b": 0.45}


def _draw(model: str, question: str, seed: Any) -> float:
    digest = hashlib.sha256(f"{model}|{question}|{seed}".encode()).hexdigest()
    return int(digest[:8], 16) / 0xFFFFFFFF


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
        question = str(body["messages"][-1]["content"])
        right = _draw(body["model"], question, body.get("seed")) < SKILL[body["model"]]
        prompt, completion = 20 + len(question), 1 + int(_draw("len", question, body.get("seed")) * 9)
        reply = {
            "id": "chatcmpl-x",
            "object": "chat.completion",
            "created": 1,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "right" if right else "wrong"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }
        send_json(self, reply)

    def log_message(self, format: str, *args: Any) -> None:
        return None


class OpenAIModel(ModelAdapter):
    """A MASEval model adapter over the real `openai` client."""

    def __init__(self, model: str, base_url: str, seed: int | None) -> None:
        super().__init__(seed=seed)
        self._model = model
        self._client = openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)

    @property
    def model_id(self) -> str:
        return self._model

    def _chat_impl(
        self,
        messages: list[dict[str, Any]],
        generation_params: Any = None,
        tools: Any = None,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> ChatResponse:
        done = self._client.chat.completions.create(model=self._model, messages=messages, seed=self.seed)  # type: ignore[arg-type]
        usage = done.usage
        assert usage is not None
        return ChatResponse(
            content=done.choices[0].message.content,
            usage={
                "input_tokens": usage.prompt_tokens,
                "output_tokens": usage.completion_tokens,
                "total_tokens": usage.total_tokens,
            },
        )


class Solver(AgentAdapter):
    def _run_agent(self, query: str) -> Any:
        return self.agent.generate(query)


class Judge(Evaluator):
    def __init__(self, task: Task, environment: Environment, user: Any = None) -> None:
        pass

    def filter_traces(self, traces: dict[str, Any]) -> dict[str, Any]:
        return traces

    def __call__(self, traces: dict[str, Any], final_answer: Any = None) -> dict[str, Any]:
        return {"correct": final_answer == "right", "verdict": str(final_answer)}


class QABenchmark(SingleAgentBenchmark):
    base_url = ""

    def setup_agents(
        self, agent_data: dict[str, Any], environment: Environment, task: Task, user: Any, seed_generator: Any
    ) -> tuple[list[AgentAdapter], dict[str, AgentAdapter]]:
        model = OpenAIModel(agent_data["model"], self.base_url, seed_generator.derive_seed("model"))
        self.register("models", "main", model)
        agent = Solver(model, "solver")
        return [agent], {"solver": agent}

    def setup_evaluators(
        self, environment: Environment, task: Task, agents: Any, user: Any, seed_generator: Any
    ) -> list[Evaluator]:
        return [Judge(task, environment, user)]

    def get_model_adapter(self, model_id: str, **kwargs: Any) -> ModelAdapter:
        raise NotImplementedError


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[dict[str, Any]]]]:
    store = tmp_path_factory.mktemp("maseval-exp") / "store"
    tasks = [Task(id=f"q{i:02}", query=f"question number {i}?") for i in range(TASKS)]
    reports: dict[str, list[dict[str, Any]]] = {}
    instrument_openai()
    try:
        with serve(_Handler) as base, capture_spans(local=str(store), experiment="qa"):
            QABenchmark.base_url = f"{base}/v1"
            for model in SKILL:
                bench = QABenchmark(
                    callbacks=[MastraceCallback()], progress_bar=False, n_task_repeats=REPEATS, seed=7
                )
                reports[model] = bench.run(tasks, agent_data={"model": model})
    finally:
        uninstrument_openai()
    return store, reports


def _maseval_figures(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-task correctness and total tokens, from MASEval's own reports."""
    by_task: dict[str, list[float]] = defaultdict(list)
    tokens_in = tokens_out = 0
    for r in reports:
        assert r["status"] == "success"
        by_task[r["task_id"]].append(float(r["eval"][0]["correct"]))
        usage = r["usage"]["models"]["main"]
        tokens_in += usage["input_tokens"]
        tokens_out += usage["output_tokens"]
    means = [np.mean(v) for v in by_task.values()]
    flips = [len(set(v)) > 1 for v in by_task.values()]
    return {
        "mean": float(np.mean(means)),
        "in": tokens_in,
        "out": tokens_out,
        "flipped": sum(flips),
        "by_task": by_task,
    }


def test_mastrace_compare_equals_masevals_own_reports(
    experiment: tuple[Path, dict[str, list[dict[str, Any]]]],
) -> None:
    store, reports = experiment
    with TraceStore(str(store)) as ts:
        gathered = gather(ts, experiment="qa", by="models.main.model_id")
    result = compare(gathered, experiment="qa", by="models.main.model_id", baseline="model-a", seed=1)
    assert [c.key for c in result.configs] == ["model-a", "model-b"]
    assert len({h for c in result.configs for h in c.config_hashes}) == 2  # one hash per configuration
    for summary in result.configs:
        want = _maseval_figures(reports[summary.key])
        assert (summary.runs, summary.tasks, summary.repetitions_max, summary.failed) == (
            TASKS * REPEATS,
            TASKS,
            REPEATS,
            0,
        )
        correct = next(s for s in summary.scores if s.name == "correct")
        assert correct.mean == pytest.approx(want["mean"], abs=1e-12)
        assert correct.flipped_tasks == want["flipped"]
        assert (summary.input_tokens, summary.output_tokens) == (want["in"], want["out"])
        for task, values in want["by_task"].items():
            cell = next(
                t for t in result.tasks if t.key == summary.key and t.task == task and t.score == "correct"
            )
            assert cell.values == values
    assert sum(_maseval_figures(reports[m])["flipped"] for m in SKILL) > 0  # the seed makes some tasks flip
    assert {s.name for s in result.configs[0].scores} == {
        "correct"
    }  # the verdict text is a label, not a score
    delta = next(d for d in result.deltas if d.score == "correct")
    assert delta.shared_tasks == TASKS
    assert delta.changes == ["models.main.model_id: model-a → model-b"]
