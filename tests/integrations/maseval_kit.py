"""What the MASEval tests' benchmarks share: an environment without tools, one agent run on the
task's query, and each evaluator called on its filtered traces."""

from __future__ import annotations

from typing import Any

from maseval import Benchmark, Environment, Task


class DummyEnvironment(Environment):
    """The task's environment data as the state, and no tools."""

    def setup_state(self, environment_data: dict[str, Any]) -> Any:
        return dict(environment_data)

    def create_tools(self) -> dict[str, Any]:
        return {}


class SingleAgentBenchmark(Benchmark):
    """A benchmark whose first agent answers the query, scored by every evaluator."""

    def setup_environment(self, agent_data: dict[str, Any], task: Task, seed_generator: Any) -> Environment:
        return DummyEnvironment(task.environment_data)

    def run_agents(self, agents: Any, task: Task, environment: Environment, query: str) -> Any:
        return agents[0].run(query)

    def evaluate(self, evaluators: Any, agents: Any, final_answer: Any, traces: Any) -> list[dict[str, Any]]:
        return [e(e.filter_traces(traces), final_answer) for e in evaluators]
