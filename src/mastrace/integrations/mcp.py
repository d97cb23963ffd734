"""Trace Model Context Protocol calls across the client and the server with the official `mcp` SDK.

Client side, `instrument_mcp()` patches `mcp.ClientSession` so that every `call_tool` becomes an
`mcp.<server>.<tool>` span (kind client), and `list_tools`, `list_resources`, `read_resource`,
`list_prompts` and `get_prompt` become `mcp.<server>.<method>` spans (`mcp.demo.tools/list`). The
W3C `traceparent` of that span travels in the request's `_meta`, as the MCP semantic conventions
specify. The spans carry the MCP conventions' attributes (`mcp.method.name`, `mcp.session.id`,
`mcp.protocol.version`, `jsonrpc.request.id`, `jsonrpc.protocol.version`, `network.transport`,
`gen_ai.operation.name = execute_tool` and `gen_ai.tool.name` for tool calls). A result with
`isError` or an exception marks the span as an error with `error.type` (`tool_error` for
`isError`) and `mastrace.tool.success = false`; the server's name is `mastrace.mcp.server`.

`mcp` 2.x traces requests itself: a client span `MCP send <method> [<name>]` around each request,
which also writes `traceparent` into `_meta`, and a server span `<method> [<name>]` continuing
it. To keep one span per call, the instrumented client methods take over the SDK's client span:
its attributes (`jsonrpc.request.id`, JSON-RPC error codes) land on the mastrace span and the
`traceparent` it sends is the mastrace span's. Requests mastrace does not wrap (`initialize`,
`ping`) keep the SDK's own span.

Server side, `traced_tool` (or `continue_trace`) makes the caller's trace current inside a tool
and records the outcome on the server span `tools/call <tool>`: the SDK's own when `mcp` 2.x made
one, otherwise a new one.

Example:
    ```python
    from mastrace.integrations.mcp import instrument_mcp, traced_tool

    instrument_mcp()  # client process, after mastrace.configure()


    @server.tool()  # server process (MCPServer)
    @traced_tool
    async def search(query: str, ctx: Context) -> str: ...
    ```
"""

from __future__ import annotations

import functools
import inspect
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import wrapt
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .. import semconv
from ..exceptions import ExportError
from ..tracing._errors import handle_internal_errors
from ..tracing._genai import capture_enabled
from ..tracing._tracer import NoOpSpan, Span, get_tracer

try:
    from mcp.client.session import ClientSession
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ExportError("the MCP integration needs the `mcp` package: pip install 'mastrace[mcp]'") from exc

__all__ = ["continue_trace", "instrument_mcp", "set_session_info", "traced_tool", "uninstrument_mcp"]

F = TypeVar("F", bound=Callable[..., Any])

# ClientSession method -> (MCP method, the parameter naming its target, the attribute it goes in)
_METHODS: dict[str, tuple[str, str | None, str | None]] = {
    "call_tool": (semconv.MCP_METHOD_TOOLS_CALL, "name", semconv.GEN_AI_TOOL_NAME),
    "list_tools": (semconv.MCP_METHOD_TOOLS_LIST, None, None),
    "list_resources": (semconv.MCP_METHOD_RESOURCES_LIST, None, None),
    "read_resource": (semconv.MCP_METHOD_RESOURCES_READ, "uri", semconv.MCP_RESOURCE_URI),
    "list_prompts": (semconv.MCP_METHOD_PROMPTS_LIST, None, None),
    "get_prompt": (semconv.MCP_METHOD_PROMPTS_GET, "name", semconv.GEN_AI_PROMPT_NAME),
}
_TRACER_NAME = "mastrace.integrations.mcp"
_DISPATCHER_MODULE = "mcp.shared.jsonrpc_dispatcher"
_PROPAGATOR = TraceContextTextMapPropagator()

