"""The MCP integration against the real `mcp` SDK: a stdio server in a child process, in-process servers."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared import _otel as mcp_otel
from mcp.shared.exceptions import MCPError
from opentelemetry import propagate, trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

import mastrace
from mastrace import semconv
from mastrace.exceptions import ExportError
from mastrace.integrations import mcp as mcp_integration
from mastrace.integrations.mcp import (
    continue_trace,
    instrument_mcp,
    set_session_info,
    traced_tool,
    uninstrument_mcp,
)
from mastrace.store import query
from mastrace.testing import CapturedSpans, assert_tree, capture_spans

SERVER_SCRIPT = Path(__file__).with_name("mcp_demo_server.py")


@contextmanager
def _fresh_sdk_telemetry() -> Iterator[None]:
    """Give the SDK the telemetry setup of a fresh process, and put the previous one back after.

    The SDK's module-level tracer binds to the first provider it sees, while the test suite
    installs a new provider for every test; and a `logfire.configure()` in an earlier test leaves
    Logfire's propagator installed, which warns when a server extracts a propagated context.
    """
    saved = mcp_otel._tracer, propagate.get_global_textmap()
    mcp_otel._tracer = trace.get_tracer("mcp-python-sdk")
    propagate.set_global_textmap(
        CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])
    )
    try:
        yield
    finally:
        mcp_otel._tracer = saved[0]
        propagate.set_global_textmap(saved[1])


@pytest.fixture(autouse=True)
def _sdk_telemetry() -> Iterator[None]:
    """Run each test with fresh SDK telemetry (see `_fresh_sdk_telemetry`)."""
    with _fresh_sdk_telemetry():
        yield


@pytest.fixture
def instrumented() -> Iterator[None]:
    """Instrument `ClientSession` for one test."""
    instrument_mcp()
    yield
    uninstrument_mcp()


# --- a real stdio server in a child process ---------------------------------------------------------
@dataclass
class StdioRun:
    """What one client session against the stdio demo server produced."""

    client: list[ReadableSpan]
    store: Path

    def client_span(self, name: str) -> ReadableSpan:
        found = [s for s in self.client if s.name == name]
        assert len(found) == 1, [s.name for s in self.client]
        return found[0]

    def server_rows(self, span_name: str) -> list[dict[str, Any]]:
        return query("SELECT * FROM records WHERE span_name = ?", self.store, [span_name])


async def _stdio_session(store: Path, errlog: Any) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=[str(SERVER_SCRIPT)], env={"MASTRACE_TEST_STORE": str(store)}
    )
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        with mastrace.get_tracer().span("agent.a.round_0"):
            await session.call_tool("add", {"a": 1, "b": 2})
            await session.call_tool("explode", {"reason": "boom"})


@pytest.fixture(scope="module")
def stdio_run(tmp_path_factory: pytest.TempPathFactory) -> StdioRun:
    """Run one instrumented session against the stdio demo server (once for the module)."""
    folder = tmp_path_factory.mktemp("mcp-stdio")
    store = folder / "store"
    instrument_mcp()
    try:
        with _fresh_sdk_telemetry(), capture_spans() as captured, (folder / "server.log").open("w") as errlog:
            anyio.run(_stdio_session, store, errlog)
            spans = captured.spans
    finally:
        uninstrument_mcp()
    return StdioRun(spans, store)


@pytest.mark.slow
def test_stdio_client_tree(stdio_run: StdioRun) -> None:
    """The client side of the stdio session has one span per call, nested under the agent span."""
    assert_tree(
        stdio_run.client,
        """
        MCP send initialize
        mcp.demo.tools/list [mcp.method.name=tools/list, mastrace.mcp.server=demo]
        agent.a.round_0
          mcp.demo.add [gen_ai.tool.name=add, mastrace.tool.success=true]
          mcp.demo.explode [gen_ai.tool.name=explode, mastrace.tool.success=false]
    """,
    )


@pytest.mark.slow
def test_stdio_tool_call_is_one_trace_with_the_right_parent(stdio_run: StdioRun) -> None:
    """The server's span for the call is a child of the client's span, in the same trace."""
    client = stdio_run.client_span("mcp.demo.add")
    (server,) = stdio_run.server_rows("tools/call add")
    assert server["trace_id"] == f"{client.context.trace_id:032x}"
    assert server["parent_span_id"] == f"{client.context.span_id:016x}"


@pytest.mark.slow
def test_stdio_spans_inside_the_tool_continue_the_trace(stdio_run: StdioRun) -> None:
    """A span the tool opens nests under the server span of its call."""
    (server,) = stdio_run.server_rows("tools/call add")
    (inner,) = stdio_run.server_rows("demo.compute")
    assert (inner["trace_id"], inner["parent_span_id"]) == (server["trace_id"], server["span_id"])


@pytest.mark.slow
def test_stdio_client_span_attributes(stdio_run: StdioRun) -> None:
    """The client span carries the MCP and GenAI attributes, with the server name from serverInfo."""
    span = stdio_run.client_span("mcp.demo.add")
    assert span.kind is SpanKind.CLIENT
    assert {
        k: span.attributes[k]
        for k in (
            semconv.MCP_METHOD_NAME,
            semconv.GEN_AI_OPERATION_NAME,
            semconv.GEN_AI_TOOL_NAME,
            semconv.MASTRACE_MCP_SERVER,
            semconv.JSONRPC_PROTOCOL_VERSION,
            semconv.NETWORK_TRANSPORT,
        )
    } == {
        semconv.MCP_METHOD_NAME: "tools/call",
        semconv.GEN_AI_OPERATION_NAME: "execute_tool",
        semconv.GEN_AI_TOOL_NAME: "add",
        semconv.MASTRACE_MCP_SERVER: "demo",
        semconv.JSONRPC_PROTOCOL_VERSION: "2.0",
        semconv.NETWORK_TRANSPORT: "pipe",  # stdio
    }
    assert span.attributes[semconv.JSONRPC_REQUEST_ID]  # from the SDK's span it took over
    assert semconv.GEN_AI_TOOL_CALL_ARGUMENTS not in span.attributes  # content capture is off


@pytest.mark.slow
def test_stdio_failing_tool_is_an_error_on_the_client(stdio_run: StdioRun) -> None:
    """A tool that fails gives an `isError` result, which marks the client span as an error."""
    span = stdio_run.client_span("mcp.demo.explode")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes[semconv.MASTRACE_TOOL_SUCCESS] is False


@pytest.mark.slow
def test_stdio_failing_tool_is_an_error_on_the_server(stdio_run: StdioRun) -> None:
    """The server span of the failing call records the tool's exception."""
    (row,) = stdio_run.server_rows("tools/call explode")
    assert (row["otel_status_code"], row["exception_type"], row["exception_message"]) == (
        "ERROR",
        "ValueError",
        "boom",
    )
    assert json.loads(row["attributes"])[semconv.MASTRACE_TOOL_SUCCESS] is False


