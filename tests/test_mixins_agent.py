"""`AgentMixin`: round and presentation spans, outcomes, and per-round usage."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

import mastrace
from mastrace import (
    AgentMixin,
    ConfigError,
    CoordinationMixin,
    LLMBackendMixin,
    Registry,
    TokenUsage,
    semconv,
)
from mastrace.testing import CapturedSpans


class Agent(AgentMixin, LLMBackendMixin):
    provider = "openrouter"

    def __init__(self, agent_id: str, agent_name: str | None = None) -> None:
        self.agent_id = agent_id
        if agent_name:
            self.agent_name = agent_name

    async def stream_round(self, round: int, chunks: int) -> AsyncGenerator[str, None]:
        """MassGen's shape: the round span is opened inside the async generator."""
        async with self.agent_round(round, semconv.ROUND_TYPE_INITIAL_ANSWER) as rnd:
            async for chunk in self.llm_stream("m", _provider_stream(chunks)):
                await asyncio.sleep(0)
                yield chunk["delta"]
            rnd.set_outcome("answer", answer_label=f"{self.agent_id}.{round}")


class Orchestrator(CoordinationMixin):
    mastrace_registry = Registry(benchmark=False)


async def _provider_stream(chunks: int) -> AsyncIterator[dict[str, Any]]:
    for i in range(chunks):
        await asyncio.sleep(0)
        yield {"delta": str(i)}
    yield {"delta": "", "usage": {"prompt_tokens": 10 * chunks, "completion_tokens": chunks}}


def test_round_span_name_parent_and_attributes(mastrace_spans: CapturedSpans) -> None:
    """`agent.<id>.round_<n>` nests under the session and carries massgen and GenAI agent keys."""
    agent = Agent("agent_a", agent_name="Researcher")
    with (
        Orchestrator().coordination_session("t", ["agent_a"]) as session,
        agent.agent_round(2, "voting", num_context_answers=3),
    ):
        pass
    span = mastrace_spans.one("agent.agent_a.round_2")
    attrs = mastrace_spans.attributes("agent.agent_a.round_2")
    assert mastrace_spans.parent_of(span) is mastrace_spans.one("coordination.session")
    assert (
        attrs[semconv.MASSGEN_AGENT_ID],
        attrs[semconv.MASSGEN_ROUND],
        attrs[semconv.MASSGEN_ROUND_TYPE],
    ) == (
        "agent_a",
        2,
        "voting",
    )
    assert (
        attrs[semconv.GEN_AI_OPERATION_NAME] == "invoke_agent" and attrs[semconv.GEN_AI_AGENT_ID] == "agent_a"
    )
    assert attrs[semconv.GEN_AI_AGENT_NAME] == "Researcher"
    assert attrs[semconv.GEN_AI_PROVIDER_NAME] == "openrouter"  # the agent is its own LLM backend
    assert attrs[semconv.MASSGEN_NUM_CONTEXT_ANSWERS] == 3
    assert attrs[semconv.MASTRACE_CONFIG_HASH] == session.config_hash
    assert span.status.status_code is StatusCode.UNSET


def test_session_conversation_id_reaches_rounds_and_llm_calls(mastrace_spans: CapturedSpans) -> None:
    """`gen_ai.conversation.id` is the session's (given or generated) on its rounds and LLM streams."""
    agent, orchestrator = Agent("agent_a"), Orchestrator()
    for given in ("massgen-session-1", None):
        with (
            orchestrator.coordination_session("t", ["agent_a"], conversation_id=given) as session,
            agent.agent_round(0) as rnd,
        ):
            list(agent.llm_stream("m", [{"delta": "x"}]))
            rnd.set_outcome("answer")
        spans = mastrace_spans.spans[-3:]
        assert {s.attributes.get(semconv.GEN_AI_CONVERSATION_ID) for s in spans} == {session.conversation_id}
        assert given is None or session.conversation_id == given
    round_attrs = mastrace_spans.by_name("agent.agent_a.round_0")[-1].attributes
    assert round_attrs[semconv.GEN_AI_AGENT_NAME] == "agent_a"  # no agent_name: the id names it
    with agent.agent_round(1):  # outside a session: no conversation
        pass
    assert semconv.GEN_AI_CONVERSATION_ID not in mastrace_spans.attributes("agent.agent_a.round_1")


