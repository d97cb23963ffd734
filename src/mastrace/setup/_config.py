"""`configure()`, its environment variables, and the one function that wires the pipeline.

Every argument of `configure()` can also come from the environment. The parameters, their
variables, defaults and accepted values are one table, `_settings.PARAMS`; the precedence is
explicit argument, then environment, then default. `MASTRACE_DISABLED=1` makes every call a no-op.

The OTLP exporter also reads the standard `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL`, `_HEADERS`,
`_TIMEOUT` and `_COMPRESSION`; resource attributes come from `OTEL_RESOURCE_ATTRIBUTES`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from .. import semconv
from ..exceptions import MastraceWarning
from ..pipeline._pipeline import FlushResult, Pipeline, SwitchProcessor
from ..scrubbing._options import ScrubbingOptions
from ..scrubbing._shared import SharedScrubber
from ..tracing import _context
from ..tracing._errors import log_internal_error, logger
from ..tracing._otel_private import replace_provider_resource, reset_global_providers
from ..tracing._state import STATE
from . import _children, _destinations, _settings
from ._settings import UNSET, Settings, UnsetType

__all__ = ["configure", "force_flush", "is_configured", "shutdown"]


def disabled_by_env() -> bool:
    """Whether `MASTRACE_DISABLED` asks for every call to be a no-op."""
    return _settings.resolve(_settings.DISABLED, UNSET, os.environ)


def _resolve(arguments: Mapping[str, object]) -> Settings:
    """Each parameter from its argument, else the environment, else the default (see `_settings`)."""
    env = os.environ
    values = {
        p.name: _settings.resolve_from(p, arguments[p.name], env) for p in _settings.PARAMS if p.argument
    }
    local, _ = values["local"]
    otlp, _ = values["otlp"]
    logfire, logfire_source = values["logfire"]
    scrubbing, _ = values["scrubbing"]
    # A token may be in the environment for a collector or another tool: without the logfire
    # package, degrade (one warning when this configuration is applied) instead of failing the app.
    token_ignored = bool(logfire) and logfire_source == "LOGFIRE_TOKEN" and not _logfire_installed()
    if token_ignored:
        logfire = False
    return Settings(
        service_name=values["service_name"][0],
        local=_local_path(local),
        otlp=_otlp_endpoint(otlp),
        logfire=logfire or None,
        console=values["console"][0],
        scrubbing=None if scrubbing is False else ScrubbingOptions() if scrubbing is True else scrubbing,
        sample_rate=values["sample_rate"][0],
        capture_content=values["capture_content"][0],
        propagate_threads=values["propagate_threads"][0],
        exporters=values["exporters"][0],
        flush_interval=values["flush_interval"][0],
        max_queue_size=values["max_queue_size"][0],
        synchronous=values["synchronous"][0],
        shutdown_timeout=values["shutdown_timeout"][0],
        otlp_exit_timeout=values["otlp_exit_timeout"][0],
        max_row_bytes=values["max_row_bytes"][0],
        retention=values["retention"][0],
        experiment=values["experiment"][0],
        repetition=values["repetition"][0],
        logfire_token_ignored=token_ignored,
    )


def _logfire_installed() -> bool:
    try:
        import logfire  # noqa: F401
    except ImportError:
        return False
    return True


def _local_path(local: bool | str | os.PathLike[str]) -> Path | None:
    if local is False:
        return None
    if local is True:
        local = os.environ.get("MASTRACE_DIR", "").strip() or ".mastrace"
    return Path(local).expanduser().resolve()


def _otlp_endpoint(otlp: bool | str) -> str | bool | None:
    if otlp is False:
        return None
    from ..exporters.otlp import otlp_protocol

    otlp_protocol()  # an invalid protocol fails here, before anything is torn down
    return otlp


class _Runtime:
    """Everything `configure()` built, so that the next call or `shutdown()` can tear it down."""

    def __init__(self) -> None:
        self.settings: Settings | None = None
        self.pipeline: Pipeline | None = None
        self.switch = SwitchProcessor()
        self.own_provider: TracerProvider | None = None
        # Providers the switch was added to (Logfire replaces its inner one on every configure()).
        self.hooked_providers: list[object] = []
        self.env_token: object | None = None
        self.exit_hooks = False
        self.lock = threading.RLock()
        # Arguments an in-memory capture (`mastrace.testing`) holds for its duration: they beat any
        # `configure()` call of the code under test, and `shutdown()` only flushes meanwhile.
        self.capture_pin: dict[str, object] | None = None
        # A shutdown in progress (its flush may be under way), and a SIGTERM that came meanwhile: the
        # process then ends with it once the flush is done, not in the middle of it.
        self.closing = 0
        self.sigterm_waiting = False


_RT = _Runtime()


class _DynamicSampler(ParentBased):
    """Parent-based ratio sampling whose rate `configure()` can change later."""

    def __init__(self) -> None:
        super().__init__(TraceIdRatioBased(1.0))

    def set_rate(self, rate: float) -> None:
        self._root = TraceIdRatioBased(rate)


def configure(
    *,
    service_name: str | UnsetType | None = UNSET,
    local: bool | str | os.PathLike[str] | UnsetType = UNSET,
    otlp: str | bool | UnsetType | None = UNSET,
    logfire: str | bool | UnsetType | None = UNSET,
    console: bool | UnsetType = UNSET,
    scrubbing: bool | ScrubbingOptions | UnsetType = UNSET,
    capture_content: bool | UnsetType | None = UNSET,
    sample_rate: float | UnsetType | None = UNSET,
    propagate_threads: bool | UnsetType | None = UNSET,
    exporters: Sequence[SpanExporter] | UnsetType = UNSET,
    flush_interval: float | UnsetType | None = UNSET,
    max_queue_size: int | UnsetType | None = UNSET,
    shutdown_timeout: float | UnsetType | None = UNSET,
    otlp_exit_timeout: float | UnsetType | None = UNSET,
    max_row_bytes: int | UnsetType | None = UNSET,
    retention: str | UnsetType | None = UNSET,
    synchronous: bool | UnsetType = UNSET,
    experiment: str | UnsetType | None = UNSET,
    repetition: int | UnsetType | None = UNSET,
) -> None:
    """Set up tracing for this process. Safe to call more than once.

    Calling it again with the same arguments does nothing; with different arguments it flushes
    and shuts down the previous destinations, then applies the new settings to the same
    TracerProvider (a process keeps one). If the application already installed a global
    OpenTelemetry TracerProvider (for example `logfire.configure()` ran first), mastrace spans go
    through that provider and mastrace's destinations are added to it; nothing is overridden.
    A `TRACEPARENT` environment variable (see `inject_env()`) makes this process continue that trace.

    Every value is taken from the argument when you pass it, else from its environment variable,
    else from its default: an explicit argument always beats the environment. Passing None is the
    same as not passing the argument (where None is accepted). Two things beat the arguments: the
    command line of `mastrace run` (`--store`, `--service-name`, `--otlp`, `--console`, handed to
    the program and its child processes in `MASTRACE_RUN`), and, inside `mastrace.testing`'s
    `capture_spans()` or `mastrace_spans` fixture, the capture (spans go to memory).

    When spans have nowhere to go (no local store, OTLP endpoint, console, Logfire, exporter, nor
    a TracerProvider of the application's own), a `MastraceWarning` says so and `force_flush()`
    reports `complete=False`.

    Args:
        service_name: `service.name` of the resource. Env: `OTEL_SERVICE_NAME`. Default: the script name.
        local: The local store: True for `$MASTRACE_DIR` or `./.mastrace`, a folder, or False.
            Env: `MASTRACE_LOCAL=0/1`, `MASTRACE_DIR`. Default: True.
        otlp: An OTLP endpoint URL, or True to use the `OTEL_EXPORTER_OTLP_*` variables
            (protocol `http/protobuf` or `grpc`). Env: `MASTRACE_OTLP` (URL or 1/0), else
            `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT` turns it on. Default: off.
        logfire: True (token from `LOGFIRE_TOKEN`) or a token: also send to Logfire through the
            `logfire` SDK (install `mastrace[logfire]`). Env: `MASTRACE_LOGFIRE=1/0`, else
            `LOGFIRE_TOKEN` turns it on (with a warning, not an error, when the SDK is missing).
        console: Print a line per finished span to stderr. Env: `MASTRACE_CONSOLE`. Default: False.
        scrubbing: True (default patterns), False, or `ScrubbingOptions(...)`.
            Env: `MASTRACE_SCRUBBING`. Default: True.
        capture_content: Record the content of LLM calls (messages, system instructions, tool
            definitions, tool arguments and results) on their spans, scrubbed like every attribute.
            An `instrument_*(capture_content=...)` argument overrides it for that SDK. Env:
            `MASTRACE_CAPTURE_CONTENT`, else `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`.
            Default: False.
        sample_rate: Fraction of traces kept, 0.0 to 1.0. Env: `MASTRACE_SAMPLE_RATE`. Default: 1.0.
        propagate_threads: Make `ThreadPoolExecutor` and `threading.Thread` carry the caller's
            context. Env: `MASTRACE_PROPAGATE_THREADS`. Default: True.
        exporters: Extra OpenTelemetry `SpanExporter`s, each fed by its own queue and thread.
        flush_interval: Seconds between background exports (what a killed process may lose).
            Env: `MASTRACE_FLUSH_INTERVAL`. Default: 0.5.
        max_queue_size: Spans queued per destination before new ones are dropped (and counted).
            Env: `MASTRACE_MAX_QUEUE_SIZE`. Default: 200000.
        shutdown_timeout: Seconds the flush at exit and on SIGTERM may take.
            Env: `MASTRACE_SHUTDOWN_TIMEOUT`. Default: 5.0.
        otlp_exit_timeout: Seconds of that an OTLP collector that is down or slow may take, counted
            once the export thread is prepared (its scrubber built, which starts as `configure()`
            returns); what it does not take stays in the local store.
            Env: `MASTRACE_OTLP_EXIT_TIMEOUT`. Default: 1.0.
        max_row_bytes: The most bytes one span may take in the local store (4096 to 8 MiB): the
            largest values of a bigger span are cut, each with a visible truncation marker, and the
            span gets `mastrace.truncated = true`. Env: `MASTRACE_MAX_ROW_BYTES`. Default: 1000000.
        retention: What the local store keeps: an age (`"7d"`), a size (`"5GB"`) or both
            (`"7d,5GB"`); each time the writer starts a new segment it removes the oldest segments
            beyond it, as `mastrace prune` does. Env: `MASTRACE_RETENTION`. Default: keep everything.
        synchronous: Export on the calling thread when a span ends (for tests and scripts).
        experiment: The experiment this process's runs belong to: every root span carries it as
            `mastrace.experiment.name`; see also `mastrace.experiment_run()`.
            Env: `MASTRACE_EXPERIMENT`. Default: none.
        repetition: The repetition this process runs, for experiments run one process per
            repetition (`for i in 0 1 2; do mastrace run --repetition $i -- ...`): root spans
            without one carry it as `mastrace.experiment.repetition`, MassGen turns count from it,
            and `experiment_run()` uses it when given none. Env: `MASTRACE_REPETITION`.
            Default: none (MassGen turns count from 0 in each process).

    Raises:
        ConfigError: An argument (the message names it) or an environment variable (the message
            names the variable) is invalid; the message says what is accepted.
        ExportError: An exporter cannot be built (for example `logfire` is not installed).

    A local store folder that cannot be written (read-only, no permission) is not an error: it gives
    one warning (logger `mastrace`), its spans count as failed, and the other destinations work.

    Example:
        >>> import mastrace
        >>> mastrace.configure(service_name="my-agents", local=".mastrace")  # doctest: +SKIP
    """
    arguments: dict[str, object] = {
        "service_name": service_name,
        "local": local,
        "otlp": otlp,
        "logfire": logfire,
        "console": console,
        "scrubbing": scrubbing,
        "capture_content": capture_content,
        "sample_rate": sample_rate,
        "propagate_threads": propagate_threads,
        "exporters": exporters,
        "flush_interval": flush_interval,
        "max_queue_size": max_queue_size,
        "shutdown_timeout": shutdown_timeout,
        "otlp_exit_timeout": otlp_exit_timeout,
        "max_row_bytes": max_row_bytes,
        "retention": retention,
        "synchronous": synchronous,
        "experiment": experiment,
        "repetition": repetition,
    }
    settings = _resolve({**arguments, **pinned_arguments()})
    semconv.reread_conventions()  # `OTEL_SEMCONV_STABILITY_OPT_IN`, read at its next use
    if disabled_by_env():
        shutdown()
        return
    with _RT.lock:
        if _RT.settings == settings and STATE.provider is not None:
            return
        _initialize(settings)


def pinned_arguments() -> dict[str, object]:
    """Arguments that beat those `configure()` is called with: `mastrace run`'s command line (from
    `MASTRACE_RUN`, so the program's child processes obey it too), then an active capture."""
    run: dict[str, Any] = _settings.resolve(_settings.RUN, UNSET, os.environ)
    pins: dict[str, object] = dict(run)
    if _RT.capture_pin is not None:
        pins.update(_RT.capture_pin)
    return pins


def pin_capture(arguments: Mapping[str, object] | None) -> None:
    """Hold `arguments` over every later `configure()` call (None releases them); see `mastrace.testing`."""
    with _RT.lock:
        _RT.capture_pin = None if arguments is None else dict(arguments)


def _initialize(settings: Settings) -> None:
    """The one place that wires provider → pipeline → destinations."""
    # The one scrubber of this configuration: every destination and Logfire's callbacks share it.
    scrubber = SharedScrubber(settings.scrubbing) if settings.scrubbing is not None else None
    spans_resource: list[Resource] = []  # what the export threads warm up with, once it is known
    destinations = _destinations.build(settings, scrubber, spans_resource)  # fails (bad path, ...) first
    try:
        provider = _provider_for(settings, scrubber)
    except BaseException:
        Pipeline(destinations).shutdown(timeout=1.0)
        raise
    resource = getattr(provider, "resource", None)
    if isinstance(resource, Resource):
        spans_resource.append(resource)
    # Switch to the new pipeline first, then drain the old one: spans ending meanwhile go to the new
    # destinations instead of being lost, and spans open across the switch end through the new one.
    # Spans reach somewhere when mastrace has a destination, or when they go through a provider
    # that is not ours (the application's or Logfire's), which exports them itself.
    delivers = any(d.counted for d in destinations) or provider is not _RT.own_provider
    if settings.logfire_token_ignored:
        warnings.warn(
            "mastrace: LOGFIRE_TOKEN is set but the logfire package is not installed, so spans are "
            "not sent to Logfire; install it with: pip install 'mastrace[logfire]' "
            "(or set MASTRACE_LOGFIRE=0 to silence this)",
            MastraceWarning,
            stacklevel=3,
        )
    if not delivers:
        warnings.warn(
            "mastrace: spans have no destination (the local store is off and there is no OTLP "
            "endpoint, console, Logfire or exporter), so nothing is recorded and force_flush() "
            "reports complete=False; turn one on (local=True, otlp=..., console=True, exporters=[...])",
            MastraceWarning,
            stacklevel=3,
        )
    previous = _RT.pipeline
    pipeline = Pipeline(destinations, delivers=delivers)
    if previous is not None:
        pipeline.adopt_open_spans(previous)
    _RT.switch.pipeline = pipeline
    _RT.switch.experiment = settings.experiment
    _RT.switch.repetition = settings.repetition
    _RT.pipeline = pipeline
    if previous is not None:
        previous.shutdown(timeout=5.0)
    _RT.settings = settings
    if settings.propagate_threads:
        _context.patch_threads()
    else:
        _context.unpatch_threads()
    _continue_env_trace()
    _install_exit_hooks()
    STATE.provider = provider
    STATE.configured = True
    STATE.capture_content = settings.capture_content
    STATE.experiment = settings.experiment
    STATE.repetition = settings.repetition
    STATE.on_lost = pipeline.note_lost
    STATE.generation += 1
    _children.publish(settings)  # what spawn/forkserver workers configure themselves from


def _provider_for(settings: Settings, scrubber: SharedScrubber | None) -> trace.TracerProvider:
    """The provider mastrace spans are made with, with the switch processor added to it."""
    if settings.logfire:
        from ..exporters.logfire import application_configured_logfire, configure_logfire

        # Configuring Logfire again would replace the provider that holds an application's own span
        # processors: when the application configured Logfire, mastrace joins that configuration.
        if not application_configured_logfire():
            configure_logfire(
                settings.logfire,
                settings.service_name,
                scrubber,
                sample_rate=settings.sample_rate,
                own_otlp_traces=not settings.otlp,
            )
    current = trace.get_tracer_provider()
    if _RT.own_provider is not None and current is _RT.own_provider:
        _update_own_provider(settings)
        return _RT.own_provider
    if not isinstance(current, trace.ProxyTracerProvider):
        # The application (or configure_logfire) installed a provider: add to it, override nothing.
        return _hook(current)
    provider = TracerProvider(resource=_destinations.resource(settings), sampler=_DynamicSampler())
    provider.add_span_processor(_RT.switch)
    _RT.own_provider = provider
    _update_own_provider(settings)
    trace.set_tracer_provider(provider)
    return provider


def _rehook() -> None:
    """After Logfire was configured again: add the switch processor to its new provider."""
    with _RT.lock:
        if STATE.provider is None:
            return
        current = trace.get_tracer_provider()
        from ..exporters.logfire import is_logfire_provider

        if is_logfire_provider(current):
            _hook(current)
            STATE.generation += 1  # tracers fetch their OpenTelemetry tracer again


def _hook(provider: trace.TracerProvider) -> trace.TracerProvider:
    from ..exporters.logfire import LogfireTracerProvider, hook_target, is_logfire_provider, watch_reconfigure

    if is_logfire_provider(provider):
        watch_reconfigure(_rehook)
    target = hook_target(provider)
    if not any(p is target for p in _RT.hooked_providers) and hasattr(provider, "add_span_processor"):
        provider.add_span_processor(_RT.switch)
        _RT.hooked_providers.append(target)
    return LogfireTracerProvider(provider) if is_logfire_provider(provider) else provider


def _update_own_provider(settings: Settings) -> None:
    provider = _RT.own_provider
    assert provider is not None
    sampler = provider.sampler
    if isinstance(sampler, _DynamicSampler):
        sampler.set_rate(settings.sample_rate)
    replace_provider_resource(provider, _destinations.resource(settings))


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

    After it, mastrace is a no-op until `configure()` is called again. At exit and on SIGTERM it
    runs with `interrupted=True` and `MASTRACE_SHUTDOWN_TIMEOUT` (default 5 s): spans still open
    end with `mastrace.interrupted = true`.

    Returns:
        The final counts; what a destination could not export in time is counted as dropped.
    """
    with _RT.lock:
        pipeline = _RT.pipeline
        if pipeline is None:
            return FlushResult()
        if _RT.capture_pin is not None:
            # The code under test ends tracing, but the capture around it goes on recording.
            return pipeline.flush(timeout)
        if interrupted:
            _end_open_spans(pipeline)
        _RT.switch.pipeline = None
        _RT.pipeline = None
        _RT.settings = None
        _children.forget()
        STATE.provider = None
        STATE.capture_content = None
        STATE.experiment = STATE.repetition = _RT.switch.experiment = _RT.switch.repetition = None
        STATE.on_lost = None
        STATE.generation += 1
        _context.unpatch_threads()
        _RT.closing += 1
    try:
        return pipeline.shutdown(timeout)
    finally:
        _RT.closing -= 1
        if _RT.sigterm_waiting and not _RT.closing:
            _RT.sigterm_waiting = False
            _die_of_sigterm()


def is_configured() -> bool:
    """Whether `configure()` has set up recording (and it is not disabled)."""
    return STATE.provider is not None


def _end_open_spans(pipeline: Pipeline) -> None:
    # The latest started first: a span still open inside another ends before (never after) it.
    spans = sorted(pipeline.open_spans(), key=lambda s: getattr(s, "start_time", None) or 0, reverse=True)
    for span in spans:
        try:
            if span.is_recording():
                span.set_attribute(semconv.MASTRACE_INTERRUPTED, True)
                span.end()
        except Exception as exc:
            log_internal_error("ending open spans at exit", exc)


def _shutdown_timeout() -> float:
    settings = _RT.settings
    return settings.shutdown_timeout if settings is not None else _settings.SHUTDOWN_TIMEOUT.default


def _at_exit() -> None:
    try:
        settings = _RT.settings
        result = shutdown(timeout=_shutdown_timeout(), interrupted=True)
        _report_undelivered(result, settings)
    except Exception as exc:  # never let exit fail because of tracing
        log_internal_error("shutdown at exit", exc)


def _report_undelivered(result: FlushResult, settings: Settings | None) -> None:
    """One line at exit when spans did not reach a destination: how many, which, and where they are."""
    missed = {  # pending: still being sent when the exit budget ran out, so not known delivered
        name: stats.dropped + stats.failed + stats.pending
        for name, stats in result.destinations.items()
        if stats.dropped + stats.failed + stats.pending
    }
    if not missed:
        return
    parts = ", ".join(f"{n} to {name}" for name, n in missed.items())
    store = settings.local if settings is not None else None
    safe = (
        f"; they are in the local store at {store}"
        if store is not None and "local" in result.destinations and "local" not in missed
        else ""
    )
    logger.warning("mastrace: spans not delivered at exit: %s%s", parts, safe)


def _on_sigterm(signum: int, frame: Any) -> None:
    if _RT.closing:
        # A shutdown is flushing (at exit, e.g. a multiprocessing worker leaving as its pool is
        # terminated), perhaps on the thread this handler interrupted: it ends the process once done.
        _RT.sigterm_waiting = True
        return
    # The handler interrupts whatever the main thread was doing, possibly inside the SDK while it
    # holds a span's lock; ending spans on this same thread could then wait on that lock forever.
    # A separate thread, joined with a bound, can only time out.
    bound = _shutdown_timeout() + 1.0  # read before the closer clears the settings
    closer = threading.Thread(target=_at_exit, name="mastrace-sigterm", daemon=True)
    closer.start()
    closer.join(bound)
    _die_of_sigterm()


def _die_of_sigterm() -> None:
    """End the process as SIGTERM would have without mastrace's handler."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _before_fork() -> None:
    pipeline = _RT.pipeline
    if pipeline is not None:
        try:
            pipeline.before_fork(_shutdown_timeout())
        except Exception as exc:
            log_internal_error("preparing the export before fork", exc)


def _after_fork_in_child() -> None:
    """A forked child keeps exporting: new worker threads, its own pid and instance id, a flush at exit."""
    _destinations.new_instance_id()
    _RT.lock = threading.RLock()
    pipeline = _RT.pipeline
    if pipeline is None:
        return
    try:
        pipeline.after_fork()
        if _RT.own_provider is not None and _RT.settings is not None:
            _update_own_provider(_RT.settings)
        mp_util = sys.modules.get("multiprocessing.util")
        if mp_util is not None:
            # multiprocessing children leave through os._exit, so atexit never runs; they run their
            # finalizers instead, but clear the registry first: register from an after-fork hook.
            mp_util.register_after_fork(_RT, _register_mp_finalizer)
    except Exception as exc:
        log_internal_error("restarting export after fork", exc)


def _register_mp_finalizer(_: object) -> None:
    try:
        import multiprocessing.util as mp_util

        mp_util.Finalize(None, _at_exit, exitpriority=100)
    except Exception as exc:
        log_internal_error("restarting export after fork", exc)


def _install_exit_hooks() -> None:
    if _RT.exit_hooks:
        return
    _RT.exit_hooks = True
    atexit.register(_at_exit)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
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
        with contextlib.suppress(Exception):
            otel_context.detach(_RT.env_token)  # type: ignore[arg-type]
        _RT.env_token = None
    _RT.own_provider = None
    _RT.hooked_providers.clear()
    _RT.switch = SwitchProcessor()
    reset_global_providers()
    STATE.counters.clear()
    STATE.noop_spans = 0
    STATE.configured = False
    semconv.reread_conventions()
    _RT.capture_pin = None
