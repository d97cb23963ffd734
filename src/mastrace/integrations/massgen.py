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
- A turn's story as MassGen counts it (`_massgen_turns`): failed turns keep their session, the
  presentation ends inside it, dropped votes are marked, enforcement retries are round events, MCP
  error results are errors, agent failures are exceptions, and LLM calls cost MassGen's own prices.

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
import contextvars
import copy
import re
import string
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import wrapt

from .. import semconv
from .._benchmark_info import prefetch_benchmark_info
from .._errors import handle_internal_errors, warn_once
from .._tracer import NoOpSpan, Span, get_tracer
from ..mixins.agent import AgentRound
from ..mixins.coordination import CoordinationSession, current_session
from ..registry import Registry
from ..usage import TokenUsage
from . import _massgen_turns as turns
from ._llm_calls import PendingLLMSpan, pending_llm_span

__all__ = ["KNOWN_VERSIONS", "instrument_massgen", "uninstrument_massgen"]

KNOWN_VERSIONS: tuple[str, ...] = ("0.1.97",)
"""MassGen versions whose orchestrator and backend seams this module was written against."""

_LOCK = threading.Lock()
_ROUND_NAME = re.compile(r"agent\.(?P<agent>.+)\.(?:round_(?P<round>\d+)|presentation)$")
_LLM_NAME = re.compile(r"llm\.[^.]+\.(?:stream|create|chat)$")
_MCP_NAME = re.compile(r"mcp\.[^.]+\.[^.]+")
_USAGE_KEYS = {
    semconv.MASSGEN_USAGE_INPUT: "input_tokens",
    semconv.MASSGEN_USAGE_OUTPUT: "output_tokens",
    semconv.MASSGEN_USAGE_REASONING: "reasoning_tokens",
    semconv.MASSGEN_USAGE_CACHED_INPUT: "cached_input_tokens",
    semconv.MASSGEN_USAGE_COST: "cost",
}
# Plain keys of MassGen's log records, also written under the names mastrace's queries read.
_RECORD_KEYS = {
    "agent_id": semconv.MASSGEN_AGENT_ID,
    "answer_label": semconv.MASSGEN_ANSWER_LABEL,
    "voted_for_label": semconv.MASSGEN_VOTED_FOR_LABEL,
    "event_type": semconv.MASSGEN_EVENT_TYPE,
    "winner_agent_id": semconv.MASSGEN_WINNER,
}
_LEVELS = {
    "trace": 1,
    "debug": 5,
    "info": semconv.LEVEL_INFO,
    "notice": 10,
    "warn": semconv.LEVEL_WARN,
    "warning": semconv.LEVEL_WARN,
    "error": semconv.LEVEL_ERROR,
    "fatal": 21,
}

# Set while MassGen runs code whose session span must not be recorded, or to hand the session
# span the configuration of the orchestrator that opens it.
_suppress_session: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "mastrace_massgen_suppress_session", default=False
)
_session_config: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "mastrace_massgen_session_config", default=None
)
# The coordination tracker opening a session (its id), so that the turn's end can find the session.
_session_tracker: contextvars.ContextVar[int] = contextvars.ContextVar("mastrace_massgen_tracker", default=0)


class _State:
    def __init__(self) -> None:
        self.on = False
        self.known = False  # the seams of a known MassGen version are patched
        self.undo: list[Any] = []
        self.last_config: Mapping[str, Any] | None = None
        # Each agent's last running total, for backends whose calls mastrace does not see.
        self.totals: dict[str, dict[str, float]] = {}
        # Answer label -> the agent that gave it, so that vote records name the agent voted for.
        self.answers: dict[str, str] = {}


_state = _State()


def _tracer() -> Any:
    return get_tracer("mastrace.massgen")


def _format(template: str, attributes: Mapping[str, Any]) -> str:
    """Format a Logfire-style message template; the template itself when it does not format."""
    if "{" not in template:
        return template
    try:
        return string.Formatter().vformat(template, (), dict(attributes))
    except Exception:
        return template


def _span_attributes(template: str, attributes: Mapping[str, Any]) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for key, value in attributes.items():
        if key.startswith("_"):  # logfire's own arguments (_tags, _level, _span_name ...)
            if key == "_tags" and value:
                attrs[semconv.LOGFIRE_TAGS] = list(value)
            continue
        if value is not None:
            attrs[key] = value
    if "{" in template:
        attrs[semconv.LOGFIRE_MSG_TEMPLATE] = template
        attrs[semconv.LOGFIRE_MSG] = _format(template, attributes)
    for plain, named in _RECORD_KEYS.items():
        value = attributes.get(plain)
        if value is not None and named not in attrs:
            attrs[named] = value
    agent = attrs.get(semconv.MASSGEN_AGENT_ID)
    if agent is not None:
        attrs.setdefault(semconv.GEN_AI_AGENT_ID, agent)
    return attrs


