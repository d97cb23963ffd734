"""The mixins' own attributes reach the SDK without the coercion pass; the caller's values still do.

Counted, not timed: the coercion pass (`_clean_attributes`) and the value coercion (`coerce_attribute`) are
wrapped, and a whole MassGen-shaped session made only of the mixins' own values calls neither.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from mastrace import (
    AgentMixin,
    CoordinationMixin,
    LLMBackendMixin,
    MCPClientMixin,
    Registry,
    StaticPricing,
    ToolMixin,
    semconv,
)
from mastrace.testing import CapturedSpans
from mastrace.tracing import _tracer

CHUNKS: list[dict[str, Any]] = [
    {"id": "r1", "model": "gpt-4o-mini", "delta": "Day 1"},
    {"usage": {"prompt_tokens": 1200, "completion_tokens": 300}, "model": "gpt-4o-mini"},
]


class Backend(LLMBackendMixin):
    provider = "openai"
    cost_calculator = StaticPricing({"gpt-4o-mini": {"input": 0.15, "output": 0.6}})


class Agent(AgentMixin, ToolMixin, MCPClientMixin):
    server_name = "filesystem"

    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id


class Orchestrator(CoordinationMixin):
    pass


class Coercions:
    """What went through the coercion pass: the keys of each mapping, and each single value."""

    def __init__(self) -> None:
        self.passes: list[list[str]] = []
        self.values: list[Any] = []


@pytest.fixture
def coercions(monkeypatch: pytest.MonkeyPatch) -> Iterator[Coercions]:
    seen = Coercions()
    clean, coerce = _tracer._clean_attributes, _tracer.coerce_attribute

    def counting_clean(attributes: Mapping[str, Any], valid: Any = None) -> Any:
        seen.passes.append(list(attributes))
        return clean(attributes) if valid is None else clean(attributes, valid)

    def counting_coerce(value: Any) -> Any:
        seen.values.append(value)
        return coerce(value)

    monkeypatch.setattr(_tracer, "_clean_attributes", counting_clean)
    monkeypatch.setattr(_tracer, "coerce_attribute", counting_coerce)
    yield seen


def session(extra: Mapping[str, Any] | None = None) -> None:
    """A coordination session of two agents (rounds, LLM streams, tools, MCP calls, answers, votes, the
    winner and the final answer); `extra` is given to every call that takes extra attributes."""
    extra = dict(extra or {})
    orchestrator, backend = Orchestrator(), Backend()
    orchestrator.mastrace_registry = Registry()
    agents = [Agent("agent_a"), Agent("agent_b")]
    with orchestrator.coordination_session("Plan a trip", ["agent_a", "agent_b"], **extra):
        orchestrator.coordination_event("coordination_started", **extra)
        for rnd in (0, 1):
            for agent in agents:
                with agent.agent_round(rnd, "voting" if rnd else "initial_answer", **extra) as r:
                    list(backend.llm_stream("gpt-4o-mini", CHUNKS, temperature=0.2))
                    with agent.tool_execution("read_file", call_id="c1", **extra):
                        pass
                    with agent.mcp_tool_call("read_file", {"path": "/w/a.md"}, request_id=7) as call:
                        call.set_result({"content": [{"type": "text", "text": "ok"}]})
                    if rnd == 0:
                        r.set_outcome("answer", answer_label=f"{agent.agent_id}.1")
                        orchestrator.record_answer(agent.agent_id, f"{agent.agent_id}.1", **extra)
                    else:
                        r.set_outcome("vote", voted_for="agent_a", voted_for_label="agent_a.1")
                        orchestrator.record_vote(agent.agent_id, "agent_a", "agent_a.1", "clearest", **extra)
        orchestrator.record_winner("agent_a", "agent_a.1", **extra)
        with agents[0].agent_presentation(2, **extra):
            list(backend.llm_stream("gpt-4o-mini", CHUNKS))
        orchestrator.record_final_answer("agent_a", **extra)


def test_a_session_of_the_mixins_own_values_skips_the_coercion_pass(
    mastrace_spans: CapturedSpans, coercions: Coercions
) -> None:
    session()
    names = [s.name for s in mastrace_spans.spans]
    assert len(names) == 26 and "llm.openai.stream" in names and "Agent vote: agent_b -> agent_a.1" in names
    assert coercions.passes == []
    assert coercions.values == []
    stream = mastrace_spans.spans[names.index("llm.openai.stream")].attributes or {}
    assert stream[semconv.GEN_AI_REQUEST_TEMPERATURE] == 0.2  # converted by the mixin, as the conventions say
    # JSON values built by the mixins are declared as such all the same.
    assert json.loads(str(stream[semconv.MASTRACE_USAGE]))["input_tokens"] == 1200
    assert semconv.MASTRACE_USAGE in json.loads(str(stream[semconv.LOGFIRE_JSON_SCHEMA]))["properties"]
    root = mastrace_spans.attributes("coordination.session")
    assert root[semconv.MASSGEN_AGENT_IDS] == ("agent_a", "agent_b")
    assert root[semconv.MASTRACE_USAGE]["by_agent"]["agent_a"]["input_tokens"] == 3600


def test_the_callers_values_are_still_coerced(mastrace_spans: CapturedSpans, coercions: Coercions) -> None:
    session({"tags": ["x", 1], "weird": None, "level": 2})
    tags = json.dumps(["x", 1], separators=(",", ":"))
    for span in mastrace_spans.spans:
        if span.name.startswith(("llm.", "mcp.")):  # they take no extra attributes
            continue
        attrs = span.attributes or {}
        assert attrs["massgen.tags"] == tags, span.name
        assert attrs["massgen.level"] == 2
        assert "massgen.weird" not in attrs
        if "massgen.tags" in attrs:
            assert "massgen.tags" in json.loads(str(attrs[semconv.LOGFIRE_JSON_SCHEMA]))["properties"]
    # Only the caller's keys go through the pass: never the mixins' own.
    own = {
        semconv.MASSGEN_AGENT_ID,
        semconv.GEN_AI_AGENT_ID,
        semconv.GEN_AI_OPERATION_NAME,
        semconv.MASSGEN_TASK,
    }
    assert coercions.passes and all(not own & set(keys) for keys in coercions.passes)
    assert ["x", 1] in coercions.values


def test_values_of_other_types_given_to_a_mixin_are_coerced_as_before(mastrace_spans: CapturedSpans) -> None:
    import enum

    class Kind(str, enum.Enum):
        VOTING = "voting"

    class Named(AgentMixin):
        agent_id = "agent_a"
        agent_name = ("Alice", "A")  # not a text: what coercion makes of it

    orchestrator = Orchestrator()
    orchestrator.mastrace_registry = Registry()
    with orchestrator.coordination_session("t", ["agent_a", 2]), Named().agent_round(1, Kind.VOTING):
        pass
    root = mastrace_spans.attributes("coordination.session")
    assert root[semconv.MASSGEN_AGENT_IDS] == ["agent_a", 2]  # JSON text, decoded by `attributes`
    round_ = mastrace_spans.one("agent.agent_a.round_1").attributes or {}
    assert round_[semconv.MASSGEN_ROUND_TYPE] == "voting" and type(round_[semconv.MASSGEN_ROUND_TYPE]) is str
    assert round_[semconv.GEN_AI_AGENT_NAME] == ("Alice", "A")


def test_request_parameters_of_other_types_are_coerced(mastrace_spans: CapturedSpans) -> None:
    import enum

    class Tier(str, enum.Enum):
        FLEX = "flex"

    list(Backend().llm_stream("gpt-4o-mini", CHUNKS, stop=["\n", "END"], service_tier=Tier.FLEX, top_k=3))
    attrs = mastrace_spans.one("llm.openai.stream").attributes or {}
    assert attrs[semconv.GEN_AI_REQUEST_STOP_SEQUENCES] == ("\n", "END")
    assert attrs[semconv.OPENAI_REQUEST_SERVICE_TIER] == "flex"
    assert type(attrs[semconv.OPENAI_REQUEST_SERVICE_TIER]) is str
    assert attrs[semconv.GEN_AI_REQUEST_TOP_K] == 3.0
