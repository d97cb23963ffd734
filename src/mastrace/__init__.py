"""mastrace: OpenTelemetry-native tracing and configuration capture for multi-agent LLM systems.

Example:
    >>> import mastrace
    >>> mastrace.configure(service_name="my-agents")  # doctest: +SKIP
    >>> tracer = mastrace.get_tracer()
    >>> with tracer.span("coordination.session"):
    ...     pass
"""

from __future__ import annotations

from ._config import configure, force_flush, is_configured, shutdown
from ._context import create_task, inject_env, wrap
from ._instrument import instrument
from ._pipeline import DestinationStats, FlushResult
from ._scrubbing import ScrubbingOptions
from ._streams import traced_stream
from ._tracer import NoOpSpan, Span, Tracer, get_tracer
from .exceptions import ConfigError, ExportError, MastraceError, MastraceWarning, StoreError
from .mixins import (
    AgentMixin,
    ConfigurableMixin,
    CoordinationMixin,
    LLMBackendMixin,
    MCPClientMixin,
    ToolMixin,
    TraceableMixin,
    UsageTrackableMixin,
)
from .registry import Registry
from .usage import CostCalculator, StaticPricing, TokenUsage, Usage

__version__ = "0.1.0"

__all__ = [
    "AgentMixin",
    "ConfigError",
    "ConfigurableMixin",
    "CoordinationMixin",
    "CostCalculator",
    "DestinationStats",
    "ExportError",
    "FlushResult",
    "LLMBackendMixin",
    "MCPClientMixin",
    "MastraceError",
    "MastraceWarning",
    "NoOpSpan",
    "Registry",
    "ScrubbingOptions",
    "Span",
    "StaticPricing",
    "StoreError",
    "TokenUsage",
    "ToolMixin",
    "TraceableMixin",
    "Tracer",
    "Usage",
    "UsageTrackableMixin",
    "__version__",
    "configure",
    "create_task",
    "force_flush",
    "get_tracer",
    "inject_env",
    "instrument",
    "is_configured",
    "shutdown",
    "traced_stream",
    "wrap",
]