class _RoundSpan:
    """What MassGen holds for a round: usage written as running totals becomes the round's own."""

    def __init__(self, handle: AgentRound, agent_id: str) -> None:
        self._handle = handle
        self._agent = agent_id
        self._reported: dict[str, float] = {}
        self._failed = False
        self._retries = 0

    def set_attribute(self, key: str, value: Any) -> None:
        field = _USAGE_KEYS.get(key)
        if field is not None:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self._reported[field] = float(value)
            return
        if key == semconv.MASSGEN_ERROR_MESSAGE and isinstance(value, str):
            self.fail(value)
        self._handle.set_attribute(key, value)

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        for key, value in attributes.items():
            self.set_attribute(key, value)

    def record_exception(self, exc: BaseException, *args: Any, **kwargs: Any) -> None:
        self._handle.span.record_exception(exc)

    def add_event(self, name: str, attributes: Mapping[str, Any] | None = None, *args: Any) -> None:
        self._handle.span.add_event(name, attributes)

    def set_status(self, status: Any, description: str | None = None) -> None:
        self._handle.span.set_status(status, description)

    def is_recording(self) -> bool:
        return self._handle.span.is_recording()

    def fail(self, message: str) -> None:
        """An error MassGen reports by yielding it (e.g. "Invalid agent_id after 3 attempts"): the
        round's outcome, error status, and an exception event (so `is_exception` finds it)."""
        if self._handle.outcome is None:
            self._handle._set_outcome_attrs("error", error_message=message)
        if not self._failed:
            self._failed = True
            turns.agent_failed(self._handle.span, message)

    def enforcement(self, attributes: Mapping[str, Any]) -> None:
        """One of MassGen's enforcement retries in this round, as an event; the round counts them."""
        self._retries += 1
        self._handle.span.add_event(semconv.EVENT_MASSGEN_ENFORCEMENT, attributes)
        self._handle.set_attribute(semconv.MASSGEN_ENFORCEMENT_RETRIES, self._retries)

    def discard_vote(self) -> None:
        """MassGen ignored this round's vote: the round's outcome says so."""
        self._handle._set_outcome_attrs(semconv.OUTCOME_VOTE_DISCARDED)
        self._handle.set_attribute(semconv.MASSGEN_VOTE_DISCARDED, True)

    @property
    def outcome(self) -> str | None:
        return self._handle.outcome

    def finish_usage(self) -> None:
        """Before the round ends: without calls mastrace saw, use the change in MassGen's total."""
        reported = self._reported
        if not reported:
            return
        with _LOCK:
            before = _state.totals.get(self._agent, {})
            _state.totals[self._agent] = dict(reported)
        if self._handle._usage.count:  # the LLM calls inside were traced: their sum is exact
            return
        delta = {}
        for field, total in reported.items():
            previous = before.get(field, 0.0)
            delta[field] = total - previous if total >= previous else total  # a reset backend
        usage = TokenUsage(
            input_tokens=int(delta.get("input_tokens", 0)),
            output_tokens=int(delta.get("output_tokens", 0)),
            reasoning_tokens=int(delta.get("reasoning_tokens", 0)),
            cached_input_tokens=int(delta.get("cached_input_tokens", 0)),
            cost=round(delta.get("cost", 0.0), 9),
        )
        self._handle.add_usage(usage)