# The span of the wrapped client call in flight, for the SDK's own client span to hand over to.
_ADOPT: ContextVar[trace.Span | None] = ContextVar("mastrace_mcp_adopt", default=None)
_SESSIONS: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
_originals: dict[str, Any] = {}
_default_server: list[str | None] = [None]
_default_transport: list[str | None] = [None]


# --- client side -----------------------------------------------------------------------------------
def instrument_mcp(*, server_name: str | None = None, transport: str | None = None) -> None:
    """Trace the `mcp` SDK's `ClientSession` calls. Safe to call more than once.

    Args:
        server_name: The `<server>` in span names for every session. By default each session
            uses its server's `serverInfo.name` from the initialize result; `set_session_info()`
            names one session.
        transport: `network.transport` for every session: `pipe` (stdio) or `tcp` (HTTP). By
            default `tcp` for a session with an `mcp.session.id`, else `pipe`.

    Example:
        >>> from mastrace.integrations.mcp import instrument_mcp
        >>> instrument_mcp()
    """
    with _LOCK:
        _default_server[0] = server_name
        _default_transport[0] = transport
        if _originals:
            return
        for method in (*_METHODS, "initialize"):
            original = ClientSession.__dict__.get(method)
            if original is None:
                continue
            _originals[method] = original
            wrapper = _remember_server if method == "initialize" else _client_wrapper(method)
            setattr(ClientSession, method, wrapt.FunctionWrapper(original, wrapper))
        _patch_sdk_client_span()


def uninstrument_mcp() -> None:
    """Undo `instrument_mcp()`: `ClientSession` calls are no longer traced by mastrace."""
    with _LOCK:
        for method, original in _originals.items():
            if method == "otel_span":
                _dispatcher_module().otel_span = original
            else:
                setattr(ClientSession, method, original)
        _originals.clear()
        _default_server[0] = None
        _default_transport[0] = None


def set_session_info(
    session: Any,
    *,
    server_name: str | None = None,
    session_id: str | None = None,
    transport: str | None = None,
) -> Any:
    """Name a session's server in span names, give its `mcp.session.id` and its `network.transport`
    (`pipe` or `tcp`); returns the session.

    Example:
        >>> set_session_info(session, server_name="filesystem", session_id="abc")  # doctest: +SKIP
    """
    info = _SESSIONS.setdefault(session, {})
    if server_name is not None:
        info["server"] = server_name
    if session_id is not None:
        info["session_id"] = session_id
    if transport is not None:
        info["transport"] = transport
    return session


def _server_name(session: Any) -> str:
    info = _SESSIONS.get(session) or {}
    name = info.get("server") or _default_server[0]
    if not name:  # mcp 2.x keeps serverInfo on the session; for 1.x initialize() recorded it
        name = getattr(getattr(session, "server_info", None), "name", None) or info.get("init_server")
    return name or "unknown"