def test_answer_and_vote_outcomes(mastrace_spans: CapturedSpans) -> None:
    """`set_outcome` records the answer label, or the vote's target agent and label."""
    agent = Agent("agent_b")
    with agent.agent_round(0) as rnd:
        rnd.set_outcome("answer", answer_label="agent2.1")
    with agent.agent_round(1, "voting") as rnd:
        rnd.set_outcome("vote", voted_for="agent_a", voted_for_label="agent1.1")
    answer = mastrace_spans.attributes("agent.agent_b.round_0")
    vote = mastrace_spans.attributes("agent.agent_b.round_1")
    assert (answer[semconv.MASSGEN_OUTCOME], answer[semconv.MASSGEN_ANSWER_LABEL]) == ("answer", "agent2.1")
    assert (vote[semconv.MASSGEN_OUTCOME], vote[semconv.MASSGEN_VOTED_FOR]) == ("vote", "agent_a")
    assert vote[semconv.MASSGEN_VOTED_FOR_LABEL] == "agent1.1" and semconv.MASSGEN_ANSWER_LABEL not in vote


def test_outcome_labels_of_other_types_become_text(mastrace_spans: CapturedSpans) -> None:
    """A label passed as a number or an object is recorded as its text; one whose str() raises is
    marked unreadable, and the round still ends normally."""

    class Broken:
        def __str__(self) -> str:
            raise RuntimeError("no text")

    with Agent("a").agent_round(0) as rnd:
        rnd.set_outcome("vote", voted_for=2, voted_for_label=Broken())  # type: ignore[arg-type]
    attrs = mastrace_spans.attributes("agent.a.round_0")
    assert attrs[semconv.MASSGEN_VOTED_FOR] == "2"
    assert "unreadable" in attrs[semconv.MASSGEN_VOTED_FOR_LABEL]


def test_unknown_outcome_is_refused(mastrace_spans: CapturedSpans) -> None:
    """An outcome other than answer, vote or error raises ConfigError."""
    with Agent("a").agent_round(0) as rnd, pytest.raises(ConfigError, match="outcome"):
        rnd.set_outcome("timeout")


def test_escaping_exception_sets_error_outcome_and_status(mastrace_spans: CapturedSpans) -> None:
    """An exception leaving the round is re-raised; the round gets outcome error, message and error status."""
    with pytest.raises(ConnectionError), Agent("a").agent_round(0):
        raise ConnectionError("peer closed connection")
    span = mastrace_spans.one("agent.a.round_0")
    attrs = mastrace_spans.attributes("agent.a.round_0")
    assert attrs[semconv.MASSGEN_OUTCOME] == "error"
    assert attrs[semconv.MASSGEN_ERROR_MESSAGE] == "ConnectionError: peer closed connection"
    assert span.status.status_code is StatusCode.ERROR


def test_error_outcome_without_exception_sets_error_status(mastrace_spans: CapturedSpans) -> None:
    """Declaring an error outcome marks the span as failed with the message."""
    with Agent("a").agent_round(0) as rnd:
        rnd.set_outcome("error", error_message="invalid vote id")
    span = mastrace_spans.one("agent.a.round_0")
    assert span.status.status_code is StatusCode.ERROR and span.status.description == "invalid vote id"


def test_a_round_cut_short_ends_now_and_the_cancellation_after_is_not_its_error(
    mastrace_spans: CapturedSpans,
) -> None:
    """`cut_short` ends the round with its outcome, reason, event and usage so far; the exception that
    leaves the block later (the task's cancellation) is re-raised but not recorded on it."""
    with (
        Orchestrator().coordination_session("t", ["a"]),
        pytest.raises(asyncio.CancelledError),
        Agent("a").agent_round(0) as rnd,
    ):
        rnd.add_usage(TokenUsage(input_tokens=7, output_tokens=1))
        rnd.cut_short("timeout", "Time limit exceeded (10.0s/10s)", semconv.EVENT_MASSGEN_TIMEOUT)
        ended = mastrace_spans.one("agent.a.round_0").end_time
        raise asyncio.CancelledError
    span = mastrace_spans.one("agent.a.round_0")
    attrs = mastrace_spans.attributes("agent.a.round_0")
    assert span.end_time == ended and span.end_time <= mastrace_spans.one("coordination.session").end_time
    assert attrs[semconv.MASSGEN_OUTCOME] == "timeout" and attrs[semconv.MASSGEN_USAGE_INPUT] == 7
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "timeout: Time limit exceeded (10.0s/10s)"
    assert [e.name for e in span.events] == [semconv.EVENT_MASSGEN_TIMEOUT]


