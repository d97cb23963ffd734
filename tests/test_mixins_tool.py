"""`ToolMixin`: the `Tool execution: <name>` span."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.trace import StatusCode

from mastrace import AgentMixin, ToolMixin, semconv
from mastrace.testing import CapturedSpans, capture_spans


class Toolbox(ToolMixin):
    pass


class Agent(AgentMixin):
    agent_id = "agent_a"


_TOOL_KEYS = (
    semconv.GEN_AI_OPERATION_NAME,
    semconv.GEN_AI_TOOL_NAME,
    semconv.GEN_AI_TOOL_CALL_ID,
    semconv.GEN_AI_TOOL_TYPE,
    semconv.MASTRACE_TOOL_SUCCESS,
)


def test_tool_execution_span_name_parent_and_attributes(mastrace_spans: CapturedSpans) -> None:
    """`Tool execution: <name>` nests under the round and carries the conventions' execute_tool keys."""
    with (
        Agent().agent_round(0),
        Toolbox().tool_execution("mcp__filesystem__write_file", call_id="c1", attempt=2),
    ):
        pass
    recorded = mastrace_spans.one("Tool execution: mcp__filesystem__write_file")
    attrs = mastrace_spans.attributes("Tool execution: mcp__filesystem__write_file")
    assert mastrace_spans.parent_of(recorded) is mastrace_spans.one("agent.agent_a.round_0")
    assert {k: attrs.get(k) for k in (*_TOOL_KEYS, "massgen.attempt")} == {
        semconv.GEN_AI_OPERATION_NAME: "execute_tool",
        semconv.GEN_AI_TOOL_NAME: "mcp__filesystem__write_file",
        semconv.GEN_AI_TOOL_CALL_ID: "c1",
        semconv.GEN_AI_TOOL_TYPE: "function",
        semconv.MASTRACE_TOOL_SUCCESS: True,
        "massgen.attempt": 2,
    }
    assert recorded.status.status_code is StatusCode.UNSET


def test_tool_exception_sets_error_status(mastrace_spans: CapturedSpans) -> None:
    """An exception in the tool is re-raised and recorded as error status, `error.type` and failure."""
    with pytest.raises(ValueError), Toolbox().tool_execution("search"):
        raise ValueError("bad query")
    span = mastrace_spans.one("Tool execution: search")
    assert span.status.status_code is StatusCode.ERROR and "bad query" in (span.status.description or "")
    attrs = mastrace_spans.attributes("Tool execution: search")
    assert (attrs[semconv.ERROR_TYPE], attrs[semconv.MASTRACE_TOOL_SUCCESS]) == ("ValueError", False)


def test_arguments_and_result_only_with_content_capture() -> None:
    """Arguments and result are content: recorded (scrubbed) with capture on, never with it off."""
    secret = "sk-proj-" + "Q7w9" * 12
    found = {}
    for name in ("off", "on"):
        with capture_spans(capture_content=name == "on") as captured:
            with Toolbox().tool_execution(name, arguments={"q": "x", "token": secret}) as call:
                call.set_result({"hits": 3}, success=False)
            found[name] = captured.attributes(f"Tool execution: {name}")
    off, on = found["off"], found["on"]
    assert semconv.GEN_AI_TOOL_CALL_ARGUMENTS not in off and semconv.GEN_AI_TOOL_CALL_RESULT not in off
    assert on[semconv.GEN_AI_TOOL_CALL_RESULT] == {"hits": 3} and secret not in str(on)
    assert on[semconv.GEN_AI_TOOL_CALL_ARGUMENTS]["q"] == "x"
    assert (on[semconv.ERROR_TYPE], on[semconv.MASTRACE_TOOL_SUCCESS]) == ("tool_error", False)


def test_tool_execution_works_with_async_with(mastrace_spans: CapturedSpans) -> None:
    """`async with tool_execution(...)` records the span."""

    async def main() -> None:
        async with Toolbox().tool_execution("search"):
            await asyncio.sleep(0)

    asyncio.run(main())
    assert mastrace_spans.names() == ["Tool execution: search"]
