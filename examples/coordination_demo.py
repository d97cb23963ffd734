"""A MassGen-shaped multi-agent run, traced with mastrace, with no network and no API key.

Three agents run as concurrent asyncio tasks through three phases: each writes an initial answer
(streaming a fake LLM and calling MCP tools, two of them at once), then each votes for one of
the answers, then the winner presents the final answer. One MCP tool call fails. Every component
is registered, so the session span carries the configuration snapshot, and every LLM call reports
token usage that is priced and credited to its agent round.

Run it, then look at the trace:

    python examples/coordination_demo.py --store .mastrace-demo --report
    mastrace runs --store .mastrace-demo
    mastrace tree latest --store .mastrace-demo
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import random
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mastrace

TASK = "Propose a name and a one-line pitch for a coffee shop on a Mars research base."
AGENT_IDS = ("agent_a", "agent_b", "agent_c")
PRICES = {  # USD per million tokens (illustrative)
    "sim-large": {"input": 2.5, "cached_input": 1.25, "output": 10.0},
    "sim-small": {"input": 0.15, "cached_input": 0.075, "output": 0.6},
}
IDEAS = {
    "agent_a": ("Red Dust Roasters", "slow-roasted beans under a pressurised dome"),
    "agent_b": ("Olympus Espresso", "the highest shot in the solar system"),
    "agent_c": ("Regolith & Crema", "hydroponic milk, Earth-grade crema"),
}


# -- fake services ------------------------------------------------------------------------------
_AGENT: contextvars.ContextVar[str] = contextvars.ContextVar("demo_agent", default="orchestrator")


class Dice:
    """Seeded random draws, one stream per agent and purpose.

    The agents run as concurrent tasks, so one shared generator would hand out its numbers in
    whatever order the event loop happens to run them: a seed would not give the same run twice.
    Each agent (the context variable `_AGENT`) and purpose draws from its own stream instead.
    """

    def __init__(self, seed: int | None) -> None:
        self.seed = seed
        self._streams: dict[str, random.Random] = {}

    def stream(self, purpose: str) -> random.Random:
        key = f"{_AGENT.get()}/{purpose}"
        rng = self._streams.get(key)
        if rng is None:
            rng = self._streams[key] = (
                random.Random(f"{self.seed}/{key}") if self.seed is not None else random.Random()
            )
        return rng


@contextlib.contextmanager
def acting_as(agent_id: str) -> Any:
    token = _AGENT.set(agent_id)
    try:
        yield
    finally:
        _AGENT.reset(token)


class SimulatedBackend(mastrace.LLMBackendMixin, mastrace.ConfigurableMixin, mastrace.UsageTrackableMixin):
    """A streaming LLM backend that makes up text with jittered latency and reports token usage."""

    provider = "simulated"

    def __init__(self, model: str, dice: Dice, temperature: float = 0.7) -> None:
        self.model = model
        self.temperature = temperature
        self.dice = dice
        self.cost_calculator = mastrace.StaticPricing(PRICES)

    def gather_config(self) -> dict[str, Any]:
        return {
            **super().gather_config(),
            "model": self.model,
            "temperature": self.temperature,
            "pricing": self.cost_calculator.gather_config() if self.cost_calculator else None,
        }

    async def _chunks(self, text: str, prompt_tokens: int) -> AsyncIterator[dict[str, Any]]:
        rng = self.dice.stream("llm")
        await asyncio.sleep(rng.uniform(0.08, 0.25))  # time to first token
        words = text.split()
        for i in range(0, len(words), 3):
            await asyncio.sleep(rng.uniform(0.01, 0.04))
            yield {"model": self.model, "delta": " ".join(words[i : i + 3]) + " "}
        cached = int(prompt_tokens * rng.uniform(0.2, 0.6))
        output = len(words) * 2 + rng.randint(5, 40)
        yield {
            "model": self.model,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": output,
                "prompt_tokens_details": {"cached_tokens": cached},
                "completion_tokens_details": {"reasoning_tokens": output // 3},
            },
        }

    async def complete(self, text: str, prompt_tokens: int) -> str:
        """Stream a response (traced as `llm.simulated.stream`) and return its text."""
        parts = []
        stream = self.llm_stream(
            self.model, self._chunks(text, prompt_tokens), temperature=self.temperature, max_tokens=1024
        )
        async for chunk in stream:
            parts.append(chunk.get("delta", ""))
        return "".join(parts).strip()


class SimulatedMCPServer(mastrace.MCPClientMixin, mastrace.ConfigurableMixin):
    """An MCP client whose server answers from memory after a short, jittered delay."""

    def __init__(self, server_name: str, dice: Dice, read_only_prefix: str | None = None) -> None:
        self.server_name = server_name
        self.mcp_session_id = f"{server_name}-session-1"
        self.dice = dice
        self.read_only_prefix = read_only_prefix

    def gather_config(self) -> dict[str, Any]:
        return {
            **super().gather_config(),
            "server": self.server_name,
            "read_only_prefix": self.read_only_prefix,
        }

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        async with self.mcp_tool_call(tool, arguments) as call:
            await asyncio.sleep(self.dice.stream(f"mcp/{self.server_name}/{tool}").uniform(0.05, 0.2))
            path = str(arguments.get("path", ""))
            if tool == "write_file" and self.read_only_prefix and path.startswith(self.read_only_prefix):
                raise PermissionError(f"{path}: {self.read_only_prefix} is mounted read-only")
            result = {"content": [{"type": "text", "text": f"{tool} ok"}], "isError": False}
            call.set_result(result)
            return result


class ToolRunner(mastrace.ToolMixin):
    """Runs a tool the way MassGen's backends do: `Tool execution: mcp__<server>__<tool>` around the call."""

    async def run(self, server: SimulatedMCPServer, tool: str, **arguments: Any) -> dict[str, Any]:
        async with self.tool_execution(f"mcp__{server.server_name}__{tool}"):
            return await server.call(tool, **arguments)


