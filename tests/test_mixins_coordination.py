"""`CoordinationMixin`: the session span, its config snapshot and usage, and the log records under it."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from mastrace import (
    AgentMixin,
    ConfigurableMixin,
    CoordinationMixin,
    Registry,
    TokenUsage,
    UsageTrackableMixin,
    semconv,
)
from mastrace.pipeline import _snapshots_on_spans as snapshots
from mastrace.testing import CapturedSpans, capture_spans


class Orchestrator(CoordinationMixin):
    def __init__(self, registry: Registry) -> None:
        self.mastrace_registry = registry


class Agent(AgentMixin):
    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id


class Model(ConfigurableMixin, UsageTrackableMixin):
    def __init__(self, model_id: str) -> None:
        self.model_id = model_id

    def gather_config(self) -> dict[str, Any]:
        return {
            **super().gather_config(),
            "model_id": self.model_id,
            "api_key": "sk-live-0123456789abcdefghij",
        }


@pytest.fixture
def registry() -> Registry:
    return Registry(benchmark={"name": "unit"})


@pytest.fixture
def orch(registry: Registry) -> Orchestrator:
    return Orchestrator(registry)


# --- the session span ----------------------------------------------------------------------------
def test_session_span_is_a_root_with_task_and_agents(
    mastrace_spans: CapturedSpans, orch: Orchestrator
) -> None:
    """`coordination.session` is a root span carrying the task, agent ids and count."""
    with orch.coordination_session("Write a haiku", ["agent_a", "agent_b"], turn=1):
        pass
    span = mastrace_spans.one("coordination.session")
    attrs = mastrace_spans.attributes("coordination.session")
    assert mastrace_spans.parent_of(span) is None and span.parent is None
    assert attrs[semconv.MASSGEN_TASK] == "Write a haiku"
    assert attrs[semconv.MASSGEN_AGENT_IDS] == ("agent_a", "agent_b")
    assert attrs[semconv.MASSGEN_NUM_AGENTS] == 2 and attrs["massgen.turn"] == 1
    assert span.status.status_code is StatusCode.UNSET


def test_session_carries_the_scrubbed_config_of_every_component(
    mastrace_spans: CapturedSpans, orch: Orchestrator, registry: Registry
) -> None:
    """The session holds every registered component's config, the benchmark section, and its hash."""
    registry.register("models", "main", Model("gpt-4o"))
    with orch.coordination_session("t", ["a"]) as session:
        pass
    attrs = mastrace_spans.attributes("coordination.session")
    config = attrs[semconv.MASTRACE_CONFIG]
    assert config["models"]["main"]["model_id"] == "gpt-4o"
    assert "sk-live" not in json.dumps(config)  # scrubbed before export
    assert config["benchmark"]["name"] == "unit" and "packages" in config["benchmark"]
    assert attrs[semconv.MASTRACE_CONFIG_HASH] == session.config_hash
    assert semconv.MASTRACE_CONFIG in attrs[semconv.LOGFIRE_JSON_SCHEMA]["properties"]


def test_config_hash_is_the_sha256_prefix_of_the_snapshot(orch: Orchestrator, registry: Registry) -> None:
    """The hash on the session is the first 16 hex digits of the snapshot's SHA-256."""
    registry.register("models", "main", Model("m"))
    with capture_spans(scrubbing=False) as spans, orch.coordination_session("t", ["a"]):
        pass
    span = spans.one("coordination.session")
    doc = json.loads(span.attributes[semconv.MASTRACE_CONFIG])  # type: ignore[index, arg-type]
    del doc["benchmark"]  # the process facts are in the snapshot, not in the hash
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert span.attributes[semconv.MASTRACE_CONFIG_HASH] == hashlib.sha256(text.encode()).hexdigest()[:16]  # type: ignore[index]


