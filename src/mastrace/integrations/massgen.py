"""Trace an unmodified MassGen run: `instrument_massgen()`, or `mastrace run -- massgen ...`.

MassGen writes its spans through one seam, the tracer proxy in `massgen.structured_logging`, which
hands them to `logfire` when observability is on. `instrument_massgen()` puts mastrace behind that
proxy (no Logfire account, and no `logfire` package, needed) and fixes what the spans get wrong:

- `coordination.session` carries MassGen's resolved configuration (`mastrace.config`, scrubbed on
  export) and its hash; the placeholder session MassGen opens in `Orchestrator.__init__` and never
  closes is not recorded, so each coordination turn is one trace and there are no stray traces.
- `agent.<id>.round_<n>` and `agent.<id>.presentation` carry the round's own usage (what the LLM
  calls inside it used), not the backend's running total, so summing rounds gives the session.
- The rounds' chunks are pulled by a new task per chunk; the round generator is pinned to its own
  context, so LLM, MCP and tool spans nest under their round.
- `llm.<provider>.stream` covers the whole stream (with usage and time to first chunk) when the
  `openai` or `anthropic` SDK is underneath; MassGen's own span ended before the stream was read.
- Answer, vote, winner and final-answer records carry `massgen.agent_id` and the other keys under
  their `massgen.*` names; Logfire-style message templates are formatted into `logfire.msg`.
- Each turn is a run of an experiment: its question is the task (`mastrace.experiment.task_id`),
  the turns of the process that asked it before give its repetition index, and its outcome is
  `success` or `error` (a failed turn); the experiment's name comes from `configure(experiment=...)`
  or `mastrace run --experiment NAME`, the configuration and its hash with the session.
- A turn's story as MassGen counts it (`_massgen_turns`): failed turns keep their session, the
  presentation ends inside it, dropped votes are marked, enforcement retries are round events, MCP
  error results are errors, agent failures are exceptions, and LLM calls cost MassGen's own prices.

The span helpers live in `_massgen_spans`, the `logfire` stand-in MassGen is handed in
`_massgen_logfire`; this module holds the patches on MassGen's seams and the public API.

A MassGen version this module was not written for gets one warning and MassGen's spans as they
are (through the same proxy), never an error.

Example:
    >>> import mastrace
    >>> from mastrace.integrations.massgen import instrument_massgen
    >>> mastrace.configure()  # doctest: +SKIP
    >>> instrument_massgen()  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping
from typing import Any

import wrapt

from ..setup._benchmark_info import prefetch_benchmark_info
from ..tracing._errors import handle_internal_errors, warn_once
from . import _massgen_turns as turns
from ._massgen_logfire import LOGFIRE
from ._massgen_spans import _LOCK, _session_config, _session_tracker, _state, _suppress_session

__all__ = ["KNOWN_VERSIONS", "instrument_massgen", "uninstrument_massgen"]

KNOWN_VERSIONS: tuple[str, ...] = ("0.1.97",)
"""MassGen versions whose orchestrator and backend seams this module was written against."""


# --- patches ----------------------------------------------------------------------------------------


def _get_logfire(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    return LOGFIRE if _state.on else wrapped(*args, **kwargs)


def _configure_observability(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    if not _state.on:
        return wrapped(*args, **kwargs)
    # `massgen --logfire` asks for Logfire: mastrace already records, and sends to Logfire when
    # `mastrace.configure(logfire=True)` says so. MassGen's own configure would need an account.
    _enable_massgen_tracing()
    return True


def _integrate_loguru(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    return None if _state.on else wrapped(*args, **kwargs)


def _load_config_file(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    result = wrapped(*args, **kwargs)
    with handle_internal_errors("massgen config"):
        if isinstance(result, tuple) and result and isinstance(result[0], Mapping):
            # A copy: MassGen adds run-specific ids to the dict later, which would change the hash.
            _state.last_config = copy.deepcopy(result[0])
    return result


def _orchestrator_init(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    result = wrapped(*args, **kwargs)
    with handle_internal_errors("massgen config"):
        instance.coordination_tracker._mastrace_config = _orchestrator_config(instance, kwargs)
    return result


def _orchestrator_config(orchestrator: Any, kwargs: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The resolved YAML when MassGen's CLI loaded one; else what the orchestrator was built from."""
    if _state.last_config is not None:
        return _state.last_config
    raw = kwargs.get("raw_config")
    if isinstance(raw, Mapping):
        return raw
    agents = getattr(orchestrator, "agents", None) or {}
    built: dict[str, Any] = {"agents": []}
    for agent_id, agent in dict(agents).items():
        backend = getattr(agent, "backend", None)
        config = getattr(backend, "config", None)
        built["agents"].append(
            {
                "id": agent_id,
                "backend": {
                    "type": type(backend).__name__,
                    **(
                        {k: v for k, v in config.items() if k != "api_key"}
                        if isinstance(config, Mapping)
                        else {}
                    ),
                },
            }
        )
    return built


