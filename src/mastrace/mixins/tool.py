"""`ToolMixin`: one span per tool execution, `Tool execution: <name>`.

Example:
    >>> import mastrace
    >>> class Toolbox(mastrace.ToolMixin):
    ...     pass
    >>> with Toolbox().tool_execution("mcp__filesystem__write_file", call_id="c1") as span:
    ...     span.set_attribute("tool.success", True)
"""

from __future__ import annotations

from typing import Any

from .. import semconv
from .._tracer import NoOpSpan, Span
from .coordination import mixin_tracer, prefixed

__all__ = ["ToolMixin"]


class ToolMixin:
    """Adds MassGen's `Tool execution: <name>` spans to a tool runner."""

    def tool_execution(self, name: str, **attrs: Any) -> Span | NoOpSpan:
        """Open the `Tool execution: <name>` span (use with `with` or `async with`).

        An exception leaving the block sets error status. The span carries
        `gen_ai.operation.name = "execute_tool"` and `gen_ai.tool.name`.

        Args:
            name: The tool name.
            **attrs: Extra attributes (plain names get the `massgen.` prefix).
        """
        return mixin_tracer().span(
            semconv.SPAN_TOOL_EXECUTION.format(name=name),
            {
                semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OP_EXECUTE_TOOL,
                semconv.GEN_AI_TOOL_NAME: name,
                **prefixed(attrs),
            },
        )