def test_repeated_sessions_serialise_an_unchanged_config_once(
    mastrace_spans: CapturedSpans, orch: Orchestrator, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three sessions over unchanged components serialise each component's config only once."""
    calls: list[Any] = []
    real = snapshots._serialise
    monkeypatch.setattr(snapshots, "_serialise", lambda value: calls.append(value) or real(value))
    registry.register("models", "main", Model("m"))
    for _ in range(3):
        with orch.coordination_session("t", ["a"]):
            pass
    assert len(calls) == 2  # the model and the benchmark section
    assert len({s.attributes[semconv.MASTRACE_CONFIG_HASH] for s in mastrace_spans.spans}) == 1  # type: ignore[index]


def test_session_starts_with_its_conversation_config_and_hash(
    mastrace_spans: CapturedSpans, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a session knows as it opens is on its span from the start: nothing is set after it."""
    from opentelemetry.sdk import trace as sdk_trace

    calls: list[list[str]] = []
    real_many, real_one = sdk_trace.Span.set_attributes, sdk_trace.Span.set_attribute

    def many(self: Any, attributes: Any) -> None:
        if self.name == "coordination.session":
            calls.append(sorted(attributes))
        real_many(self, attributes)

    def one(self: Any, key: str, value: Any) -> None:
        if self.name == "coordination.session":
            calls.append([key])
        real_one(self, key, value)

    monkeypatch.setattr(sdk_trace.Span, "set_attributes", many)
    monkeypatch.setattr(sdk_trace.Span, "set_attribute", one)
    registry = Registry(benchmark=False)  # no process facts to wait for: the snapshot is ready
    registry.register("models", "main", Model("m"))
    with Orchestrator(registry).coordination_session("t", ["a"]) as session:
        assert calls == []
    attrs = mastrace_spans.attributes("coordination.session")
    assert attrs[semconv.GEN_AI_CONVERSATION_ID] == session.conversation_id
    assert attrs[semconv.MASTRACE_CONFIG_HASH] == session.config_hash
    assert attrs[semconv.MASTRACE_CONFIG]["models"]["main"]["model_id"] == "m"
    assert semconv.MASTRACE_CONFIG in attrs[semconv.LOGFIRE_JSON_SCHEMA]["properties"]


def test_session_totals_the_usage_of_its_rounds(mastrace_spans: CapturedSpans, orch: Orchestrator) -> None:
    """At the end the session holds total and per-agent usage, as JSON and as massgen.usage.*."""
    with orch.coordination_session("t", ["a", "b"]):
        for agent_id, tokens in (("a", 10), ("b", 7), ("a", 5)):
            with Agent(agent_id).agent_round(0) as rnd:
                rnd.add_usage(TokenUsage(input_tokens=tokens, output_tokens=1, cost=0.25))
    attrs = mastrace_spans.attributes("coordination.session")
    usage = attrs[semconv.MASTRACE_USAGE]
    assert usage["total"]["input_tokens"] == 22 and usage["by_agent"]["a"]["input_tokens"] == 15
    assert attrs[semconv.MASSGEN_USAGE_INPUT] == 22 and attrs[semconv.MASSGEN_USAGE_OUTPUT] == 3
    assert attrs[semconv.MASSGEN_USAGE_COST] == 0.75


def test_session_add_usage_counts_work_outside_rounds(
    mastrace_spans: CapturedSpans, orch: Orchestrator
) -> None:
    """Usage added to the session itself is part of its total but of no agent."""
    with orch.coordination_session("t", ["a"]) as session:
        session.add_usage(TokenUsage(input_tokens=4))
    usage = mastrace_spans.attributes("coordination.session")[semconv.MASTRACE_USAGE]
    assert usage["total"]["input_tokens"] == 4 and usage["by_agent"] == {}


def test_session_exception_sets_error_status_and_propagates(
    mastrace_spans: CapturedSpans, orch: Orchestrator
) -> None:
    """An exception leaving the session is re-raised and recorded as error status."""
    with pytest.raises(RuntimeError, match="boom"), orch.coordination_session("t", ["a"]):
        raise RuntimeError("boom")
    span = mastrace_spans.one("coordination.session")
    assert span.status.status_code is StatusCode.ERROR and "boom" in (span.status.description or "")


def test_session_works_with_async_with(mastrace_spans: CapturedSpans, orch: Orchestrator) -> None:
    """`async with` opens and closes the session span."""

    async def main() -> None:
        async with orch.coordination_session("t", ["a"]) as session:
            assert session.span.is_recording()

    asyncio.run(main())
    assert mastrace_spans.names() == ["coordination.session"]


def test_session_uses_the_current_registry_by_default(
    mastrace_spans: CapturedSpans, registry: Registry
) -> None:
    """Without `mastrace_registry`, the session snapshots the registry of the active scope."""
    with registry.scope():
        registry.register("models", "scoped", Model("m"))
        with CoordinationMixin().coordination_session("t", ["a"]):
            pass
    assert "scoped" in mastrace_spans.attributes("coordination.session")[semconv.MASTRACE_CONFIG]["models"]


# --- log records ---------------------------------------------------------------------------------
def test_coordination_event_is_a_log_record_under_the_session(
    mastrace_spans: CapturedSpans, orch: Orchestrator
) -> None:
    """`Coordination event: <type>` is a zero-duration log record child of the session."""
    with orch.coordination_session("t", ["a"]):
        orch.coordination_event("coordination_started", phase="initial_answer")
    event = mastrace_spans.one("Coordination event: coordination_started")
    attrs = mastrace_spans.attributes("Coordination event: coordination_started")
    assert mastrace_spans.parent_of(event) is mastrace_spans.one("coordination.session")
    assert (
        attrs[semconv.LOGFIRE_SPAN_TYPE] == "log"
        and attrs[semconv.MASSGEN_EVENT_TYPE] == "coordination_started"
    )
    assert attrs["massgen.phase"] == "initial_answer" and event.start_time == event.end_time


def test_answer_record_carries_agent_and_label(mastrace_spans: CapturedSpans, orch: Orchestrator) -> None:
    """`Agent answer: <label>` names the agent and the label, as a log record under the session."""
    with orch.coordination_session("t", ["agent_a"]):
        orch.record_answer("agent_a", "agent1.1")
    answer = mastrace_spans.one("Agent answer: agent1.1")
    attrs = mastrace_spans.attributes("Agent answer: agent1.1")
    assert attrs[semconv.MASSGEN_AGENT_ID] == "agent_a" and attrs[semconv.MASSGEN_ANSWER_LABEL] == "agent1.1"
    assert mastrace_spans.parent_of(answer) is mastrace_spans.one("coordination.session")
    assert answer.start_time == answer.end_time and attrs[semconv.LOGFIRE_SPAN_TYPE] == "log"


def test_vote_links_to_the_answer_it_votes_for(mastrace_spans: CapturedSpans, orch: Orchestrator) -> None:
    """`Agent vote: <voter> -> <label>` has the vote keys and a span link to that answer."""
    with orch.coordination_session("t", ["agent_a", "agent_b"]):
        orch.record_answer("agent_a", "agent1.1")
        orch.record_vote("agent_b", "agent_a", "agent1.1", reason="most complete")
    vote = mastrace_spans.one("Agent vote: agent_b -> agent1.1")
    attrs = mastrace_spans.attributes("Agent vote: agent_b -> agent1.1")
    answer = mastrace_spans.one("Agent answer: agent1.1")
    assert [link.context.span_id for link in vote.links] == [answer.context.span_id]  # type: ignore[union-attr]
    assert attrs[semconv.MASSGEN_AGENT_ID] == "agent_b" and attrs[semconv.MASSGEN_VOTED_FOR] == "agent_a"
    assert attrs[semconv.MASSGEN_VOTED_FOR_LABEL] == "agent1.1"
    assert attrs[semconv.MASSGEN_VOTE_REASON] == "most complete"
    assert mastrace_spans.parent_of(vote) is mastrace_spans.one("coordination.session")


def test_vote_for_an_unknown_answer_has_no_link(mastrace_spans: CapturedSpans, orch: Orchestrator) -> None:
    """A vote for a label never recorded is still recorded, without a link."""
    with orch.coordination_session("t", ["a"]):
        orch.record_vote("agent_b", "agent_a", "agent9.9")
    assert mastrace_spans.one("Agent vote: agent_b -> agent9.9").links == ()


def test_winner_and_final_answer_records(mastrace_spans: CapturedSpans, orch: Orchestrator) -> None:
    """`Winner selected: <label>` links to the answer; `Final answer from <id>` names the agent."""
    with orch.coordination_session("t", ["agent_a"]):
        orch.record_answer("agent_a", "agent1.1")
        orch.record_winner("agent_a", "agent1.1")
        orch.record_final_answer("agent_a", answer_chars=42)
    winner = mastrace_spans.one("Winner selected: agent1.1")
    answer = mastrace_spans.one("Agent answer: agent1.1")
    assert winner.links[0].context.span_id == answer.context.span_id  # type: ignore[union-attr]
    assert mastrace_spans.attributes("Winner selected: agent1.1")[semconv.MASSGEN_WINNER] == "agent_a"
    final = mastrace_spans.attributes("Final answer from agent_a")
    assert final[semconv.MASSGEN_AGENT_ID] == "agent_a" and final["massgen.answer_chars"] == 42


def test_mixins_are_harmless_when_mastrace_is_not_configured(orch: Orchestrator) -> None:
    """Unconfigured, the mixins record nothing and raise nothing; usage still adds up."""
    with orch.coordination_session("t", ["a"]) as session:
        orch.coordination_event("started")
        orch.record_answer("a", "agent1.1")
        orch.record_vote("b", "a", "agent1.1")
        with Agent("a").agent_round(0) as rnd:
            rnd.add_usage(TokenUsage(input_tokens=3))
    assert session.usage.input_tokens == 3  # type: ignore[attr-defined]


def test_unrecorded_session_gathers_no_config(registry: Registry) -> None:
    """When nothing records (mastrace not configured), the session skips gathering configs."""
    gathered: list[str] = []

    class Watched(Model):
        def gather_config(self) -> dict[str, Any]:
            gathered.append(self.model_id)
            return super().gather_config()

    registry.register("models", "main", Watched("m"))
    with Orchestrator(registry).coordination_session("t", ["a"]) as session:
        pass
    assert gathered == [] and session.config_hash is None


# --- a MASEval-shaped benchmark loop -------------------------------------------------------------
def test_parallel_repetitions_put_their_own_config_and_usage_on_their_session(
    mastrace_spans: CapturedSpans,
) -> None:
    """Sessions run on 8 threads with a shared model each carry only their own config and usage."""
    registry = Registry(benchmark=False)
    shared = Model("shared")
    start_together = threading.Barrier(8, timeout=30)

    def repetition(index: int, task: int, rep: int) -> int:
        with registry.scope():
            registry.register("models", "main", shared)
            registry.register("agents", f"solver-{task}-{rep}", Model(f"agent-{task}-{rep}"))
            with Orchestrator(registry).coordination_session(f"task-{task}", ["a"], rep=rep):
                if index < 8:
                    start_together.wait()
                with Agent("a").agent_round(0):
                    for i in range(20):
                        shared.record_usage(TokenUsage(input_tokens=task * 10 + rep + i))
            return sum(task * 10 + rep + i for i in range(20))

    jobs = list(itertools.product(range(3), range(4)))
    with ThreadPoolExecutor(max_workers=8) as pool:
        expected = list(pool.map(lambda job: repetition(job[0], *job[1]), enumerate(jobs)))

    sessions = {
        (s.attributes[semconv.MASSGEN_TASK], s.attributes["massgen.rep"]): s  # type: ignore[index]
        for s in mastrace_spans.by_name("coordination.session")
    }
    for (task, rep), tokens in zip(jobs, expected, strict=True):
        attrs = sessions[(f"task-{task}", rep)].attributes
        config = json.loads(attrs[semconv.MASTRACE_CONFIG])  # type: ignore[index, arg-type]
        assert list(config["agents"]) == [f"solver-{task}-{rep}"]
        assert attrs[semconv.MASSGEN_USAGE_INPUT] == tokens  # type: ignore[index]


def test_a_session_ended_in_another_context_is_not_current_where_it_began(
    mastrace_spans: CapturedSpans,
) -> None:
    """MassGen opens its session in one task and ends it in another: later rounds are outside it."""
    from mastrace.mixins import current_session

    session = Orchestrator(Registry()).coordination_session("t", ["agent_a"], conversation_id="c-1")
    session.__enter__()

    async def end_elsewhere() -> None:
        session.__exit__(None, None, None)

    asyncio.run(end_elsewhere())  # a task runs in a copy of this context: it cannot reset it here
    assert current_session() is None
    with Agent("agent_a").agent_round(0):
        pass
    attributes = mastrace_spans.attributes("agent.agent_a.round_0")
    assert "gen_ai.conversation.id" not in attributes
    assert mastrace_spans.one("agent.agent_a.round_0").parent is None
