"""The spans `instrument_massgen()` turns MassGen's Logfire calls into, and the state they share.

- `coordination.session` (`_session`): carries MassGen's resolved configuration; the placeholder
  session MassGen opens in `Orchestrator.__init__` is a span that records nothing.
- `agent.<id>.round_<n>` and `agent.<id>.presentation` (`_round`, `_RoundSpan`): MassGen's running
  totals become the round's own usage; errors, enforcement retries and dropped votes land on it.
- `llm.<provider>.<op>` (`_llm`): held back so that the SDK call inside takes it over and covers the
  stream; recorded as MassGen wrote it when no traced SDK is underneath.
- `mcp.<server>.<tool>` (`_mcp`): an error result inside it sets its error status.
- Attributes (`_span_attributes`, `_link_vote`): Logfire-style templates formatted, MassGen's plain
  record keys also written under their `massgen.*` names, votes naming the agent voted for.

`_state`, `_LOCK` and the context variables here are the integration's only copies: `massgen` (the
patches) and `_massgen_logfire` (the `logfire` stand-in) import them and never rebind them.
"""

from __future__ import annotations

import contextvars
import string
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from .. import semconv
from ..mixins.agent import AgentRound
from ..mixins.coordination import CoordinationSession, current_session
from ..registry import Registry
from ..tracing._errors import handle_internal_errors, text_of
from ..tracing._state import STATE
from ..tracing._tracer import NoOpSpan, Span, get_tracer
from ..usage import TokenUsage
from . import _massgen_turns as turns
from ._llm_calls import PendingLLMSpan, cut_off_calls, pending_llm_span

__all__ = [
    "_LOCK",
    "_link_vote",
    "_llm",
    "_mcp",
    "_round",
    "_session",
    "_session_config",
    "_session_tracker",
    "_span_attributes",
    "_state",
    "_suppress_session",
    "_tool_call",
    "_tracer",
]

_LOCK = threading.Lock()
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
        # Question -> the turns of this process that asked it: the next one's repetition index.
        self.asked: dict[str, int] = {}


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

    def __init__(self, handle: AgentRound, agent_id: str, session: Any = None) -> None:
        self._handle = handle
        self._agent = agent_id
        self.session = session  # the `CoordinationSession` the round runs in, if known
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

    def cut_short(self, outcome: str, reason: str, event: str | None = None) -> None:
        """The round ends now with `outcome` (timeout, interrupted, cancelled): see `AgentRound.cut_short`.
        The LLM calls still running in it end first, cut off (`_llm_calls.cut_off_calls`)."""
        with handle_internal_errors("massgen round cut short"):
            cut_off_calls(self._handle._usage, f"{outcome}: {reason}")
            self.finish_usage()
        self._handle.cut_short(outcome, reason, event)

    def discard_vote(self) -> None:
        """MassGen ignored this round's vote: the round's outcome says so."""
        self._handle._set_outcome_attrs(semconv.OUTCOME_VOTE_DISCARDED)
        self._handle.set_attribute(semconv.MASSGEN_VOTE_DISCARDED, True)

    @property
    def outcome(self) -> str | None:
        return self._handle.outcome

    def finish_usage(self) -> None:
        """Before the round ends: without calls mastrace saw, use the change in MassGen's total."""
        reported, self._reported = self._reported, {}
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
    proxy = _RoundSpan(handle, agent_id, session)
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
    attrs.update(_experiment_attributes(attrs.get(semconv.MASSGEN_TASK)))
    session = CoordinationSession(_tracer().span(semconv.SPAN_COORDINATION_SESSION, attrs), registry)
    return turns.SessionHandle(session, _session_tracker.get())


def _experiment_attributes(question: Any) -> dict[str, Any]:
    """A turn as a run of an experiment: the question is its task, and the turns of this process that
    asked it before count its repetition, from `configure(repetition=...)` (`mastrace run
    --repetition N`) when an experiment runs one process per repetition, else from 0 (the
    configuration and its hash come with the session)."""
    if not isinstance(question, str) or not question:
        return {}
    with _LOCK:
        asked = _state.asked.get(question, 0)
        _state.asked[question] = asked + 1
    repetition = (STATE.repetition or 0) + asked
    return {
        semconv.MASTRACE_EXPERIMENT_TASK_ID: question,
        semconv.MASTRACE_EXPERIMENT_REPETITION: repetition,
    }


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
    """MassGen's MCP tool span; an error result (`isError`) inside it sets its error status. Inside
    a tool use (`_tool_call`) it is one attempt: `mastrace.tool.attempt` counts them (2 and up:
    MassGen's retries)."""
    call = turns.tool_call.get()
    if call is not None:
        call.attempts += 1
        attributes = {**attributes, semconv.MASTRACE_TOOL_ATTEMPT: call.attempts}
    with _tracer().span(name, attributes) as span:
        proxy = turns.McpSpan(span)
        token = turns.mcp_span.set(proxy)
        try:
            yield proxy
        except BaseException as exc:
            if call is not None:
                call.error = (_exception_type(exc), text_of(exc))
            raise
        else:
            if call is not None:
                call.error = (None, proxy.error) if proxy.error is not None else None
        finally:
            try:
                turns.mcp_span.reset(token)
            except (ValueError, RuntimeError):
                turns.mcp_span.set(None)


def _exception_type(exc: BaseException) -> str:
    """The exception's type as the OpenTelemetry SDK records it (`module.Qualname`)."""
    kind = type(exc)
    module = getattr(kind, "__module__", None)
    return f"{module}.{kind.__qualname__}" if module and module != "builtins" else kind.__qualname__


@contextmanager
def _tool_call(name: str, attributes: Mapping[str, Any]) -> Iterator[Any]:
    """MassGen's `mcp_tool.<name>` span around one tool use (its attempts inside): failed when the
    last attempt failed, which MassGen reports only as an "Error: ..." result."""
    call = turns.ToolCall()
    with _tracer().span(name, attributes) as span:
        token = turns.tool_call.set(call)
        try:
            yield span
        finally:
            try:
                turns.tool_call.reset(token)
            except (ValueError, RuntimeError):
                turns.tool_call.set(None)
        if call.error is not None:
            with handle_internal_errors("massgen tool call"):
                turns.tool_call_failed(span, call.error)


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
