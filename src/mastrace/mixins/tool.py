"""`ToolMixin`: one span per tool execution, `Tool execution: <name>`.

The span is the GenAI conventions' `execute_tool` span: `gen_ai.tool.name`, `gen_ai.tool.type`,
`gen_ai.tool.call.id` (the id of the model's tool call it answers, when given), and with content
capture on the arguments (`gen_ai.tool.call.arguments`); `set_result()` records the outcome.

Example:
    >>> import mastrace
    >>> class Toolbox(mastrace.ToolMixin):
    ...     pass
    >>> with Toolbox().tool_execution("mcp__filesystem__write_file", call_id="c1") as call:
    ...     call.set_result({"written": True})
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any

from .. import semconv
from ..tracing._errors import log_internal_error
from ..tracing._genai import capture_enabled
from ..tracing._tracer import NoOpSpan, Span
from .coordination import MIXIN_TRACER, SpanHandle, add_prefixed, put_own

__all__ = ["ToolExecution", "ToolMixin"]


class ToolExecution(SpanHandle):
    """The handle of a `Tool execution: <name>` span; a sync and async context manager."""

    def __init__(self, span: Span | NoOpSpan) -> None:
        self._span = span
        self.success: bool | None = None

    def __enter__(self) -> ToolExecution:
        self._span.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:  # not `handle_internal_errors`: a generator context manager costs more, on every call
            if exc is not None and not isinstance(exc, GeneratorExit):
                self.success = False
                self._span._set_valid_attributes(
                    {semconv.MASTRACE_TOOL_SUCCESS: False, semconv.ERROR_TYPE: type(exc).__qualname__}
                )
            elif self.success is None:
                self.success = True
                self._span.set_attribute(semconv.MASTRACE_TOOL_SUCCESS, True)
        except Exception as error:
            log_internal_error("tool execution end", error)
        self._span.__exit__(exc_type, exc, tb)

    def set_result(self, result: Any, *, success: bool = True) -> None:
        """Record the tool's outcome, and with content capture on its result (`gen_ai.tool.call.result`)."""
        self.success = success
        attrs: dict[str, Any] = {semconv.MASTRACE_TOOL_SUCCESS: success}
        if not success:
            attrs[semconv.ERROR_TYPE] = "tool_error"
            self._span.set_status("error", "the tool reported an error")
        if capture_enabled():  # the result is the caller's: coerced with the rest
            attrs[semconv.GEN_AI_TOOL_CALL_RESULT] = result
            self._span.set_attributes(attrs)
        elif type(success) is bool:
            self._span._set_valid_attributes(attrs)
        else:
            self._span.set_attributes(attrs)


class ToolMixin:
    """Adds MassGen's `Tool execution: <name>` spans to a tool runner."""

    def tool_execution(
        self,
        name: str,
        *,
        call_id: str | None = None,
        tool_type: str = semconv.GEN_AI_TOOL_TYPE_FUNCTION,
        arguments: Mapping[str, Any] | None = None,
        **attrs: Any,
    ) -> ToolExecution:
        """Open the `Tool execution: <name>` span (use with `with` or `async with`).

        An exception leaving the block sets error status, `error.type` and
        `mastrace.tool.success = false`.

        Args:
            name: The tool name (`gen_ai.tool.name`).
            call_id: The id of the model's tool call this execution answers (`gen_ai.tool.call.id`).
            tool_type: `gen_ai.tool.type`: `function` (run by the application, the default),
                `extension` or `datastore`.
            arguments: The call's arguments, recorded with content capture on.
            **attrs: Extra attributes (plain names get the `massgen.` prefix).
        """
        # The call's own attributes, valid as they are (no coercion pass); the arguments, the extra
        # attributes and what was given that is not a plain string go through it.
        valid: dict[str, Any] = {semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OP_EXECUTE_TOOL}
        user: dict[str, Any] = {}
        if type(name) is str:  # (`put_own` with the usual case first: one call fewer)
            valid[semconv.GEN_AI_TOOL_NAME] = name
        else:
            put_own(valid, user, semconv.GEN_AI_TOOL_NAME, name)
        if type(tool_type) is str:
            valid[semconv.GEN_AI_TOOL_TYPE] = tool_type
        else:
            put_own(valid, user, semconv.GEN_AI_TOOL_TYPE, tool_type)
        if call_id is not None:
            put_own(valid, user, semconv.GEN_AI_TOOL_CALL_ID, call_id)
        if arguments is not None and capture_enabled():
            user[semconv.GEN_AI_TOOL_CALL_ARGUMENTS] = dict(arguments)
        if attrs:
            add_prefixed(user, attrs)
        span = MIXIN_TRACER._span(semconv.SPAN_TOOL_EXECUTION.format(name=name), valid, user or None)
        return ToolExecution(span)
