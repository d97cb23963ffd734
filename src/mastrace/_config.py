"""`configure()`, its environment variables, and the one function that wires the pipeline.

Every argument of `configure()` can also come from the environment; an explicit argument wins.

| argument            | environment variable                                   | default          |
|---------------------|--------------------------------------------------------|------------------|
| `service_name`      | `OTEL_SERVICE_NAME`                                    | script name      |
| `local`             | `MASTRACE_DIR` (a path), `MASTRACE_LOCAL=0` to disable | `./.mastrace`    |
| `otlp`              | `MASTRACE_OTLP`, else `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT` | off        |
| `logfire`           | `MASTRACE_LOGFIRE=1` or `LOGFIRE_TOKEN`                | off              |
| `console`           | `MASTRACE_CONSOLE=1`                                   | off              |
| `scrubbing`         | `MASTRACE_SCRUBBING=0` to disable                      | on               |
| `sample_rate`       | `MASTRACE_SAMPLE_RATE`                                 | 1.0              |
| `propagate_threads` | `MASTRACE_PROPAGATE_THREADS=0` to disable              | on               |
| (everything)        | `MASTRACE_DISABLED=1`: every call is a no-op           |                  |
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from . import _context, semconv
from ._errors import log_internal_error
from ._pipeline import Destination, FlushResult, Pipeline, SwitchProcessor
from ._scrubbing import Scrubber, ScrubbingOptions
from ._snapshot import Limits
from ._state import STATE
from ._transform import prepare_span
from .exceptions import ConfigError

__all__ = ["configure", "force_flush", "is_configured", "shutdown"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _env_flag(name: str) -> bool | None:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return None
    value = value.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{name}={value!r}: expected one of 1/0/true/false/yes/no/on/off")


def disabled_by_env() -> bool:
    """Whether `MASTRACE_DISABLED` asks for every call to be a no-op."""
    return bool(_env_flag("MASTRACE_DISABLED"))


@dataclass(frozen=True)
class Settings:
    """The resolved configuration (arguments merged with the environment)."""

    service_name: str
    local: Path | None
    otlp: str | bool | None
    logfire: str | bool | None
    console: bool
    scrubbing: ScrubbingOptions | None
    sample_rate: float
    propagate_threads: bool
    exporters: tuple[SpanExporter, ...] = ()
    flush_interval: float = 0.5
    max_queue_size: int = 200_000
    synchronous: bool = False
    limits: Limits = field(default_factory=Limits)


def _resolve(**kw: Any) -> Settings:
    service_name = kw["service_name"] or os.environ.get("OTEL_SERVICE_NAME") or _default_service_name()
    local = kw["local"]
    if local is True:
        if _env_flag("MASTRACE_LOCAL") is False:
            local = False
        else:
            local = os.environ.get("MASTRACE_DIR") or ".mastrace"
    local_path = Path(local).expanduser().resolve() if local not in (False, None) else None
    otlp = kw["otlp"]
    if otlp is None:
        otlp = os.environ.get("MASTRACE_OTLP") or None
        if otlp is not None and otlp.lower() in _FALSE:
            otlp = None
        elif otlp is not None and otlp.lower() in _TRUE:
            otlp = True
        elif otlp is None and (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                               or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")):
            otlp = True
    logfire = kw["logfire"]
    if logfire is None:
        logfire = True if (_env_flag("MASTRACE_LOGFIRE") or os.environ.get("LOGFIRE_TOKEN")) else None
    console = kw["console"] or bool(_env_flag("MASTRACE_CONSOLE"))
    scrubbing = kw["scrubbing"]
    if scrubbing is True:
        scrubbing = None if _env_flag("MASTRACE_SCRUBBING") is False else ScrubbingOptions()
    elif scrubbing is False:
        scrubbing = None
    elif not isinstance(scrubbing, ScrubbingOptions):
        raise ConfigError(f"scrubbing must be True, False or mastrace.ScrubbingOptions, not {scrubbing!r}")
    rate = kw["sample_rate"]
    if rate is None:
        rate = float(os.environ.get("MASTRACE_SAMPLE_RATE", "1.0"))
    if not 0.0 <= float(rate) <= 1.0:
        raise ConfigError(f"sample_rate must be between 0 and 1, not {rate!r}")
    propagate = kw["propagate_threads"]
    if propagate is None:
        propagate = _env_flag("MASTRACE_PROPAGATE_THREADS") is not False
    return Settings(
        service_name=service_name, local=local_path, otlp=otlp, logfire=logfire, console=bool(console),
        scrubbing=scrubbing, sample_rate=float(rate), propagate_threads=bool(propagate),
        exporters=tuple(kw["exporters"]), flush_interval=float(kw["flush_interval"]),
        max_queue_size=int(kw["max_queue_size"]), synchronous=bool(kw["synchronous"]),
    )


def _default_service_name() -> str:
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    name = Path(argv0).stem if argv0 and argv0 != "-c" else ""
    return name or "mastrace"


class _Runtime:
    """Everything `configure()` built, so that the next call or `shutdown()` can tear it down."""

    def __init__(self) -> None:
        self.settings: Settings | None = None
        self.pipeline: Pipeline | None = None
        self.switch = SwitchProcessor()
        self.own_provider: TracerProvider | None = None
        self.sampler_rate = 1.0
        self.hooked_providers: set[int] = set()
        self.env_token: object | None = None
        self.exit_hooks = False
        self.lock = threading.RLock()


_RT = _Runtime()


class _DynamicSampler(ParentBased):
    """Parent-based ratio sampling whose rate `configure()` can change later."""

    def __init__(self) -> None:
        super().__init__(TraceIdRatioBased(1.0))

    def set_rate(self, rate: float) -> None:
        self._root = TraceIdRatioBased(rate)


def configure(
    *,
    service_name: str | None = None,
    local: bool | str | os.PathLike[str] = True,
    otlp: str | bool | None = None,
    logfire: str | bool | None = None,
    console: bool = False,
    scrubbing: bool | ScrubbingOptions = True,
    sample_rate: float | None = None,
    propagate_threads: bool | None = None,
    exporters: Sequence[SpanExporter] = (),
    flush_interval: float = 0.5,
    max_queue_size: int = 200_000,
    synchronous: bool = False,
) -> None:
    """Set up tracing for this process. Safe to call more than once.

    Calling it again with the same arguments does nothing; with different arguments it flushes
    and shuts down the previous destinations, then applies the new settings to the same
    TracerProvider (a process keeps one). If the application already installed a global
    OpenTelemetry TracerProvider (for example `logfire.configure()` ran first), mastrace spans go
    through that provider and mastrace's destinations are added to it; nothing is overridden.
    A `TRACEPARENT` environment variable (see `inject_env()`) makes this process continue that trace.

    Args:
        service_name: `service.name` of the resource. Env: `OTEL_SERVICE_NAME`.
        local: The local store: True for `./.mastrace` (env `MASTRACE_DIR`), a path, or False.
        otlp: An OTLP endpoint URL, or True to use the `OTEL_EXPORTER_OTLP_*` variables
            (protocol `http/protobuf` or `grpc`). Env: `MASTRACE_OTLP`.
        logfire: True (token from `LOGFIRE_TOKEN`) or a token: also send to Logfire through the
            `logfire` SDK (install `mastrace[logfire]`).
        console: Print a line per finished span to stderr. Env: `MASTRACE_CONSOLE`.
        scrubbing: True (default patterns), False, or `ScrubbingOptions(...)`. Env: `MASTRACE_SCRUBBING`.
        sample_rate: Fraction of traces kept, 0.0 to 1.0. Env: `MASTRACE_SAMPLE_RATE`.
        propagate_threads: Make `ThreadPoolExecutor` and `threading.Thread` carry the caller's
            context. Env: `MASTRACE_PROPAGATE_THREADS`.
        exporters: Extra OpenTelemetry `SpanExporter`s, each fed by its own queue and thread.
        flush_interval: Seconds between background exports (what a killed process may lose).
        max_queue_size: Spans queued per destination before new ones are dropped (and counted).
        synchronous: Export on the calling thread when a span ends (for tests and scripts).

    Raises:
        ConfigError: An argument or environment variable is invalid.

    Example:
        >>> import mastrace
        >>> mastrace.configure(service_name="my-agents", local=".mastrace")  # doctest: +SKIP
    """
    settings = _resolve(service_name=service_name, local=local, otlp=otlp, logfire=logfire, console=console,
                        scrubbing=scrubbing, sample_rate=sample_rate, propagate_threads=propagate_threads,
                        exporters=exporters, flush_interval=flush_interval, max_queue_size=max_queue_size,
                        synchronous=synchronous)
    if disabled_by_env():
        STATE.provider = None
        STATE.generation += 1
        return
    with _RT.lock:
        if _RT.settings == settings and STATE.provider is not None:
            return
        _initialize(settings)


def _initialize(settings: Settings) -> None:
    """The one place that wires provider → pipeline → destinations."""
    if _RT.pipeline is not None:
        _RT.switch.pipeline = None
        _RT.pipeline.shutdown(timeout=5.0)
    provider = _provider_for(settings)
    pipeline = Pipeline(_destinations(settings))
    _RT.switch.pipeline = pipeline
    _RT.pipeline = pipeline
    _RT.settings = settings
    if settings.propagate_threads:
        _context.patch_threads()
    else:
        _context.unpatch_threads()
    _continue_env_trace()
    _install_exit_hooks()
    STATE.provider = provider
    STATE.generation += 1


def _provider_for(settings: Settings) -> trace.TracerProvider:
    if settings.logfire:
        from .exporters.logfire import configure_logfire

        configure_logfire(settings.logfire, settings.service_name, settings.scrubbing)
    current = trace.get_tracer_provider()
    if _RT.own_provider is not None and current is _RT.own_provider:
        _update_own_provider(settings)
        return _RT.own_provider
    if not isinstance(current, trace.ProxyTracerProvider):
        # The application installed its own provider (logfire.configure(), an APM agent...).
        if id(current) not in _RT.hooked_providers and hasattr(current, "add_span_processor"):
            current.add_span_processor(_RT.switch)
            _RT.hooked_providers.add(id(current))
        return current
    provider = TracerProvider(resource=_resource(settings), sampler=_DynamicSampler())
    provider.add_span_processor(_RT.switch)
    _RT.own_provider = provider
    _update_own_provider(settings)
    trace.set_tracer_provider(provider)
    return provider


def _update_own_provider(settings: Settings) -> None:
    provider = _RT.own_provider
    assert provider is not None
    sampler = provider.sampler
    if isinstance(sampler, _DynamicSampler):
        sampler.set_rate(settings.sample_rate)
    provider._resource = _resource(settings)  # a reconfigure may rename the service


_INSTANCE_ID = uuid.uuid4().hex


def _resource(settings: Settings) -> Resource:
    return Resource.create({
        "service.name": settings.service_name,
        "service.instance.id": _INSTANCE_ID,
        "process.pid": os.getpid(),
    })


def _destinations(settings: Settings) -> list[Destination]:
    scrubber = Scrubber(settings.scrubbing) if settings.scrubbing is not None else None
    limits = settings.limits

    def transform(span: Any) -> Any:
        return prepare_span(span, scrubber, limits)

    common: dict[str, Any] = {"max_queue": settings.max_queue_size, "interval": settings.flush_interval,
                              "synchronous": settings.synchronous}
    out: list[Destination] = []
    if settings.local is not None:
        from .store import LocalStoreExporter

        out.append(Destination("local", LocalStoreExporter(settings.local), transform, **common))
    if settings.otlp:
        from .exporters.otlp import build_otlp_exporter

        out.append(Destination("otlp", build_otlp_exporter(settings.otlp), transform, **common))
    if settings.console:
        from .exporters.console import ConsoleExporter

        out.append(Destination("console", ConsoleExporter(), transform, **common))
    for i, exporter in enumerate(settings.exporters):
        out.append(Destination(f"{type(exporter).__name__}#{i}", exporter, transform, **common))
    return out


def _continue_env_trace() -> None:
    if _RT.env_token is not None:
        return
    ctx = _context.context_from_env()
    if ctx is not None:
        _RT.env_token = otel_context.attach(ctx)


# --- flush, shutdown, exit -------------------------------------------------------------------------
def force_flush(timeout: float = 10.0) -> FlushResult:
    """Export everything queued so far, waiting at most `timeout` seconds.

    Returns:
        Counts since `configure()` per destination: exported, dropped, failed, still pending.

    Example:
        >>> result = mastrace.force_flush(timeout=5)  # doctest: +SKIP
        >>> result.ok, result.exported, result.failed  # doctest: +SKIP
    """
    pipeline = _RT.pipeline
    if pipeline is None:
        return FlushResult()
    return pipeline.flush(timeout)


def shutdown(timeout: float = 5.0, *, interrupted: bool = False) -> FlushResult:
    """End open spans (when `interrupted`), flush, and stop every destination within `timeout` seconds.

    After it, mastrace is a no-op until `configure()` is called again.
    """
    with _RT.lock:
        pipeline = _RT.pipeline
        if pipeline is None:
            return FlushResult()
        if interrupted:
            _end_open_spans(pipeline)
        _RT.switch.pipeline = None
        _RT.pipeline = None
        _RT.settings = None
        STATE.provider = None
        STATE.generation += 1
        _context.unpatch_threads()
        return pipeline.shutdown(timeout)


def is_configured() -> bool:
    """Whether `configure()` has set up recording (and it is not disabled)."""
    return STATE.provider is not None


def _end_open_spans(pipeline: Pipeline) -> None:
    for span in pipeline.open_spans():
        try:
            if span.is_recording():
                span.set_attribute(semconv.MASTRACE_INTERRUPTED, True)
                span.end()
        except Exception as exc:
            log_internal_error("ending open spans at exit", exc)


def _at_exit() -> None:
    try:
        shutdown(timeout=float(os.environ.get("MASTRACE_SHUTDOWN_TIMEOUT", "5")), interrupted=True)
    except Exception as exc:  # never let exit fail because of tracing
        log_internal_error("shutdown at exit", exc)


def _on_sigterm(signum: int, frame: Any) -> None:
    _at_exit()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _install_exit_hooks() -> None:
    if _RT.exit_hooks:
        return
    _RT.exit_hooks = True
    atexit.register(_at_exit)
    if threading.current_thread() is threading.main_thread():
        try:
            if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
                signal.signal(signal.SIGTERM, _on_sigterm)
        except (ValueError, OSError):  # pragma: no cover - embedded interpreters
            pass


# --- test support ----------------------------------------------------------------------------------
def reset_for_tests() -> None:
    """Shut down, forget every setting and detach the global provider (tests only)."""
    shutdown(timeout=2.0)
    if _RT.env_token is not None:
        try:
            otel_context.detach(_RT.env_token)  # type: ignore[arg-type]
        except Exception:
            pass
        _RT.env_token = None
    _RT.own_provider = None
    _RT.hooked_providers.clear()
    _RT.switch = SwitchProcessor()
    from opentelemetry.util._once import Once

    trace._TRACER_PROVIDER = None  # type: ignore[attr-defined]
    trace._TRACER_PROVIDER_SET_ONCE = Once()  # type: ignore[attr-defined]
    STATE.counters.clear()