@contextmanager
def _round(name: str, agent_id: str, attributes: Mapping[str, Any]) -> Iterator[Any]:
    session = current_session()
    attrs = {
        semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OP_INVOKE_AGENT,
        semconv.GEN_AI_AGENT_ID: agent_id,
        semconv.MASSGEN_AGENT_ID: agent_id,
        **_span_attributes(name, attributes),
    }
    if session is not None and session.config_hash:
        attrs[semconv.MASTRACE_CONFIG_HASH] = session.config_hash
    if name.endswith(".presentation"):
        attrs.setdefault(semconv.MASSGEN_ROUND_TYPE, semconv.ROUND_TYPE_PRESENTATION)
        attrs.setdefault(semconv.MASSGEN_IS_WINNER, True)
    presentation = name.endswith(".presentation")
    owner = turns.state.sessions.get(_session_tracker.get()) if presentation else None
    handle = AgentRound(_tracer().span(name, attrs), agent_id)
    proxy = _RoundSpan(handle, agent_id)
    try:
        with handle:
            turns.state.rounds[agent_id] = proxy
            if presentation:
                owner = owner or _only_open_session()
                if owner is not None:
                    owner.presenting = proxy
            try:
                yield proxy
            finally:
                if turns.state.rounds.get(agent_id) is proxy:
                    del turns.state.rounds[agent_id]
                with handle_internal_errors("massgen round end"):
                    proxy.finish_usage()
                    if presentation and handle.outcome is None:
                        handle._set_outcome_attrs(semconv.OUTCOME_PRESENTATION)
                    if semconv.MASTRACE_CONFIG_HASH not in attrs:  # the snapshot came after the start
                        found = current_session()
                        if found is not None and found.config_hash:
                            handle.set_attribute(semconv.MASTRACE_CONFIG_HASH, found.config_hash)
    finally:
        if owner is not None and owner.presenting is proxy:
            owner.presentation_ended()  # a session MassGen closed meanwhile ends now, after it


def _only_open_session() -> turns.SessionHandle | None:
    with turns.state.lock:
        sessions = list(turns.state.sessions.values())
    return sessions[0] if len(sessions) == 1 else None


class _ConfigComponent:
    """MassGen's resolved configuration as a registry component."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._config = config

    def gather_config(self) -> Mapping[str, Any]:
        return self._config


@contextmanager
def _session(attributes: Mapping[str, Any]) -> Iterator[Any]:
    if _suppress_session.get():
        yield NoOpSpan()
        return
    with _new_session(attributes) as span:
        yield span


def _new_session(attributes: Mapping[str, Any]) -> turns.SessionHandle:
    registry = Registry(benchmark=True)
    config = _session_config.get() or _state.last_config
    if config is not None:
        registry.register("massgen", "config", _ConfigComponent(config))
    attrs = _span_attributes(semconv.SPAN_COORDINATION_SESSION, attributes)
    ids = attrs.get(semconv.MASSGEN_AGENT_IDS)
    if isinstance(ids, str):
        attrs[semconv.MASSGEN_AGENT_IDS] = [i for i in ids.split(",") if i]
    session = CoordinationSession(_tracer().span(semconv.SPAN_COORDINATION_SESSION, attrs), registry)
    return turns.SessionHandle(session, _session_tracker.get())


@contextmanager
def _llm(name: str, attributes: Mapping[str, Any]) -> Iterator[Any]:
    """Hold MassGen's LLM span back: the SDK call inside takes it over and covers the stream."""
    attrs = _span_attributes(name, attributes)
    provider = attributes.get("llm.provider")
    pending = PendingLLMSpan(
        name, attrs, cost_calculator=turns.MassGenPricing(provider if isinstance(provider, str) else None)
    )
    started = time.time_ns()
    token = pending_llm_span.set(pending)
    holder = _Attributes(pending)
    error: BaseException | None = None
    try:
        yield holder
    except BaseException as exc:
        error = exc
        raise
    finally:
        try:
            pending_llm_span.reset(token)
        except (ValueError, RuntimeError):
            pending_llm_span.set(None)
        if not pending.claimed:  # no traced SDK underneath: record MassGen's span as it was
            span = _tracer().span(name, attrs)
            if isinstance(span, Span):
                _record_past(span, started, error)


class _Attributes:
    """The span MassGen sees for a held-back LLM span: attributes go to whichever span records
    (the SDK call spans that took it over, or the span recorded at the end)."""

    def __init__(self, pending: PendingLLMSpan) -> None:
        self._pending = pending

    def set_attribute(self, key: str, value: Any) -> None:
        self._pending.attributes[key] = value
        for span in self._pending.spans:
            span.set_attribute(key, value)

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        for key, value in attributes.items():
            self.set_attribute(key, value)

    def record_exception(self, exc: BaseException, *args: Any, **kwargs: Any) -> None:
        return None

    def add_event(self, name: str, attributes: Mapping[str, Any] | None = None, *args: Any) -> None:
        return None

    def is_recording(self) -> bool:
        return True


@contextmanager
def _mcp(name: str, attributes: Mapping[str, Any]) -> Iterator[Any]:
    """MassGen's MCP tool span; an error result (`isError`) inside it sets its error status."""
    with _tracer().span(name, attributes) as span:
        proxy = turns.McpSpan(span)
        token = turns.mcp_span.set(proxy)
        try:
            yield proxy
        finally:
            try:
                turns.mcp_span.reset(token)
            except (ValueError, RuntimeError):
                turns.mcp_span.set(None)