# --- in-process servers ------------------------------------------------------------------------------
def _demo_server() -> MCPServer:
    server = MCPServer("inproc")

    @server.tool()
    @traced_tool
    async def echo_meta(ctx: Context) -> str:
        """Return the request's traceparent."""
        return str((ctx.request_context.meta or {}).get("traceparent"))

    @server.tool()
    async def refuse() -> str:
        """Fail with a JSON-RPC error."""
        raise MCPError(code=-32001, message="refused")

    @server.resource("res://greeting")
    def greeting() -> str:
        return "hi"

    @server.prompt()
    def hello(name: str) -> str:
        return f"hello {name}"

    return server


def _run_client(body: Any, *, mode: str = "legacy") -> None:
    async def main() -> None:
        async with Client(_demo_server(), mode=mode) as client:  # type: ignore[arg-type]
            await body(client)

    anyio.run(main)


def test_sdk_client_span_is_taken_over(instrumented: None, mastrace_spans: CapturedSpans) -> None:
    """The SDK's own `MCP send tools/call` span is not doubled: the server span's parent is ours."""
    _run_client(lambda c: c.call_tool("echo_meta", {}))
    assert_tree(
        mastrace_spans,
        """
        MCP send initialize
          initialize
        notifications/initialized
        mcp.inproc.echo_meta [jsonrpc.request.id=*, mastrace.tool.success=true]
          tools/call echo_meta
          mcp.inproc.tools/list
            tools/list
    """,
    )


