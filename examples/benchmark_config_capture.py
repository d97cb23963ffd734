"""Capture each repetition's configuration and usage in a MASEval-shaped benchmark loop.

Tasks × repetitions run on a thread pool. Every repetition opens a registry scope, registers its
components (one model adapter is shared by all repetitions), and runs a small two-agent
coordination whose `coordination.session` span carries the configuration snapshot and the
repetition's usage. The same configuration and usage also go into each result, MASEval style.
Everything runs offline: the model is simulated.

Run:
    python examples/benchmark_config_capture.py --store /tmp/mastrace-bench
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import mastrace
from mastrace import (
    AgentMixin,
    ConfigurableMixin,
    CoordinationMixin,
    LLMBackendMixin,
    Registry,
    StaticPricing,
    TraceableMixin,
    UsageTrackableMixin,
)
from mastrace.analysis import format_cost
from mastrace.store import query

TASKS = [
    {"id": "capital-fr", "query": "What is the capital of France?", "answer": "Paris"},
    {"id": "sum-7-5", "query": "What is 7 + 5?", "answer": "12"},
    {"id": "haiku", "query": "Write a haiku about tracing.", "answer": "spans"},
]
PRICING = StaticPricing({"sim-large": {"input": 3.0, "output": 15.0, "cached_input": 0.3}})


class SimulatedModel(ConfigurableMixin, UsageTrackableMixin, LLMBackendMixin):
    """A model adapter that streams a canned answer and reports token usage like a provider."""

    provider = "simulated"

    def __init__(self, model_id: str, temperature: float) -> None:
        self.model_id = model_id
        self.temperature = temperature
        self.cost_calculator = PRICING

    def gather_config(self) -> dict[str, Any]:
        return {**super().gather_config(), "model_id": self.model_id, "temperature": self.temperature}

    def complete(self, prompt: str, answer: str) -> str:
        chunks = self.llm_stream(
            self.model_id, self._provider_stream(prompt, answer), temperature=self.temperature, max_tokens=256
        )
        return "".join(chunk["text"] for chunk in chunks)

    @staticmethod
    def _provider_stream(prompt: str, answer: str) -> Iterator[dict[str, Any]]:
        words = answer.split()
        for word in words:
            yield {"text": word + " "}
        yield {
            "text": "",
            "usage": {"prompt_tokens": len(prompt.split()) * 4, "completion_tokens": len(words) * 3},
        }


class Solver(AgentMixin, ConfigurableMixin, TraceableMixin):
    """An agent that answers with the shared model and remembers its messages."""

    def __init__(self, agent_id: str, model: SimulatedModel, style: str) -> None:
        self.agent_id = agent_id
        self.model = model
        self.style = style
        self.messages: list[str] = []

    def gather_config(self) -> dict[str, Any]:
        return {**super().gather_config(), "agent_id": self.agent_id, "style": self.style}

    def gather_traces(self) -> dict[str, Any]:
        return {**super().gather_traces(), "messages": list(self.messages)}

    def answer(self, task: dict[str, Any], label: str) -> str:
        with self.agent_round(0, "initial_answer") as rnd:
            text = self.model.complete(f"[{self.style}] {task['query']}", task["answer"])
            self.messages.append(text)
            rnd.set_outcome("answer", answer_label=label)
        return text

    def vote(self, task: dict[str, Any], for_agent: str, for_label: str) -> None:
        with self.agent_round(1, "voting") as rnd:
            self.model.complete(f"Pick the best answer to: {task['query']}", for_label)
            rnd.set_outcome("vote", voted_for=for_agent, voted_for_label=for_label)


class TaskEnvironment(ConfigurableMixin, TraceableMixin):
    def __init__(self, task: dict[str, Any]) -> None:
        self.task = task

    def gather_config(self) -> dict[str, Any]:
        return {**super().gather_config(), "task_id": self.task["id"]}


class Orchestrator(CoordinationMixin):
    """Runs one coordination: both agents answer, the second votes for the first, which presents."""

    def run(self, task: dict[str, Any], agents: list[Solver], rep: int) -> tuple[str, dict[str, Any]]:
        first, second = agents
        with self.coordination_session(
            task["query"], [a.agent_id for a in agents], task_id=task["id"], repeat_idx=rep
        ) as session:
            self.coordination_event("coordination_started")
            for i, agent in enumerate(agents, 1):
                agent.answer(task, f"agent{i}.1")
                self.record_answer(agent.agent_id, f"agent{i}.1")
            second.vote(task, first.agent_id, "agent1.1")
            self.record_vote(second.agent_id, first.agent_id, "agent1.1", reason="correct and concise")
            self.record_winner(first.agent_id, "agent1.1")
            with first.agent_presentation():
                final = first.model.complete(f"Present: {task['query']}", task["answer"])
            self.record_final_answer(first.agent_id)
        return final, {"config_hash": session.config_hash, "usage": session.usage.to_dict()}


def run_repetition(
    registry: Registry, model: SimulatedModel, task: dict[str, Any], rep: int
) -> dict[str, Any]:
    with registry.scope():  # this repetition's registrations only
        registry.register("environment", "env", TaskEnvironment(task))
        registry.register("models", "main", model)
        agents = [Solver("agent_a", model, "precise"), Solver("agent_b", model, "creative")]
        for agent in agents:
            registry.register("agents", agent.agent_id, agent)
        final, session = Orchestrator().run(task, agents, rep)
        return {
            "task_id": task["id"],
            "repeat_idx": rep,
            "output": final.strip(),
            "config": registry.collect_all_configs(),
            "traces": registry.collect_all_traces(),
            "usage": registry.collect_all_usage(),
            "session": session,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=".mastrace", help="local store folder (default ./.mastrace)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()

    mastrace.configure(service_name="benchmark-config-capture", local=args.store)
    registry = Registry(benchmark={"name": "toy-qa", "n_task_repeats": args.repeats})
    model = SimulatedModel("sim-large", temperature=0.0)  # shared by every repetition
    jobs = list(itertools.product(TASKS, range(args.repeats)))
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        results = list(pool.map(lambda job: run_repetition(registry, model, *job), jobs))
    flushed = mastrace.force_flush()

    rep_tokens = [r["usage"]["models"]["main"]["input_tokens"] for r in results]
    assert rep_tokens == [r["session"]["usage"]["input_tokens"] for r in results]
    stored = query(
        "SELECT count(*) AS sessions FROM records WHERE span_name = 'coordination.session'", args.store
    )[0]["sessions"]
    total = registry.usage
    git = results[0]["config"]["benchmark"]["git"]
    print(f"repetitions:   {len(results)} ({len(TASKS)} tasks x {args.repeats}) on {args.workers} threads")
    print(f"config hashes: {len({r['session']['config_hash'] for r in results})} distinct (one per task)")
    print(
        f"usage:         {total.input_tokens} input + {total.output_tokens} output tokens, "  # type: ignore[attr-defined]
        f"{format_cost(total.cost)}; per repetition: {rep_tokens}"
    )
    print(f"git:           {git.get('commit_hash_short', git.get('error'))}")
    print(f"store:         {args.store}: {flushed.exported} spans exported, {stored} sessions readable")


if __name__ == "__main__":
    main()
