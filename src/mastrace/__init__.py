"""mastrace: OpenTelemetry-native tracing and configuration capture for multi-agent LLM systems.

Example:
    >>> import mastrace
    >>> mastrace.configure(service_name="my-agents")  # doctest: +SKIP
    >>> tracer = mastrace.get_tracer()
    >>> with tracer.span("coordination.session"):
    ...     pass
"""

from __future__ import annotations

from ._lazy import lazy_exports as _lazy_exports
from .exceptions import ConfigError, ExportError, MastraceError, MastraceWarning, StoreError

# Not `typing.TYPE_CHECKING`: importing `typing` is a few milliseconds the `mastrace` command's
# `--help` need not pay (type checkers treat any `TYPE_CHECKING` name as true).
TYPE_CHECKING = False

if TYPE_CHECKING:
    from ._config import configure, force_flush, is_configured, shutdown
    from ._context import create_task, inject_env, wrap
    from ._instrument import instrument
    from ._pipeline import DestinationStats, FlushResult
    from ._streams import traced_stream
    from ._tracer import NoOpSpan, Span, Tracer, get_tracer
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
    from .scrubbing._options import ScrubbingOptions
    from .usage import CostCalculator, StaticPricing, TokenUsage, Usage

# Every name is loaded on first use. `import mastrace` alone costs next to nothing, so the
# `mastrace` command (which imports this package first) answers `--help` without loading the
# OpenTelemetry SDK, and a process that only configures and creates spans does not pay for wrapt,
# asyncio, the registry's package metadata or the mixins (tens of milliseconds at import).
_LAZY = {
    "configure": "._config",
    "force_flush": "._config",
    "is_configured": "._config",
    "shutdown": "._config",
    "DestinationStats": "._pipeline",
    "FlushResult": "._pipeline",
    "ScrubbingOptions": ".scrubbing._options",
    "NoOpSpan": "._tracer",
    "Span": "._tracer",
    "Tracer": "._tracer",
    "get_tracer": "._tracer",
    "create_task": "._context",
    "inject_env": "._context",
    "wrap": "._context",
    "instrument": "._instrument",
    "traced_stream": "._streams",
    "AgentMixin": ".mixins",
    "ConfigurableMixin": ".mixins",
    "CoordinationMixin": ".mixins",
    "LLMBackendMixin": ".mixins",
    "MCPClientMixin": ".mixins",
    "ToolMixin": ".mixins",
    "TraceableMixin": ".mixins",
    "UsageTrackableMixin": ".mixins",
    "Registry": ".registry",
    "CostCalculator": ".usage",
    "StaticPricing": ".usage",
    "TokenUsage": ".usage",
    "Usage": ".usage",
}


__getattr__, __dir__ = _lazy_exports(__name__, globals(), _LAZY)


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