def _record_past(span: Span, started: int, error: BaseException | None) -> None:
    """Record a span that started at `started` (ns) and ends now."""
    span.start(attach=False, start_time=started)
    span.end(error)


def _link_vote(attrs: dict[str, Any]) -> None:
    """Remember who gave each answer; name that agent on a vote for it (`massgen.voted_for`)."""
    label = attrs.get(semconv.MASSGEN_ANSWER_LABEL)
    agent = attrs.get(semconv.MASSGEN_AGENT_ID)
    if isinstance(label, str) and isinstance(agent, str):
        with _LOCK:
            _state.answers[label] = agent
    voted = attrs.get(semconv.MASSGEN_VOTED_FOR_LABEL)
    if isinstance(voted, str) and semconv.MASSGEN_VOTED_FOR not in attrs:
        target = _state.answers.get(voted)
        if target is not None:
            attrs[semconv.MASSGEN_VOTED_FOR] = target


class _Logfire:
    """The part of `logfire`'s API MassGen calls, written to mastrace."""

    @contextmanager
    def span(self, msg_template: str, /, **attributes: Any) -> Iterator[Any]:
        name = attributes.pop("_span_name", None) or msg_template
        match = _ROUND_NAME.match(name)
        if name == semconv.SPAN_COORDINATION_SESSION:
            cm: Any = _session(attributes)
        elif match is not None:
            cm = _round(name, match.group("agent"), attributes)
        elif _LLM_NAME.match(name):
            cm = _llm(name, attributes)
        elif _MCP_NAME.fullmatch(name):
            cm = _mcp(name, _span_attributes(msg_template, attributes))
        else:
            cm = _tracer().span(name, _span_attributes(msg_template, attributes))
        with cm as span:
            yield span

    def _log(self, level: str, msg_template: str, attributes: Mapping[str, Any]) -> None:
        with handle_internal_errors("massgen log record"):
            attrs = _span_attributes(msg_template, attributes)
            attrs.setdefault(semconv.LOGFIRE_MSG, msg_template)
            _link_vote(attrs)
            attrs[semconv.LOGFIRE_LEVEL_NUM] = _LEVELS.get(level, semconv.LEVEL_INFO)
            otel_level = "error" if level in ("error", "fatal") else "info"
            if _state.known and msg_template.startswith("Agent vote:"):
                turns.hold_vote(msg_template, attrs, otel_level)  # counted or discarded later
                return
            if msg_template.startswith("Winner selected:"):
                turns.settle_votes(discarded=False)
            # A mapping, not keywords: MassGen's keys may be any name, `level` and `name` included.
            _tracer()._log(msg_template, attrs, level=otel_level)

    def trace(self, msg_template: str, /, **attributes: Any) -> None:
        self._log("trace", msg_template, attributes)

    def debug(self, msg_template: str, /, **attributes: Any) -> None:
        self._log("debug", msg_template, attributes)

    def info(self, msg_template: str, /, **attributes: Any) -> None:
        self._log("info", msg_template, attributes)

    def notice(self, msg_template: str, /, **attributes: Any) -> None:
        self._log("notice", msg_template, attributes)

    def warn(self, msg_template: str, /, **attributes: Any) -> None:
        self._log("warn", msg_template, attributes)

    warning = warn

    def error(self, msg_template: str, /, **attributes: Any) -> None:
        self._log("error", msg_template, attributes)

    def fatal(self, msg_template: str, /, **attributes: Any) -> None:
        self._log("fatal", msg_template, attributes)

    def instrument_openai(self, client: Any = None, **_: Any) -> None:
        from .openai import instrument_openai

        instrument_openai()

    def instrument_anthropic(self, client: Any = None, **_: Any) -> None:
        from .anthropic import instrument_anthropic

        instrument_anthropic()

    def instrument_google_genai(self, *args: Any, **kwargs: Any) -> None:
        return None

    def instrument_aiohttp_client(self, *args: Any, **kwargs: Any) -> None:
        return None

    def instrument_loguru(self, *args: Any, **kwargs: Any) -> None:
        return None


LOGFIRE = _Logfire()


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
    from .._streams import traced_stream

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
        except ImportError:
            warn_once(
                "massgen-missing", "mastrace: instrument_massgen() needs the massgen package; nothing traced"
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
        _state.known = False
        turns.state.clear()