def test_traceparent_in_meta_names_the_client_span(instrumented: None, mastrace_spans: CapturedSpans) -> None:
    """The `_meta.traceparent` the server receives points at the client span."""
    results: list[Any] = []

    async def body(client: Client) -> None:
        results.append(await client.call_tool("echo_meta", {}))

    _run_client(body)
    ctx = mastrace_spans.one("mcp.inproc.echo_meta").context
    assert results[0].content[0].text.split("-")[1:3] == [f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"]


def test_traceparent_is_added_to_meta_when_the_sdk_adds_none(mastrace_spans: CapturedSpans) -> None:
    """Where the SDK has no span to hand over (mcp 1.x), mastrace writes `traceparent` into `meta` itself."""
    assert "otel_span" not in mcp_integration._originals  # not instrumented: no SDK span taken over
    with mastrace.get_tracer().span("call") as span:
        kwargs = mcp_integration._with_traceparent(ClientSession.call_tool, {"meta": {"k": "v"}})
    ctx = span.span_context
    assert kwargs["meta"]["k"] == "v"
    assert kwargs["meta"]["traceparent"].split("-")[1:3] == [f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"]


def test_resource_and_prompt_calls_are_traced(instrumented: None, mastrace_spans: CapturedSpans) -> None:
    """Resource and prompt requests get `mcp.<server>.<method>` spans with their target."""

    async def body(client: Client) -> None:
        await client.read_resource("res://greeting")
        await client.get_prompt("hello", {"name": "x"})

    _run_client(body)
    assert (
        mastrace_spans.attributes("mcp.inproc.resources/read")[semconv.MCP_RESOURCE_URI] == "res://greeting"
    )
    assert mastrace_spans.attributes("mcp.inproc.prompts/get")[semconv.GEN_AI_PROMPT_NAME] == "hello"


def test_jsonrpc_error_marks_the_call_failed(instrumented: None, mastrace_spans: CapturedSpans) -> None:
    """A JSON-RPC error reply raises in the caller and marks the span failed with the error code."""

    async def body(client: Client) -> None:
        with pytest.raises(MCPError):
            await client.call_tool("refuse", {})

    _run_client(body)
    span = mastrace_spans.one("mcp.inproc.refuse")
    assert (span.status.status_code, span.attributes[semconv.MASTRACE_TOOL_SUCCESS]) == (
        StatusCode.ERROR,
        False,
    )
    assert span.attributes[semconv.ERROR_TYPE] == "-32001"


def test_set_session_info_names_server_and_session(instrumented: None, mastrace_spans: CapturedSpans) -> None:
    """`set_session_info` overrides the server name in span names and adds `mcp.session.id`."""

    async def body(client: Client) -> None:
        set_session_info(client.session, server_name="files", session_id="s-1")
        await client.list_tools()

    _run_client(body)
    attributes = mastrace_spans.attributes("mcp.files.tools/list")
    assert attributes[semconv.MCP_SESSION_ID] == "s-1"
    assert attributes[semconv.NETWORK_TRANSPORT] == "tcp"  # a session with an id is an HTTP one


def test_transport_given_and_content_captured(instrumented: None) -> None:
    """`set_session_info(transport=...)` sets `network.transport`; capture records arguments and result."""

    async def body(client: Client) -> None:
        set_session_info(client.session, transport="pipe", session_id="s-2")
        await client.call_tool("echo_meta", {})

    with capture_spans(capture_content=True) as captured:
        _run_client(body)
        attributes = captured.attributes("mcp.inproc.echo_meta")
    assert attributes[semconv.NETWORK_TRANSPORT] == "pipe"
    assert attributes[semconv.GEN_AI_TOOL_CALL_ARGUMENTS] == {}
    assert "00-" in str(attributes[semconv.GEN_AI_TOOL_CALL_RESULT])  # the tool returned the traceparent


def test_instrument_server_name_applies_to_every_session(mastrace_spans: CapturedSpans) -> None:
    """A `server_name` given to `instrument_mcp` replaces the serverInfo name."""
    instrument_mcp(server_name="tools")
    try:
        _run_client(lambda c: c.list_tools(), mode="auto")
    finally:
        uninstrument_mcp()
    assert mastrace_spans.by_name("mcp.tools.tools/list")


def test_uninstrument_restores_the_sdk_behaviour(mastrace_spans: CapturedSpans) -> None:
    """After `uninstrument_mcp` only the SDK's own spans remain."""
    instrument_mcp()
    uninstrument_mcp()
    _run_client(lambda c: c.call_tool("echo_meta", {}))
    assert "MCP send tools/call echo_meta" in mastrace_spans.names()
    assert not [n for n in mastrace_spans.names() if n.startswith("mcp.")]


# --- server-side helpers -----------------------------------------------------------------------------
_TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
_SPAN_ID = "b7ad6b7169203331"
_META = {"traceparent": f"00-{_TRACE_ID}-{_SPAN_ID}-01"}


@dataclass
class _LegacyRequest:
    meta: dict[str, str]
    params: dict[str, str]


@dataclass
class _LegacyContext:
    """Stands in for the `Context` of an SDK that traces nothing itself (no such SDK is installed)."""

    request_context: _LegacyRequest


def test_continue_trace_parents_spans_on_the_meta_traceparent(mastrace_spans: CapturedSpans) -> None:
    """Spans opened under `continue_trace(meta)` are children of the caller's span."""
    with continue_trace(_META), mastrace.get_tracer().span("work"):
        pass
    span = mastrace_spans.one("work")
    assert (f"{span.context.trace_id:032x}", f"{span.parent.span_id:016x}") == (_TRACE_ID, _SPAN_ID)


def test_continue_trace_keeps_a_span_already_in_that_trace(mastrace_spans: CapturedSpans) -> None:
    """Inside a span of the same trace (the SDK's server span) the current span stays the parent."""
    tracer = mastrace.get_tracer()
    with tracer.span("server") as server:
        meta = {"traceparent": f"00-{server.span_context.trace_id:032x}-{_SPAN_ID}-01"}
        with continue_trace(meta), tracer.span("work"):
            pass
    assert mastrace_spans.parent_of(mastrace_spans.one("work")).name == "server"


def test_traced_tool_opens_a_server_span_when_the_sdk_does_not(mastrace_spans: CapturedSpans) -> None:
    """Without an SDK server span, the decorator opens `tools/call <tool>` under the caller's span."""

    @traced_tool
    async def lookup(key: str, ctx: _LegacyContext) -> str:
        return key

    ctx = _LegacyContext(_LegacyRequest(_META, {"name": "lookup"}))
    assert anyio.run(lambda: lookup("k", ctx=ctx)) == "k"
    span = mastrace_spans.one("tools/call lookup")
    assert (span.kind, f"{span.parent.span_id:016x}", span.attributes[semconv.MASTRACE_TOOL_SUCCESS]) == (
        SpanKind.SERVER,
        _SPAN_ID,
        True,
    )


def test_traced_tool_records_a_failure(mastrace_spans: CapturedSpans) -> None:
    """A sync tool that raises gives an error span with the exception and `tool.success = false`."""

    @traced_tool(name="divide")
    def divide(a: int, b: int) -> float:
        return a / b

    with pytest.raises(ZeroDivisionError):
        divide(1, 0)
    span = mastrace_spans.one("tools/call divide")
    assert (span.status.status_code, span.attributes[semconv.MASTRACE_TOOL_SUCCESS]) == (
        StatusCode.ERROR,
        False,
    )
    assert span.events[0].attributes["exception.type"] == "ZeroDivisionError"


def test_missing_mcp_raises_export_error_with_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the `mcp` package the integration fails with an install hint."""
    monkeypatch.setitem(sys.modules, "mcp.client.session", None)
    monkeypatch.delitem(sys.modules, "mastrace.integrations.mcp")
    with pytest.raises(ExportError, match=r"pip install 'mastrace\[mcp\]'"):
        importlib.import_module("mastrace.integrations.mcp")
