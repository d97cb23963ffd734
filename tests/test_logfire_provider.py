"""mastrace inside an application that configured Logfire first: one provider, no override, right parents."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Iterator

import logfire
import pytest
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import mastrace
from mastrace import semconv

OVERRIDE_WARNING = "Overriding of current TracerProvider is not allowed"
tracer = mastrace.get_tracer()


class Agent:
    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id

    @mastrace.instrument("agent.{self.agent_id}.round_{round}")
    async def run_round(self, round: int) -> AsyncGenerator[str, None]:
        with tracer.span("llm.openai.stream", attributes={semconv.MASSGEN_AGENT_ID: self.agent_id}):
            await asyncio.sleep(0)
            yield self.agent_id


@pytest.fixture
def logfire_exporter(caplog: pytest.LogCaptureFixture) -> Iterator[InMemorySpanExporter]:
    """Logfire configured offline with an in-memory processor, then mastrace configured after it."""
    caplog.set_level(logging.DEBUG)
    exporter = InMemorySpanExporter()
    propagator = propagate.get_global_textmap()
    logfire.configure(
        send_to_logfire=False, console=False, additional_span_processors=[SimpleSpanProcessor(exporter)]
    )
    mastrace.configure(local=False)
    try:
        yield exporter
        assert not [r for r in caplog.records if OVERRIDE_WARNING in r.getMessage()]
    finally:
        # logfire.configure() installs process-wide state; leave none of it to later tests.
        logfire.shutdown(timeout_millis=2000, flush=False)
        propagate.set_global_textmap(propagator)


def _by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    spans = exporter.get_finished_spans()
    assert len({s.name for s in spans}) == len(spans), [s.name for s in spans]
    return {s.name: s for s in spans}


def _parent_name(spans: dict[str, ReadableSpan], name: str) -> str | None:
    parent = spans[name].parent
    if parent is None:
        return None
    return next(
        s.name for s in spans.values() if s.context is not None and s.context.span_id == parent.span_id
    )


def test_mastrace_uses_the_provider_logfire_installed(logfire_exporter: InMemorySpanExporter) -> None:
    """After logfire.configure(), mastrace records through the global provider instead of replacing it."""
    provider = trace.get_tracer_provider()
    mastrace.configure(local=False)
    assert trace.get_tracer_provider() is provider
    with tracer.span(semconv.SPAN_COORDINATION_SESSION):
        pass
    assert list(_by_name(logfire_exporter)) == [semconv.SPAN_COORDINATION_SESSION]


def test_mastrace_spans_nest_with_logfire_spans(logfire_exporter: InMemorySpanExporter) -> None:
    """mastrace spans nest under a logfire span and logfire spans nest under mastrace spans."""
    with (
        logfire.span("app request"),
        tracer.span(semconv.SPAN_COORDINATION_SESSION),
        logfire.span("logfire step"),
    ):
        tracer.event("Coordination event: started")
    spans = _by_name(logfire_exporter)
    assert _parent_name(spans, semconv.SPAN_COORDINATION_SESSION) == "app request"
    assert _parent_name(spans, "logfire step") == semconv.SPAN_COORDINATION_SESSION
    assert _parent_name(spans, "Coordination event: started") == "logfire step"


def test_streamed_rounds_nest_through_logfires_provider(logfire_exporter: InMemorySpanExporter) -> None:
    """Rounds pulled by a new task per chunk reach logfire's processors with the right parents."""

    async def pull(stream: AsyncGenerator[str, None]) -> list[str]:
        out = []
        while True:
            try:
                out.append(await asyncio.create_task(anext(stream)))
            except StopAsyncIteration:
                return out

    async def main() -> list[list[str]]:
        with tracer.span(semconv.SPAN_COORDINATION_SESSION):
            return list(await asyncio.gather(*(pull(Agent(a).run_round(1)) for a in ("a", "b"))))

    assert asyncio.run(main()) == [["a"], ["b"]]
    spans = logfire_exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    rounds = {s.name: s for s in spans if s.name.startswith("agent.")}
    assert sorted(rounds) == ["agent.a.round_1", "agent.b.round_1"]
    for span in spans:
        if span.name == "llm.openai.stream":
            parent = by_id[span.parent.span_id]  # type: ignore[union-attr]
            assert parent.name == f"agent.{span.attributes[semconv.MASSGEN_AGENT_ID]}.round_1"  # type: ignore[index]
    assert {by_id[s.parent.span_id].name for s in rounds.values()} == {  # type: ignore[union-attr]
        semconv.SPAN_COORDINATION_SESSION
    }


def test_mastrace_destinations_also_receive_the_spans(logfire_exporter: InMemorySpanExporter) -> None:
    """mastrace's own exporters are fed from logfire's provider as well."""
    mine = InMemorySpanExporter()
    mastrace.configure(local=False, exporters=[mine], synchronous=True)
    with tracer.span(semconv.SPAN_COORDINATION_SESSION):
        pass
    assert [s.name for s in mine.get_finished_spans()] == [semconv.SPAN_COORDINATION_SESSION]
    assert semconv.SPAN_COORDINATION_SESSION in _by_name(logfire_exporter)