async def _remember_server(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    result = await wrapped(*args, **kwargs)
    with handle_internal_errors("mcp initialize"):
        server_info = getattr(result, "server_info", None) or getattr(result, "serverInfo", None)
        name = getattr(server_info, "name", None)
        if isinstance(name, str):
            _SESSIONS.setdefault(instance, {})["init_server"] = name
    return result


def _client_wrapper(method: str) -> Callable[..., Any]:
    mcp_method, target_param, target_key = _METHODS[method]

    async def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        span = _open_client_span(wrapped, instance, args, kwargs, mcp_method, target_param, target_key)
        if not isinstance(span, Span):
            return await wrapped(*args, **kwargs)
        with span:
            kwargs = _with_traceparent(wrapped, kwargs)
            token = _ADOPT.set(span.otel_span)
            try:
                result = await wrapped(*args, **kwargs)
            except Exception as exc:
                _record_failure(span, mcp_method, exc)
                raise
            finally:
                _ADOPT.reset(token)
            _record_result(span, mcp_method, result)
            return result

    return wrapper


def _open_client_span(
    wrapped: Any,
    session: Any,
    args: Any,
    kwargs: Any,
    mcp_method: str,
    target_param: str | None,
    target_key: str | None,
) -> Span | NoOpSpan | None:
    with handle_internal_errors("mcp client span"):
        target = _argument(wrapped, args, kwargs, target_param) if target_param else None
        server = _server_name(session)
        is_tool = mcp_method == semconv.MCP_METHOD_TOOLS_CALL
        name = semconv.SPAN_MCP_TOOL.format(server=server, tool=target if is_tool else mcp_method)
        info = _SESSIONS.get(session) or {}
        session_id = info.get("session_id")
        attrs: dict[str, Any] = {
            semconv.MCP_METHOD_NAME: mcp_method,
            semconv.MASTRACE_MCP_SERVER: server,
            semconv.JSONRPC_PROTOCOL_VERSION: semconv.JSONRPC_VERSION,
            semconv.NETWORK_TRANSPORT: _transport(info),
        }
        if target_key and target is not None:
            attrs[target_key] = str(target)
        if is_tool:
            attrs[semconv.GEN_AI_OPERATION_NAME] = semconv.GEN_AI_OP_EXECUTE_TOOL
            if capture_enabled():
                arguments = _argument(wrapped, args, kwargs, "arguments")
                if arguments is not None:
                    attrs[semconv.GEN_AI_TOOL_CALL_ARGUMENTS] = arguments
        if session_id:
            attrs[semconv.MCP_SESSION_ID] = session_id
        version = getattr(session, "protocol_version", None)
        if isinstance(version, str):
            attrs[semconv.MCP_PROTOCOL_VERSION] = version
        return get_tracer(_TRACER_NAME).span(name, attrs, kind=SpanKind.CLIENT)
    return None


def _transport(info: Mapping[str, str]) -> str:
    """`network.transport`: as given, else `tcp` for a session with an id (only HTTP transports
    have one), else `pipe` (stdio, and in-process sessions)."""
    given = info.get("transport") or _default_transport[0]
    if given:
        return given
    return semconv.NETWORK_TRANSPORT_TCP if info.get("session_id") else semconv.NETWORK_TRANSPORT_PIPE


def _argument(wrapped: Any, args: Any, kwargs: Any, name: str) -> Any:
    if name in kwargs:
        return kwargs[name]
    params = _parameters(getattr(wrapped, "__func__", wrapped))
    index = params.index(name) if name in params else len(args)
    return args[index] if index < len(args) else None


@functools.lru_cache(maxsize=64)
def _parameters(fn: Any) -> tuple[str, ...]:
    """The parameter names of an unbound ClientSession method, without `self`."""
    return tuple(p for p in inspect.signature(fn).parameters if p != "self")


def _with_traceparent(wrapped: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Put the current span's `traceparent` into the request's `_meta`, for SDKs that do not."""
    if "otel_span" in _originals or "meta" not in _parameters(getattr(wrapped, "__func__", wrapped)):
        return kwargs  # mcp 2.x injects it from the span it hands over to us
    with handle_internal_errors("mcp traceparent"):
        meta = dict(kwargs.get("meta") or {})
        _PROPAGATOR.inject(meta)
        return {**kwargs, "meta": meta}
    return kwargs


def _record_result(span: Span, mcp_method: str, result: Any) -> None:
    if mcp_method != semconv.MCP_METHOD_TOOLS_CALL:
        return
    with handle_internal_errors("mcp tool result"):
        is_error = bool(getattr(result, "is_error", None) or getattr(result, "isError", None))
        span.set_attribute(semconv.MASTRACE_TOOL_SUCCESS, not is_error)
        if capture_enabled():
            structured = getattr(result, "structured_content", None) or getattr(
                result, "structuredContent", None
            )
            span.set_attribute(semconv.GEN_AI_TOOL_CALL_RESULT, structured or _result_text(result))
        if is_error:
            span.set_attribute(semconv.ERROR_TYPE, "tool_error")
            span.set_status("error", _result_text(result) or "the tool reported an error")


def _record_failure(span: Span, mcp_method: str, exc: BaseException) -> None:
    with handle_internal_errors("mcp tool failure"):
        if mcp_method == semconv.MCP_METHOD_TOOLS_CALL:
            span.set_attribute(semconv.MASTRACE_TOOL_SUCCESS, False)
        attributes = getattr(span.otel_span, "attributes", None) or {}
        if semconv.ERROR_TYPE not in attributes:  # the SDK sets a JSON-RPC error code there
            span.set_attribute(semconv.ERROR_TYPE, type(exc).__qualname__)


def _result_text(result: Any) -> str:
    for block in getattr(result, "content", None) or ():
        text = getattr(block, "text", None)
        if isinstance(text, str):
            return text[:500]
    return ""


# --- taking over the SDK's own client span ---------------------------------------------------------
def _dispatcher_module() -> Any:
    import importlib

    return importlib.import_module(_DISPATCHER_MODULE)


def _patch_sdk_client_span() -> None:
    try:
        module = _dispatcher_module()
    except ImportError:  # mcp 1.x: no SDK spans to take over
        return
    original = getattr(module, "otel_span", None)
    if original is None:
        return
    _originals["otel_span"] = original
    module.otel_span = wrapt.FunctionWrapper(original, _adopt_sdk_span)


def _adopt_sdk_span(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """Hand back the mastrace span in flight instead of starting the SDK's `MCP send ...` span."""
    ours = _ADOPT.get()
    if ours is None or kwargs.get("kind") is not SpanKind.CLIENT or trace.get_current_span() is not ours:
        return wrapped(*args, **kwargs)
    _ADOPT.set(None)  # one request per wrapped call; the wrapper's reset restores the slot
    with handle_internal_errors("mcp adopt span"):
        attributes = dict(kwargs.get("attributes") or {})
        attributes.pop(semconv.MCP_METHOD_NAME, None)
        ours.set_attributes(attributes)
    return trace.use_span(ours, end_on_exit=False, record_exception=False, set_status_on_exception=False)


# --- server side -----------------------------------------------------------------------------------
@contextmanager
def continue_trace(source: Any) -> Iterator[None]:
    """Make the caller's trace current, from an MCP request's `_meta`, for the duration of the block.

    Inside a tool of an `mcp` 2.x server the SDK's server span already continues the trace; then
    this does nothing. Otherwise (older SDKs, other frameworks) the `traceparent` of `_meta`
    becomes the parent of the spans started in the block.

    Args:
        source: The tool's `Context` (`mcp.server.mcpserver.Context` or FastMCP's), a
            `ServerRequestContext`, or the `_meta` mapping itself.

    Example:
        >>> @server.tool()  # doctest: +SKIP
        ... async def search(query: str, ctx: Context) -> str:
        ...     with continue_trace(ctx), tracer.span("search.backend"):
        ...         ...
    """
    token = None
    with handle_internal_errors("mcp continue_trace"):
        parent = _extract(_meta_of(source))
        if parent is not None and not _already_in(parent):
            token = otel_context.attach(parent)
    try:
        yield
    finally:
        if token is not None:
            otel_context.detach(token)


def _request_context(source: Any) -> Any:
    """The request context a tool's `Context` wraps, or `source` itself when it wraps none."""
    try:
        return source.request_context
    except AttributeError:
        return source
    except Exception:  # the SDK's property raises outside a request
        return None


def _is_tool_context(value: Any) -> bool:
    if isinstance(value, (str, bytes, Mapping)):
        return False
    return hasattr(type(value), "request_context") or "request_context" in getattr(value, "__dict__", ())


def _meta_of(source: Any) -> Mapping[str, Any] | None:
    if source is None or isinstance(source, Mapping):
        return source
    meta = getattr(_request_context(source), "meta", None)
    if meta is None or isinstance(meta, Mapping):
        return meta
    dumped = getattr(meta, "model_dump", None)  # mcp 1.x: a pydantic model with extra fields
    return dumped() if callable(dumped) else None


def _extract(meta: Mapping[str, Any] | None) -> otel_context.Context | None:
    if not meta or not isinstance(meta.get("traceparent"), str):
        return None
    carrier = {k: v for k, v in meta.items() if k in ("traceparent", "tracestate") and isinstance(v, str)}
    ctx = _PROPAGATOR.extract(carrier)
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def _already_in(parent: otel_context.Context) -> bool:
    current = trace.get_current_span().get_span_context()
    return current.is_valid and current.trace_id == trace.get_current_span(parent).get_span_context().trace_id


def traced_tool(fn: F | None = None, *, name: str | None = None) -> Any:
    """Decorate an MCP server tool so it continues the caller's trace and records its outcome.

    Put it under the server's `@tool()` decorator. The tool's `Context` argument, when it takes
    one, supplies the request's `_meta`. The outcome goes on the server span `tools/call <tool>`:
    `mastrace.tool.success`, and for an exception its record, `error.type` and an error status.

    Args:
        fn: The tool function (sync or async).
        name: The tool name when it differs from the request's and the function's name.
    """

    def decorate(func: F) -> F:
        tool = name or func.__name__
        if inspect.iscoroutinefunction(func):

            @wrapt.decorator
            async def async_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
                with _server_call(tool, args, kwargs) as record:
                    return record(await wrapped(*args, **kwargs))

            return async_wrapper(func)  # type: ignore[return-value]

        @wrapt.decorator
        def sync_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            with _server_call(tool, args, kwargs) as record:
                return record(wrapped(*args, **kwargs))

        return sync_wrapper(func)  # type: ignore[return-value]

    return decorate(fn) if fn is not None else decorate


@contextmanager
def _server_call(tool: str, args: Any, kwargs: Any) -> Iterator[Callable[[Any], Any]]:
    source = next((a for a in (*args, *kwargs.values()) if _is_tool_context(a)), None)
    tool = _request_tool_name(source) or tool
    span_name = f"{semconv.MCP_METHOD_TOOLS_CALL} {tool}"
    with continue_trace(source), ExitStack() as stack:
        current = trace.get_current_span()
        sdk_span = getattr(current, "name", None) == span_name  # mcp 2.x made the server span
        target: Any = (
            current
            if sdk_span
            else stack.enter_context(get_tracer(_TRACER_NAME).span(span_name, kind=SpanKind.SERVER))
        )
        _annotate_server(target, tool)

        def record(result: Any) -> Any:
            failed = bool(getattr(result, "is_error", None) or getattr(result, "isError", None))
            _set(target, semconv.MASTRACE_TOOL_SUCCESS, not failed)
            return result

        try:
            yield record
        except Exception as exc:
            _set(target, semconv.MASTRACE_TOOL_SUCCESS, False)
            _set(target, semconv.ERROR_TYPE, type(exc).__qualname__)
            if sdk_span:  # a span of our own records the exception as it exits
                _record_on_sdk_span(current, exc)
            raise


def _request_tool_name(source: Any) -> str | None:
    with handle_internal_errors("mcp tool name"):
        params = getattr(_request_context(source), "params", None) if source is not None else None
        value = params.get("name") if isinstance(params, Mapping) else getattr(params, "name", None)
        return value if isinstance(value, str) else None
    return None


def _annotate_server(span: Any, tool: str) -> None:
    _set(span, semconv.MCP_METHOD_NAME, semconv.MCP_METHOD_TOOLS_CALL)
    _set(span, semconv.GEN_AI_OPERATION_NAME, semconv.GEN_AI_OP_EXECUTE_TOOL)
    _set(span, semconv.GEN_AI_TOOL_NAME, tool)


def _record_on_sdk_span(span: trace.Span, exc: BaseException) -> None:
    with handle_internal_errors("mcp tool failure"):
        span.record_exception(exc)
        span.set_status(trace.Status(trace.StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))


def _set(span: Any, key: str, value: Any) -> None:
    with handle_internal_errors("mcp server attribute"):
        span.set_attribute(key, value)
