"""Mixins that give multi-agent components MassGen's spans and MASEval's gathering methods.

| mixin                   | requires      | gives                                                      |
|-------------------------|---------------|------------------------------------------------------------|
| `CoordinationMixin`     | —             | `coordination.session` and its events, answers, votes      |
| `AgentMixin`            | `agent_id`    | `agent.<id>.round_<n>`, `agent.<id>.presentation`          |
| `LLMBackendMixin`       | `provider`    | `llm.<provider>.stream` with usage and time to first chunk |
| `MCPClientMixin`        | `server_name` | `mcp.<server>.<tool>` client spans                         |
| `ToolMixin`             | —             | `Tool execution: <name>`                                   |
| `TraceableMixin`        | —             | `gather_traces()`                                          |
| `ConfigurableMixin`     | —             | `gather_config()`                                          |
| `UsageTrackableMixin`   | —             | `record_usage()`, `gather_usage()`                         |
"""

from __future__ import annotations

from .gather import ConfigurableMixin, TraceableMixin, UsageTrackableMixin  # isort: skip
from .agent import AgentMixin, AgentRound
from .coordination import CoordinationMixin, CoordinationSession, current_session
from .llm import LLMBackendMixin
from .mcp import MCPClientMixin, MCPToolCall
from .tool import ToolExecution, ToolMixin

__all__ = [
    "AgentMixin",
    "AgentRound",
    "ConfigurableMixin",
    "CoordinationMixin",
    "CoordinationSession",
    "LLMBackendMixin",
    "MCPClientMixin",
    "MCPToolCall",
    "ToolExecution",
    "ToolMixin",
    "TraceableMixin",
    "UsageTrackableMixin",
    "current_session",
]
