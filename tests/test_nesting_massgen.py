"""MassGen's concurrency shape: agent rounds as async generators pulled by a new task per chunk.

A coordinator opens `coordination.session`, runs five agents concurrently, and pulls every chunk of
each agent's round with `asyncio.create_task(anext(stream))`. Each round opens
`agent.<id>.round_<n>` before its first yield and `llm.<provider>.stream` / `mcp.<server>.<tool>`
spans inside. The tree must come out right with `@mastrace.instrument` and with
`mastrace.traced_stream`, and the same code on plain OpenTelemetry must get it wrong.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan

import mastrace
from mastrace import semconv
from mastrace.testing import CapturedSpans, capture_spans

AGENT_IDS = [f"agent_{i}" for i in range(5)]
CHUNKS = 3
DETACH_FAILURE = "Failed to detach context"
tracer = mastrace.get_tracer()

StreamFactory = Callable[[str, int], AsyncIterator[str]]


class Agent:
    """An agent whose round is a decorated async generator method."""

    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id

    @mastrace.instrument("agent.{self.agent_id}.round_{round}")
    async def run_round(self, round: int) -> AsyncGenerator[str, None]:
        async for chunk in _round_body(self.agent_id):
            yield chunk


async def _round_body(agent_id: str) -> AsyncGenerator[str, None]:
    attrs = {semconv.MASSGEN_AGENT_ID: agent_id}
    for i in range(CHUNKS):
        with tracer.span("llm.openai.stream", attributes=attrs):
            await asyncio.sleep(0)
            yield f"{agent_id}:{i}"
        with tracer.span("mcp.filesystem.read_file", attributes=attrs):
            await asyncio.sleep(0)


async def undecorated_round(agent_id: str, round: int) -> AsyncGenerator[str, None]:
    """A round that opens its span with a plain `with tracer.span(...)` in the body."""
    with tracer.span(f"agent.{agent_id}.round_{round}"):
        async for chunk in _round_body(agent_id):
            yield chunk


async def otel_round(agent_id: str, round: int) -> AsyncGenerator[str, None]:
    """The same round written against plain OpenTelemetry, with no mastrace help."""
    otel = trace.get_tracer("plain-otel")
    attrs = {semconv.MASSGEN_AGENT_ID: agent_id}
    with otel.start_as_current_span(f"agent.{agent_id}.round_{round}"):
        for i in range(CHUNKS):
            with otel.start_as_current_span("llm.openai.stream", attributes=attrs):
                await asyncio.sleep(0)
                yield f"{agent_id}:{i}"
            with otel.start_as_current_span("mcp.filesystem.read_file", attributes=attrs):
                await asyncio.sleep(0)


def _instrumented(agent_id: str, round: int) -> AsyncIterator[str]:
    return Agent(agent_id).run_round(round)


def _traced_stream(agent_id: str, round: int) -> AsyncIterator[str]:
    return mastrace.traced_stream(undecorated_round(agent_id, round))


async def _pull_each_chunk_in_new_task(stream: AsyncIterator[str]) -> list[str]:
    chunks = []
    while True:
        try:
            chunks.append(await asyncio.create_task(anext(stream)))
        except StopAsyncIteration:
            return chunks


async def _coordinate(make_stream: StreamFactory, round: int = 1) -> tuple[list[list[str]], trace.Span]:
    with tracer.span(semconv.SPAN_COORDINATION_SESSION):
        streams = [make_stream(agent_id, round) for agent_id in AGENT_IDS]
        results = await asyncio.gather(
            *(asyncio.create_task(_pull_each_chunk_in_new_task(s)) for s in streams)
        )
        return results, trace.get_current_span()


def _parent_name(spans: CapturedSpans, span: ReadableSpan) -> str | None:
    parent = spans.parent_of(span)
    return parent.name if parent is not None else None


def _children(spans: CapturedSpans) -> list[ReadableSpan]:
    return [s for s in spans.spans if s.name.startswith(("llm.", "mcp."))]


def _run_scenario(make_stream: StreamFactory, caplog: pytest.LogCaptureFixture) -> CapturedSpans:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="opentelemetry.context")
    with capture_spans() as spans:
        results, current_after = asyncio.run(_coordinate(make_stream))
        assert results == [[f"{a}:{i}" for i in range(CHUNKS)] for a in AGENT_IDS]
        assert current_after.name == semconv.SPAN_COORDINATION_SESSION  # type: ignore[attr-defined]
    return spans


def _detach_failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if DETACH_FAILURE in r.getMessage()]


@pytest.mark.parametrize("make_stream", [_instrumented, _traced_stream], ids=["instrument", "traced_stream"])
def test_every_child_nests_under_its_own_agents_round(
    make_stream: StreamFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Each llm/mcp span's parent is the round span of the agent that opened it."""
    spans = _run_scenario(make_stream, caplog)
    children = _children(spans)
    assert len(children) == len(AGENT_IDS) * CHUNKS * 2
    for child in children:
        agent_id = child.attributes[semconv.MASSGEN_AGENT_ID]  # type: ignore[index]
        assert _parent_name(spans, child) == f"agent.{agent_id}.round_1", child.name


@pytest.mark.parametrize("make_stream", [_instrumented, _traced_stream], ids=["instrument", "traced_stream"])
def test_every_round_nests_under_the_session(
    make_stream: StreamFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Each agent's round span is a direct child of `coordination.session`, one per agent."""
    spans = _run_scenario(make_stream, caplog)
    rounds = [s for s in spans.spans if s.name.startswith("agent.")]
    assert sorted(s.name for s in rounds) == sorted(f"agent.{a}.round_1" for a in AGENT_IDS)
    assert {_parent_name(spans, s) for s in rounds} == {semconv.SPAN_COORDINATION_SESSION}
    assert spans.parent_of(spans.one(semconv.SPAN_COORDINATION_SESSION)) is None


@pytest.mark.parametrize("make_stream", [_instrumented, _traced_stream], ids=["instrument", "traced_stream"])
def test_scenario_logs_no_detach_failure(
    make_stream: StreamFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """No "Failed to detach context" record is logged while the scenario runs."""
    spans = _run_scenario(make_stream, caplog)
    assert len(spans.spans) == 1 + len(AGENT_IDS) * (1 + CHUNKS * 2)
    assert _detach_failures(caplog) == []


def test_plain_opentelemetry_gets_the_scenario_wrong(caplog: pytest.LogCaptureFixture) -> None:
    """Negative control: plain `start_as_current_span` in the same shape mis-nests and fails to detach."""
    spans = _run_scenario(otel_round, caplog)
    children = _children(spans)
    misnested = [
        c
        for c in children
        if _parent_name(spans, c) != f"agent.{c.attributes[semconv.MASSGEN_AGENT_ID]}.round_1"
    ]  # type: ignore[index]
    assert misnested, (
        "plain OpenTelemetry nested every child correctly; the scenario no longer tests anything"
    )
    assert _detach_failures(caplog), (
        "plain OpenTelemetry detached cleanly; the scenario no longer tests anything"
    )
