"""`MCPClientMixin`: the `mcp.<server>.<tool>` client span and how results and failures are reported."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from mcp.types import CallToolResult, TextContent
from opentelemetry.trace import SpanKind, StatusCode

from mastrace import AgentMixin, ConfigError, MCPClientMixin, semconv
from mastrace.testing import CapturedSpans, capture_spans


class FilesystemClient(MCPClientMixin):
    server_name = "filesystem"


class Agent(AgentMixin):
    agent_id = "agent_a"


_MCP_KEYS = (
    semconv.MCP_PROTOCOL_VERSION,
    semconv.JSONRPC_REQUEST_ID,
    semconv.JSONRPC_PROTOCOL_VERSION,
    semconv.NETWORK_TRANSPORT,
    semconv.GEN_AI_TOOL_CALL_ID,
    semconv.MASTRACE_MCP_SERVER,
)


def test_tool_call_span_name_kind_parent_and_attributes(mastrace_spans: CapturedSpans) -> None:
    """`mcp.<server>.<tool>` is a client span under the round with MCP and GenAI tool keys."""
    client = FilesystemClient()
    client.mcp_session_id = "sess-1"
    client.mcp_protocol_version = "2025-06-18"
    call = client.mcp_tool_call("write_file", {"path": "a.txt", "content": "x"}, request_id=7, call_id="c9")
    with Agent().agent_round(0), call:
        pass
    span = mastrace_spans.one("mcp.filesystem.write_file")
    attrs = mastrace_spans.attributes("mcp.filesystem.write_file")
    assert span.kind is SpanKind.CLIENT
    assert mastrace_spans.parent_of(span) is mastrace_spans.one("agent.agent_a.round_0")
    assert (
        attrs[semconv.MCP_METHOD_NAME] == "tools/call"
        and attrs[semconv.GEN_AI_OPERATION_NAME] == "execute_tool"
    )
    assert attrs[semconv.GEN_AI_TOOL_NAME] == "write_file" and attrs[semconv.MCP_SESSION_ID] == "sess-1"
    assert {k: attrs[k] for k in _MCP_KEYS} == {
        semconv.MCP_PROTOCOL_VERSION: "2025-06-18",
        semconv.JSONRPC_REQUEST_ID: "7",
        semconv.JSONRPC_PROTOCOL_VERSION: "2.0",
        semconv.NETWORK_TRANSPORT: "pipe",
        semconv.GEN_AI_TOOL_CALL_ID: "c9",
        semconv.MASTRACE_MCP_SERVER: "filesystem",
    }
    assert semconv.GEN_AI_TOOL_CALL_ARGUMENTS not in attrs  # content: only with capture on
    assert attrs[semconv.MASTRACE_TOOL_SUCCESS] is True and span.status.status_code is StatusCode.UNSET


def test_arguments_and_result_with_content_capture() -> None:
    """With content capture on, the call's arguments and its result are recorded."""
    with capture_spans(capture_content=True) as captured:
        with FilesystemClient().mcp_tool_call("read_file", {"path": "a.txt"}) as call:
            call.set_result({"content": [{"type": "text", "text": "hello"}], "isError": False})
        attrs = captured.attributes("mcp.filesystem.read_file")
    assert attrs[semconv.GEN_AI_TOOL_CALL_ARGUMENTS] == {"path": "a.txt"}
    assert attrs[semconv.GEN_AI_TOOL_CALL_RESULT]["content"][0]["text"] == "hello"


def test_session_id_argument_overrides_the_client_attribute(mastrace_spans: CapturedSpans) -> None:
    """A session id passed to the call wins over `mcp_session_id`."""
    with FilesystemClient().mcp_tool_call("read_file", session_id="sess-2"):
        pass
    assert mastrace_spans.attributes("mcp.filesystem.read_file")[semconv.MCP_SESSION_ID] == "sess-2"


def test_successful_result_marks_success(mastrace_spans: CapturedSpans) -> None:
    """A result without isError leaves the status unset and sets tool.success."""
    with FilesystemClient().mcp_tool_call("read_file") as call:
        call.set_result(CallToolResult(content=[TextContent(type="text", text="hello")]))
    span = mastrace_spans.one("mcp.filesystem.read_file")
    assert (
        span.attributes[semconv.MASTRACE_TOOL_SUCCESS] is True and span.status.status_code is StatusCode.UNSET
    )  # type: ignore[index]


def test_mcp_error_result_sets_error_status(mastrace_spans: CapturedSpans) -> None:
    """An `mcp` CallToolResult with isError gives error status with its text, and tool.success false."""
    result = CallToolResult(content=[TextContent(type="text", text="no such file")], isError=True)
    with FilesystemClient().mcp_tool_call("read_file") as call:
        call.set_result(result)
    span = mastrace_spans.one("mcp.filesystem.read_file")
    assert span.status.status_code is StatusCode.ERROR and span.status.description == "no such file"
    assert span.attributes[semconv.MASTRACE_TOOL_SUCCESS] is False  # type: ignore[index]
    assert span.attributes[semconv.ERROR_TYPE] == "tool_error"  # type: ignore[index]


@pytest.mark.parametrize(
    "result",
    [{"isError": True, "content": []}, SimpleNamespace(isError=True, content=None)],
    ids=["dict", "attr"],
)
def test_is_error_is_read_from_dicts_and_attributes(mastrace_spans: CapturedSpans, result: object) -> None:
    """isError is found as a dict key or as an attribute."""
    with FilesystemClient().mcp_tool_call("read_file") as call:
        call.set_result(result)
    assert call.success is False
    assert mastrace_spans.one("mcp.filesystem.read_file").status.status_code is StatusCode.ERROR


def test_exception_sets_error_status_and_failure(mastrace_spans: CapturedSpans) -> None:
    """An exception in the call is re-raised; the span is failed with tool.success false and error.type."""
    with pytest.raises(ConnectionError), FilesystemClient().mcp_tool_call("read_file"):
        raise ConnectionError("Server 'filesystem' not connected")
    span = mastrace_spans.one("mcp.filesystem.read_file")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes[semconv.MASTRACE_TOOL_SUCCESS] is False  # type: ignore[index]
    assert span.attributes[semconv.ERROR_TYPE] == "ConnectionError"  # type: ignore[index]


def test_tool_call_works_with_async_with(mastrace_spans: CapturedSpans) -> None:
    """`async with mcp_tool_call(...)` records the span."""

    async def main() -> None:
        async with FilesystemClient().mcp_tool_call("list_dir") as call:
            call.set_result({"content": []})

    asyncio.run(main())
    assert mastrace_spans.attributes("mcp.filesystem.list_dir")[semconv.MASTRACE_TOOL_SUCCESS] is True


def test_client_without_server_name_is_refused() -> None:
    """Using MCPClientMixin without a server_name raises ConfigError."""
    with pytest.raises(ConfigError, match="server_name"):
        MCPClientMixin().mcp_tool_call("x")