def _initialize_session(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    prompt = kwargs.get("user_prompt", args[1] if len(args) > 1 else None)
    if not prompt:  # Orchestrator.__init__'s placeholder: MassGen replaces it before any work
        token = _suppress_session.set(True)
        try:
            return wrapped(*args, **kwargs)
        finally:
            _suppress_session.reset(token)
    with handle_internal_errors("massgen session"):
        if getattr(instance, "_session_span_context", None) is not None:
            instance._close_session_span()  # a new turn ends the previous session
    config_token = _session_config.set(getattr(instance, "_mastrace_config", None))
    tracker_token = _session_tracker.set(id(instance))
    try:
        return wrapped(*args, **kwargs)
    finally:
        _session_tracker.reset(tracker_token)
        _session_config.reset(config_token)


def _chat(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """`Orchestrator.chat()`, one coordination turn: its session ends however the turn ends."""
    stream = wrapped(*args, **kwargs)
    return turns.watch_turn(instance, stream) if _state.on else stream


def _stream_agent_execution(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    stream = wrapped(*args, **kwargs)
    if not _state.on:
        return stream
    from ..tracing._streams import traced_stream

    agent_id = kwargs.get("agent_id", args[0] if args else None)
    return _watch_errors(traced_stream(stream), agent_id)


async def _watch_errors(stream: Any, agent_id: Any) -> Any:
    """Pass the round's chunks through; an `("error", message)` chunk marks the round failed."""
    try:
        async for item in stream:
            if type(item) is tuple and len(item) == 2 and item[0] == "error":
                proxy = turns.state.rounds.get(agent_id)
                if proxy is not None:
                    with handle_internal_errors("massgen round error"):
                        proxy.fail(str(item[1]))
            yield item
    finally:
        await stream.aclose()


def _enable_massgen_tracing() -> None:
    from massgen import structured_logging

    structured_logging._logfire_enabled = True


def _patch(module: Any, name: str, wrapper: Any) -> bool:
    """Wrap `module.name` (a dotted attribute path); False when MassGen has no such seam."""
    owner: Any = module
    parts = name.split(".")
    for part in parts[:-1]:
        owner = getattr(owner, part, None)
        if owner is None:
            return False
    original = getattr(owner, parts[-1], None)
    if original is None or not callable(original):
        return False
    if isinstance(owner, type):
        original = owner.__dict__.get(parts[-1], original)
    setattr(owner, parts[-1], wrapt.FunctionWrapper(original, wrapper))
    _state.undo.append((owner, parts[-1], original))
    return True


def _rebind(modules: list[Any], name: str, original: Any, replacement: Any) -> None:
    """Point names imported elsewhere (`from .config_loading import load_config_file`) at the wrapper."""
    for module in modules:
        if getattr(module, name, None) is original:
            setattr(module, name, replacement)
            _state.undo.append((module, name, original))


def instrument_massgen() -> bool:
    """Trace MassGen with mastrace. Safe to call more than once; returns whether it is on.

    Call it after `mastrace.configure()` and before MassGen runs (or use `mastrace run -- massgen
    ...`, which does both). No MassGen flag is needed: `--logfire` is not required, and if given,
    it does not call Logfire's own configure (send to Logfire with `configure(logfire=True)`).

    It also calls `instrument_openai()` and `instrument_anthropic()` for the SDKs installed, so
    each LLM call's span covers its whole stream and its usage is credited to its round once.

    Returns:
        False when `massgen` is not installed (one warning); True otherwise, also for a MassGen
        version it does not know (one warning, MassGen's own spans only).
    """
    with _LOCK:
        if _state.on:
            return True
        try:
            import massgen
            from massgen import structured_logging
        except ImportError as error:
            if error.name == "massgen":  # the package itself is absent
                warn_once(
                    "massgen-missing",
                    "mastrace: instrument_massgen() needs the massgen package; nothing traced",
                )
            else:  # installed, but it (or one of its dependencies) fails to import: say why
                warn_once(
                    "massgen-broken",
                    f"mastrace: massgen is installed but cannot be imported ({type(error).__name__}: "
                    f"{error}); nothing traced",
                )
            return False
        if not hasattr(structured_logging, "TracerProxy"):
            version = getattr(massgen, "__version__", "?")
            warn_once("massgen-seam", f"mastrace: massgen {version} has no tracer proxy; nothing traced")
            return False
        _state.on = True
        # The configuration snapshot's package list and git facts: gathered now, on a thread, while
        # MassGen is still starting, so that no turn waits for them.
        prefetch_benchmark_info()
        _patch(structured_logging, "TracerProxy._get_logfire", _get_logfire)
        _patch(structured_logging, "configure_observability", _configure_observability)
        _state.undo.append((structured_logging, "_logfire_enabled", structured_logging._logfire_enabled))
        structured_logging._logfire_enabled = True
        version = str(getattr(massgen, "__version__", "?"))
        if version not in KNOWN_VERSIONS:
            warn_once(
                "massgen-version",
                f"mastrace: massgen {version} is not a version instrument_massgen() knows "
                f"({', '.join(KNOWN_VERSIONS)}); its spans are recorded as MassGen writes them",
            )
            return True
        _patch_known_seams()
    _instrument_sdks()
    return True


def _patch_known_seams() -> None:
    import importlib

    def load(name: str) -> Any:
        """Import a MassGen module by its path relative to the package (`.orchestrator`)."""
        try:
            return importlib.import_module(name, "massgen") if name else importlib.import_module("massgen")
        except Exception:  # a seam that moved: that fix is skipped, tracing goes on
            warn_once(
                f"massgen-seam{name}", f"mastrace: could not import massgen{name}; one MassGen fix is off"
            )
            return None

    logger_config = load(".logger_config")
    if logger_config is not None:
        _patch(logger_config, "integrate_logfire_with_loguru", _integrate_loguru)
    tracker = load(".coordination_tracker")
    if tracker is not None:
        _patch(tracker, "CoordinationTracker.initialize_session", _initialize_session)
        _patch(tracker, "CoordinationTracker.track_enforcement_event", turns.enforcement_event)
        _patch(tracker, "CoordinationTracker.track_agent_action", turns.agent_action)
        _state.known = _patch(tracker, "CoordinationTracker.track_restart_signal", turns.restart_signal)
    orchestrator = load(".orchestrator")
    if orchestrator is not None:
        _patch(orchestrator, "Orchestrator.__init__", _orchestrator_init)
        _patch(orchestrator, "Orchestrator._stream_agent_execution", _stream_agent_execution)
        _patch(orchestrator, "Orchestrator.chat", _chat)
    mcp_session: Any = None
    with contextlib.suppress(ImportError):
        from mcp.client import session as mcp_session
    if mcp_session is not None:
        _patch(mcp_session, "ClientSession.call_tool", turns.call_tool)
    backend = load(".backend.base_with_custom_tool_and_mcp")
    if backend is not None and hasattr(backend, "logfire"):
        _state.undo.append((backend, "logfire", backend.logfire))
        backend.logfire = LOGFIRE
    config_loading = load(".cli.config_loading")
    if config_loading is not None:
        original = config_loading.load_config_file
        if _patch(config_loading, "load_config_file", _load_config_file):
            modules = [m for m in (load(".cli.entrypoint"), load(".cli"), load("")) if m]
            _rebind(modules, "load_config_file", original, config_loading.load_config_file)


def _instrument_sdks() -> None:
    import importlib.util

    if importlib.util.find_spec("openai") is not None:
        from .openai import instrument_openai

        instrument_openai()
    if importlib.util.find_spec("anthropic") is not None:
        from .anthropic import instrument_anthropic

        instrument_anthropic()


def uninstrument_massgen() -> None:
    """Undo `instrument_massgen()` (the SDK instrumentations it turned on stay on)."""
    with _LOCK:
        for owner, name, original in reversed(_state.undo):
            setattr(owner, name, original)
        _state.undo.clear()
        _state.on = False
        _state.last_config = None
        _state.totals.clear()
        _state.answers.clear()
        _state.asked.clear()
        _state.known = False
        turns.state.clear()