def test_each_round_carries_only_its_own_usage(mastrace_spans: CapturedSpans) -> None:
    """Round usage is the round's delta, so rounds sum to the session total."""
    agent = Agent("a")
    with Orchestrator().coordination_session("t", ["a"]):
        for round, calls in ((0, 1), (1, 2)):
            with agent.agent_round(round):
                for _ in range(calls):
                    list(agent.llm_stream("m", [{"usage": {"prompt_tokens": 100, "completion_tokens": 10}}]))
    first, second = (mastrace_spans.attributes(f"agent.a.round_{n}") for n in (0, 1))
    assert (first[semconv.MASSGEN_USAGE_INPUT], second[semconv.MASSGEN_USAGE_INPUT]) == (100, 200)
    assert (first[semconv.GEN_AI_USAGE_OUTPUT_TOKENS], second[semconv.GEN_AI_USAGE_OUTPUT_TOKENS]) == (10, 20)
    session = mastrace_spans.attributes("coordination.session")
    assert session[semconv.MASSGEN_USAGE_INPUT] == 300


def test_add_usage_reaches_the_round_and_the_session(mastrace_spans: CapturedSpans) -> None:
    """Usage added on the handle is on the round and in the session total."""
    with Orchestrator().coordination_session("t", ["a"]), Agent("a").agent_round(0) as rnd:
        rnd.add_usage(TokenUsage(input_tokens=5, reasoning_tokens=2, cached_input_tokens=1, cost=0.5))
        assert rnd.usage.input_tokens == 5  # type: ignore[attr-defined]
    attrs = mastrace_spans.attributes("agent.a.round_0")
    assert attrs[semconv.MASSGEN_USAGE_REASONING] == 2 and attrs[semconv.MASSGEN_USAGE_CACHED_INPUT] == 1
    assert attrs[semconv.MASSGEN_USAGE_COST] == 0.5
    assert mastrace_spans.attributes("coordination.session")[semconv.MASSGEN_USAGE_INPUT] == 5


def test_round_without_usage_claims_none(mastrace_spans: CapturedSpans) -> None:
    """A round where nothing recorded usage has no usage attributes (not zeros)."""
    with Agent("a").agent_round(0):
        pass
    assert semconv.MASSGEN_USAGE_INPUT not in mastrace_spans.attributes("agent.a.round_0")


def test_presentation_span_marks_the_winner(mastrace_spans: CapturedSpans) -> None:
    """`agent.<id>.presentation` has massgen.is_winner and round type presentation."""
    with Agent("agent_a").agent_presentation(round=3):
        pass
    attrs = mastrace_spans.attributes("agent.agent_a.presentation")
    assert attrs[semconv.MASSGEN_IS_WINNER] is True
    assert attrs[semconv.MASSGEN_ROUND_TYPE] == "presentation" and attrs[semconv.MASSGEN_ROUND] == 3


def test_round_works_with_async_with(mastrace_spans: CapturedSpans) -> None:
    """`async with agent_round(...)` opens and closes the span."""

    async def main() -> None:
        async with Agent("a").agent_round(0) as rnd:
            rnd.set_outcome("answer", answer_label="agent1.1")

    asyncio.run(main())
    assert mastrace_spans.attributes("agent.a.round_0")[semconv.MASSGEN_OUTCOME] == "answer"


def test_round_inside_an_async_generator_pulled_by_new_tasks(mastrace_spans: CapturedSpans) -> None:
    """Rounds opened in generators whose chunks new tasks pull keep their LLM spans and usage."""

    async def pull(stream: AsyncIterator[str]) -> list[str]:
        out = []
        while True:
            try:
                out.append(await asyncio.create_task(anext(stream)))
            except StopAsyncIteration:
                return out

    async def main() -> list[list[str]]:
        with Orchestrator().coordination_session("t", ["a", "b"]):
            streams = [mastrace.traced_stream(Agent(a).stream_round(0, n)) for a, n in (("a", 2), ("b", 3))]
            return list(await asyncio.gather(*(pull(s) for s in streams)))

    assert asyncio.run(main()) == [["0", "1", ""], ["0", "1", "2", ""]]
    for agent_id, chunks in (("a", 2), ("b", 3)):
        round_span = mastrace_spans.one(f"agent.{agent_id}.round_0")
        llm = [
            s
            for s in mastrace_spans.by_name("llm.openrouter.stream")
            if mastrace_spans.parent_of(s) is round_span
        ]
        assert len(llm) == 1
        attrs = mastrace_spans.attributes(f"agent.{agent_id}.round_0")
        assert attrs[semconv.MASSGEN_USAGE_INPUT] == 10 * chunks
        assert attrs[semconv.MASSGEN_OUTCOME] == "answer"
        assert mastrace_spans.parent_of(round_span) is mastrace_spans.one("coordination.session")


def test_agent_without_id_is_refused() -> None:
    """Using AgentMixin without an agent_id raises ConfigError."""
    with pytest.raises(ConfigError, match="agent_id"):
        AgentMixin().agent_round(0)
