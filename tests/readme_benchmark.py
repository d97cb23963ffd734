"""`my_benchmark.py` for the README's MASEval blocks: a small real MASEval benchmark (no network).

One model that upper-cases the question, one agent, exact-match scoring; `tasks` and `config` are
what the README passes to `run()`.
"""

from __future__ import annotations

from typing import Any

from maseval import AgentAdapter, Benchmark, ChatResponse, Environment, Evaluator, ModelAdapter, Task

import mastrace


class EchoModel(ModelAdapter):
    @property
    def model_id(self) -> str:
        return "echo-1"

    def _chat_impl(self, messages: list[dict[str, Any]], *args: Any, **kwargs: Any) -> ChatResponse:
        return ChatResponse(
            content=str(messages[-1]["content"]).upper(),
            usage={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
        )


class EchoAgent(AgentAdapter):
    def _run_agent(self, query: str) -> Any:
        with mastrace.get_tracer().span("agent.echo.run"):
            return self.agent.generate(query)


class Env(Environment):
    def setup_state(self, environment_data: dict[str, Any]) -> Any:
        return dict(environment_data)

    def create_tools(self) -> dict[str, Any]:
        return {}


class ExactMatch(Evaluator):
    def __init__(self, task: Task, environment: Environment, user: Any = None) -> None:
        self.expected = task.evaluation_data.get("expected")

    def filter_traces(self, traces: dict[str, Any]) -> dict[str, Any]:
        return traces

    def __call__(self, traces: dict[str, Any], final_answer: Any = None) -> dict[str, Any]:
        return {"correct": final_answer == self.expected}


class MyBenchmark(Benchmark):
    def __init__(self, **options: Any) -> None:
        super().__init__(progress_bar=False, **options)

    def setup_environment(self, agent_data: dict[str, Any], task: Task, seed_generator: Any) -> Environment:
        return Env(task.environment_data)

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

    def run_agents(self, agents: Any, task: Task, environment: Environment, query: str) -> Any:
        return agents[0].run(query)

    def evaluate(self, evaluators: Any, agents: Any, final_answer: Any, traces: Any) -> list[dict[str, Any]]:
        return [e(e.filter_traces(traces), final_answer) for e in evaluators]


tasks = [
    Task(id=f"t{i}", query=q, evaluation_data={"expected": q.upper()}) for i, q in enumerate(("mars", "tea"))
]
config = {"temperature": 0.0}