# -- agents and orchestrator --------------------------------------------------------------------
class Agent(mastrace.AgentMixin, mastrace.ConfigurableMixin):
    """One agent: answers with tool help, votes, and presents if it wins."""

    def __init__(
        self,
        agent_id: str,
        index: int,
        backend: SimulatedBackend,
        servers: dict[str, SimulatedMCPServer],
        tools: ToolRunner,
    ) -> None:
        self.agent_id = agent_id
        self.index = index
        self.backend = backend
        self.servers = servers
        self.tools = tools

    def gather_config(self) -> dict[str, Any]:
        return {
            **super().gather_config(),
            "agent_id": self.agent_id,
            "model": self.backend.model,
            "mcp_servers": sorted(self.servers),
        }

    async def initial_answer(self, orchestrator: Orchestrator) -> str:
        _AGENT.set(self.agent_id)  # this task's own context: its draws come from its own streams
        label = f"agent{self.index}.1"
        async with self.agent_round(0, "initial_answer", num_context_answers=0) as rnd:
            await self.backend.complete(f"Let me research what a Mars base crew wants from {TASK}", 420)
            # Two lookups at once: their intervals overlap, so tool wall time counts them once.
            await asyncio.gather(
                self.tools.run(self.servers["search"], "web_search", query="mars base coffee culture"),
                self.tools.run(self.servers["search"], "fetch_page", url="https://example.org/mars-habitat"),
            )
            # agent_c saves its draft on the shared mount, which is read-only: that call fails.
            folder = "/mnt/shared" if self.agent_id == "agent_c" else "/workspace"
            with contextlib.suppress(PermissionError):  # the draft stays in memory; the trace shows why
                await self.tools.run(self.servers["filesystem"], "write_file", path=f"{folder}/{label}.md")
            name, pitch = IDEAS[self.agent_id]
            await self.backend.complete(f"{name}: {pitch}.", 900)
            rnd.set_outcome("answer", answer_label=label)
        orchestrator.record_answer(self.agent_id, label)
        return label

    async def vote(self, orchestrator: Orchestrator, labels: dict[str, str], dice: Dice) -> str:
        _AGENT.set(self.agent_id)
        async with self.agent_round(1, "voting", num_context_answers=len(labels)) as rnd:
            await self.backend.complete("Comparing the answers on memorability and fit.", 1600)
            choice = dice.stream("vote").choice(sorted(labels))
            rnd.set_outcome("vote", voted_for=choice, voted_for_label=labels[choice])
        reason = f"{IDEAS[choice][0]} is the most memorable name"
        orchestrator.record_vote(self.agent_id, choice, labels[choice], reason=reason)
        return choice

    async def present(self, orchestrator: Orchestrator, label: str) -> str:
        with acting_as(self.agent_id):
            return await self._present(orchestrator, label)

    async def _present(self, orchestrator: Orchestrator, label: str) -> str:
        async with self.agent_presentation(round=2):
            orchestrator.record_winner(self.agent_id, label)  # inside the presentation, as MassGen does
            name, pitch = IDEAS[self.agent_id]
            text = await self.backend.complete(f"Final answer: {name} — {pitch}.", 2100)
            orchestrator.record_final_answer(self.agent_id)
        return text


