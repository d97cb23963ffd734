"""`MCPClientMixin`: one client span per MCP tool call, `mcp.<server>.<tool>`.

The span (kind CLIENT) follows the MCP and GenAI semantic conventions: `mcp.method.name =
"tools/call"`, `gen_ai.operation.name = "execute_tool"`, `gen_ai.tool.name`, `gen_ai.tool.type`,
`mcp.session.id`, `mcp.protocol.version`, `jsonrpc.request.id`, `jsonrpc.protocol.version`,
`network.transport`, and with content capture on the arguments and result
(`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`). A call that raises, or whose result has
`isError` set, gets error status, `error.type` (`tool_error` for `isError`) and
`mastrace.tool.success = false`. The server's name, which the conventions have no key for, is
`mastrace.mcp.server`.

The `mcp` SDK can emit OpenTelemetry spans of its own; use this mixin where those are not
recorded, so calls are not traced twice.

Example:
    >>> import mastrace
    >>> class FilesystemClient(mastrace.MCPClientMixin):
    ...     server_name = "filesystem"
    >>> client = FilesystemClient()
    >>> with client.mcp_tool_call("read_file", {"path": "notes.txt"}) as call:
    ...     call.set_result({"content": [{"type": "text", "text": "hello"}], "isError": False})
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any

from opentelemetry.trace import SpanKind

from .. import semconv
from ..exceptions import ConfigError
from ..tracing._errors import log_internal_error
from ..tracing._genai import capture_enabled
from ..tracing._tracer import NoOpSpan, Span
from .coordination import MIXIN_TRACER, SpanHandle, put_own

__all__ = ["MCPClientMixin", "MCPToolCall"]

_ERROR_PREVIEW_CHARS = 200


def _field(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def result_is_error(result: Any) -> bool:
    """Whether an MCP tool result reports failure (`isError`, or `is_error`, set to true)."""
    return bool(_field(result, "isError") or _field(result, "is_error"))


def _error_text(result: Any) -> str:
    content = _field(result, "content")
    if isinstance(content, (list, tuple)):
        for item in content:
            text = _field(item, "text")
            if isinstance(text, str) and text:
                return text[:_ERROR_PREVIEW_CHARS]
    return "tool returned an error result"


class MCPToolCall(SpanHandle):
    """The handle of an `mcp.<server>.<tool>` span; a sync and async context manager."""

    def __init__(self, span: Span | NoOpSpan) -> None:
        self._span = span
        self._result_set = False
        self.success: bool | None = None

    def __enter__(self) -> MCPToolCall:
        self._span.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:  # not `handle_internal_errors`: a generator context manager costs more, on every call
            if exc is not None and not isinstance(exc, GeneratorExit):
                self._mark(False)
                self._span.set_attribute(semconv.ERROR_TYPE, type(exc).__qualname__)
            elif not self._result_set:
                self._mark(True)
        except Exception as error:
            log_internal_error("mcp tool call end", error)
        self._span.__exit__(exc_type, exc, tb)

    def set_result(self, result: Any) -> None:
        """Record the tool result's outcome: `isError` → error status and `mastrace.tool.success = false`;
        with content capture on, the result itself (`gen_ai.tool.call.result`)."""
        self._result_set = True
        if capture_enabled():
            self._span.set_attribute(semconv.GEN_AI_TOOL_CALL_RESULT, result)
        if result_is_error(result):
            self._mark(False)
            self._span.set_attribute(semconv.ERROR_TYPE, "tool_error")
            self._span.set_status("error", _error_text(result))
        else:
            self._mark(True)

    def _mark(self, success: bool) -> None:
        self.success = success
        self._span.set_attribute(semconv.MASTRACE_TOOL_SUCCESS, success)


class MCPClientMixin:
    """Adds MCP tool call spans to an MCP client. The class must set `server_name`.

    Attributes:
        server_name: The MCP server's name, e.g. `"filesystem"`.
        mcp_session_id: The MCP session id, when the transport has one.
        mcp_protocol_version: The MCP protocol version the session negotiated (`mcp.protocol.version`).
        mcp_transport: `network.transport`: `pipe` for stdio (the default), `tcp` for HTTP.
    """

    server_name: str
    mcp_session_id: str | None = None
    mcp_protocol_version: str | None = None
    mcp_transport: str = semconv.NETWORK_TRANSPORT_PIPE

    def mcp_tool_call(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        session_id: str | None = None,
        request_id: str | int | None = None,
        call_id: str | None = None,
    ) -> MCPToolCall:
        """Open the `mcp.<server>.<tool>` client span (use with `with` or `async with`).

        Args:
            tool: The tool name.
            arguments: The call's arguments (recorded as `gen_ai.tool.call.arguments` with content
                capture on, scrubbed on export).
            session_id: The MCP session id, overriding `mcp_session_id`.
            request_id: The JSON-RPC request id (`jsonrpc.request.id`).
            call_id: The id of the model's tool call this call answers (`gen_ai.tool.call.id`).
        """
        server = getattr(self, "server_name", None)
        if not server:
            raise ConfigError(f"{type(self).__name__} uses MCPClientMixin but has no server_name")
        # The call's own attributes, valid as they are (no coercion pass); the arguments and what
        # was given that is not a plain string go through it.
        attrs: dict[str, Any] = {
            semconv.MCP_METHOD_NAME: semconv.MCP_METHOD_TOOLS_CALL,
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OP_EXECUTE_TOOL,
        }
        user: dict[str, Any] = {}
        # (`put_own` with the test for a plain string first: the usual value, and one call fewer)
        if type(tool) is str:
            attrs[semconv.GEN_AI_TOOL_NAME] = tool
        else:
            put_own(attrs, user, semconv.GEN_AI_TOOL_NAME, tool)
        if type(server) is str:
            attrs[semconv.MASTRACE_MCP_SERVER] = server
        else:
            put_own(attrs, user, semconv.MASTRACE_MCP_SERVER, server)
        attrs[semconv.JSONRPC_PROTOCOL_VERSION] = semconv.JSONRPC_VERSION
        session = session_id or self.mcp_session_id
        if session is not None:
            put_own(attrs, user, semconv.MCP_SESSION_ID, session)
        if self.mcp_protocol_version is not None:
            put_own(attrs, user, semconv.MCP_PROTOCOL_VERSION, self.mcp_protocol_version)
        transport = self.mcp_transport
        if type(transport) is str:
            attrs[semconv.NETWORK_TRANSPORT] = transport
        else:
            put_own(attrs, user, semconv.NETWORK_TRANSPORT, transport)
        if call_id is not None:
            put_own(attrs, user, semconv.GEN_AI_TOOL_CALL_ID, call_id)
        if request_id is not None:
            put_own(attrs, user, semconv.JSONRPC_REQUEST_ID, str(request_id))
        if arguments is not None and capture_enabled():
            user[semconv.GEN_AI_TOOL_CALL_ARGUMENTS] = dict(arguments)
        span = MIXIN_TRACER._span(
            semconv.SPAN_MCP_TOOL.format(server=server, tool=tool), attrs, user or None, kind=SpanKind.CLIENT
        )
        return MCPToolCall(span)
