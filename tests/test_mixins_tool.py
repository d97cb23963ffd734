"""`ToolMixin`: the `Tool execution: <name>` span."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.trace import StatusCode

from mastrace import AgentMixin, ToolMixin, semconv
from mastrace.testing import CapturedSpans


class Toolbox(ToolMixin):
    pass


class Agent(AgentMixin):
    agent_id = "agent_a"


def test_tool_execution_span_name_parent_and_attributes(mastrace_spans: CapturedSpans) -> None:
    """`Tool execution: <name>` nests under the round and names the tool."""
    with (
        Agent().agent_round(0),
        Toolbox().tool_execution("mcp__filesystem__write_file", call_id="c1") as span,
    ):
        span.set_attribute(semconv.TOOL_SUCCESS, True)
    recorded = mastrace_spans.one("Tool execution: mcp__filesystem__write_file")
    attrs = mastrace_spans.attributes("Tool execution: mcp__filesystem__write_file")
    assert mastrace_spans.parent_of(recorded) is mastrace_spans.one("agent.agent_a.round_0")
    assert attrs[semconv.GEN_AI_TOOL_NAME] == "mcp__filesystem__write_file"
    assert attrs[semconv.GEN_AI_OPERATION_NAME] == "execute_tool" and attrs["massgen.call_id"] == "c1"
    assert recorded.status.status_code is StatusCode.UNSET


def test_tool_exception_sets_error_status(mastrace_spans: CapturedSpans) -> None:
    """An exception in the tool is re-raised and recorded as error status."""
    with pytest.raises(ValueError), Toolbox().tool_execution("search"):
        raise ValueError("bad query")
    span = mastrace_spans.one("Tool execution: search")
    assert span.status.status_code is StatusCode.ERROR and "bad query" in (span.status.description or "")


def test_tool_execution_works_with_async_with(mastrace_spans: CapturedSpans) -> None:
    """`async with tool_execution(...)` records the span."""

    async def main() -> None:
        async with Toolbox().tool_execution("search"):
            await asyncio.sleep(0)

    asyncio.run(main())
    assert mastrace_spans.names() == ["Tool execution: search"]