class Orchestrator(mastrace.CoordinationMixin, mastrace.ConfigurableMixin):
    """Runs the three phases with the agents as concurrent tasks."""

    def __init__(self, agents: list[Agent], dice: Dice) -> None:
        self.agents = agents
        self.dice = dice
        self.usage: mastrace.Usage = mastrace.Usage()

    def gather_config(self) -> dict[str, Any]:
        return {
            **super().gather_config(),
            "voting": "plurality",
            "max_rounds": 2,
            "agents": [a.agent_id for a in self.agents],
        }

    async def run(self) -> str:
        async with self.coordination_session(
            TASK, [a.agent_id for a in self.agents], orchestrator="demo"
        ) as session:
            self.coordination_event("coordination_started")
            tasks = [asyncio.create_task(a.initial_answer(self)) for a in self.agents]
            labels = dict(zip((a.agent_id for a in self.agents), await asyncio.gather(*tasks), strict=True))
            self.coordination_event("voting_started", num_answers=len(labels))
            votes = await asyncio.gather(
                *(asyncio.create_task(a.vote(self, labels, self.dice)) for a in self.agents)
            )
            tally = Counter(votes)
            winner = sorted(tally, key=lambda agent: (-tally[agent], agent))[0]
            self.coordination_event("winner_selected", winner=winner, votes=tally[winner])
            final = await next(a for a in self.agents if a.agent_id == winner).present(self, labels[winner])
            self.coordination_event("coordination_completed")
        self.usage = session.usage
        return final


# -- main -----------------------------------------------------------------------------------------
def build(model: str, dice: Dice, registry: mastrace.Registry) -> Orchestrator:
    backend = SimulatedBackend(model, dice)
    servers = {
        "search": SimulatedMCPServer("search", dice),
        "filesystem": SimulatedMCPServer("filesystem", dice, read_only_prefix="/mnt/shared"),
    }
    tools = ToolRunner()
    agents = [Agent(agent_id, i, backend, servers, tools) for i, agent_id in enumerate(AGENT_IDS, start=1)]
    orchestrator = Orchestrator(agents, dice)
    registry.register("models", "main", backend)
    for name, server in servers.items():
        registry.register("tools", name, server)
    for agent in agents:
        registry.register("agents", agent.agent_id, agent)
    registry.register("other", "orchestrator", orchestrator)
    orchestrator.mastrace_registry = registry
    return orchestrator


def report(store: Path, folder: Path) -> None:
    """Print the trace tree; write ANALYSIS_REPORT.md and trace.html into `folder`."""
    from mastrace.analysis import TraceStore, build_report, render_html, render_markdown, render_tree

    with TraceStore(store) as traces:
        trace_id = traces.resolve("latest")
        spans = traces.spans(trace_id)
        analysis = build_report(traces, trace_id)
    print(f"\ntrace {trace_id}\n{render_tree(spans)}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ANALYSIS_REPORT.md").write_text(render_markdown(analysis), encoding="utf-8")
    (folder / "trace.html").write_text(render_html(spans), encoding="utf-8")
    print(f"analysis report: {folder / 'ANALYSIS_REPORT.md'}")
    print(f"trace view:      {folder / 'trace.html'}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--store", default=".mastrace-demo", help="local store folder (default .mastrace-demo)"
    )
    parser.add_argument(
        "--report",
        nargs="?",
        const="",
        metavar="FOLDER",
        help="print the trace tree and write ANALYSIS_REPORT.md and trace.html "
        "(into FOLDER, default the store folder)",
    )
    parser.add_argument("--model", default="sim-large", choices=sorted(PRICES), help="simulated model")
    parser.add_argument("--seed", type=int, default=None, help="random seed for latencies and votes")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    store = Path(args.store)
    mastrace.configure(service_name="coordination-demo", local=store)
    dice = Dice(args.seed)
    registry = mastrace.Registry()
    started = time.perf_counter()
    with registry.scope():
        orchestrator = build(args.model, dice, registry)
        final = asyncio.run(orchestrator.run())
    flushed = mastrace.force_flush(timeout=60.0)  # a busy machine may take a while; nothing is dropped
    print(f"final answer: {final}")
    usage = orchestrator.usage
    tokens = getattr(usage, "input_tokens", 0), getattr(usage, "output_tokens", 0)
    from mastrace.analysis import format_cost  # the reader side, loaded only now

    cost = format_cost(usage.cost, ["(some models)"] if usage.units.get("unpriced_calls") else ())
    print(f"usage: {tokens[0]:,} input / {tokens[1]:,} output tokens, {cost}")
    print(f"run took {time.perf_counter() - started:.2f} s; spans in {store.resolve()}")
    if not flushed:
        print(f"warning: not every span reached the store: {flushed}", file=sys.stderr)
    if args.report is not None:
        report(store, Path(args.report) if args.report else store)
    mastrace.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
