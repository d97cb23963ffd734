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

# A `spawn`/`forkserver` worker of a configured process finds its parent's settings in this variable
# (`tracing._state.CHILD_SETTINGS_ENV`): its first span configures mastrace from them.
if __import__("os").environ.get("MASTRACE_CHILD_SETTINGS"):
    from .setup import arm_inheritance as _arm_inheritance

    _arm_inheritance()

# Not `typing.TYPE_CHECKING`: importing `typing` is a few milliseconds the `mastrace` command's
# `--help` need not pay (type checkers treat any `TYPE_CHECKING` name as true).
TYPE_CHECKING = False

if TYPE_CHECKING:
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
    from .mixins._experiment import ExperimentRun, experiment_run, record_evaluation
    from .pipeline._pipeline import DestinationStats, FlushResult
    from .registry import Registry
    from .scrubbing._options import ScrubbingOptions
    from .setup._config import configure, force_flush, is_configured, shutdown
    from .tracing._context import create_task, inject_env, wrap
    from .tracing._instrument import instrument
    from .tracing._streams import traced_stream
    from .tracing._tracer import NoOpSpan, Span, Tracer, get_tracer
    from .usage import CostCalculator, StaticPricing, TokenUsage, Usage

# Every name is loaded on first use. `import mastrace` alone costs next to nothing, so the
# `mastrace` command (which imports this package first) answers `--help` without loading the
# OpenTelemetry SDK, and a process that only configures and creates spans does not pay for wrapt,
# asyncio, the registry's package metadata or the mixins (tens of milliseconds at import).
_LAZY = {
    "configure": ".setup._config",
    "force_flush": ".setup._config",
    "is_configured": ".setup._config",
    "shutdown": ".setup._config",
    "DestinationStats": ".pipeline._pipeline",
    "FlushResult": ".pipeline._pipeline",
    "ScrubbingOptions": ".scrubbing._options",
    "NoOpSpan": ".tracing._tracer",
    "Span": ".tracing._tracer",
    "Tracer": ".tracing._tracer",
    "get_tracer": ".tracing._tracer",
    "create_task": ".tracing._context",
    "inject_env": ".tracing._context",
    "wrap": ".tracing._context",
    "instrument": ".tracing._instrument",
    "ExperimentRun": ".mixins._experiment",
    "experiment_run": ".mixins._experiment",
    "record_evaluation": ".mixins._experiment",
    "traced_stream": ".tracing._streams",
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
    "ExperimentRun",
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
    "experiment_run",
    "force_flush",
    "get_tracer",
    "inject_env",
    "instrument",
    "is_configured",
    "record_evaluation",
    "shutdown",
    "traced_stream",
    "wrap",
]
