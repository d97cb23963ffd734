"""`AgentMixin`: one span per agent round (`agent.<id>.round_<n>`) and for the presentation.

A round span carries the `massgen.*` keys MassGen's queries read, the GenAI `invoke_agent`
attributes, the session's configuration hash, and the round's own usage: the sum of what was
recorded inside it (LLM streams, `record_usage()`, `add_usage()`), never a running total, so
summing rounds gives the session total.

Example:
    >>> import mastrace
    >>> class Agent(mastrace.AgentMixin):
    ...     def __init__(self, agent_id: str) -> None:
    ...         self.agent_id = agent_id
    >>> agent = Agent("agent_a")
    >>> with agent.agent_round(0, "initial_answer") as rnd:
    ...     rnd.set_outcome("answer", answer_label="agent1.1")
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType, TracebackType
from typing import Any

from .. import semconv
from ..exceptions import ConfigError
from ..tracing._errors import log_internal_error, text_of
from ..tracing._tracer import NoOpSpan, Span
from ..usage import (
    Usage,
    UsageAccumulator,
    credit_usage,
    current_sinks,
    pop_sink,
    push_sink,
    usage_attributes,
)
from .coordination import MIXIN_TRACER, SpanHandle, add_prefixed, current_session, put_own

__all__ = ["AgentMixin", "AgentRound"]

_NO_ATTRS: Mapping[str, Any] = MappingProxyType({})
_OUTCOME_FIELDS = (
    (semconv.MASSGEN_ANSWER_LABEL, "answer_label"),
    (semconv.MASSGEN_VOTED_FOR, "voted_for"),
    (semconv.MASSGEN_VOTED_FOR_LABEL, "voted_for_label"),
    (semconv.MASSGEN_ERROR_MESSAGE, "error_message"),
)


class AgentRound(SpanHandle):
    """The handle of an agent round or presentation span; a sync and async context manager.

    It also works opened inside a generator whose items other tasks pull, when that generator
    runs through `@mastrace.instrument` or `mastrace.traced_stream`.
    """

    _usage: UsageAccumulator

    def __init__(self, span: Span | NoOpSpan, agent_id: str) -> None:
        self._span = span
        self.agent_id = agent_id
        self._usage = UsageAccumulator(label=agent_id)
        self._token: Any = None
        self._chain: tuple[Any, ...] = (self._usage,)
        self.outcome: str | None = None
        self._outcome_attrs: Mapping[str, Any] = _NO_ATTRS  # replaced, never mutated
        self._closed = False  # ended by `cut_short` before its block was left

    def __enter__(self) -> AgentRound:
        self._span.__enter__()
        self._token = push_sink(self._usage)
        self._chain = current_sinks()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._token is not None:
            token, self._token = self._token, None
            pop_sink(token, self._usage)
        if self._closed:
            # Ended already (`cut_short`): what leaves the round now (the cancellation that
            # follows a timeout or an interrupt) is not the round's own failure.
            return
        try:  # not `handle_internal_errors`: this runs for every round
            if exc is not None and not isinstance(exc, GeneratorExit):
                self._set_outcome_attrs("error", error_message=f"{type(exc).__name__}: {exc}")
            self._write_outcome()
        except Exception as error:
            log_internal_error("agent round end", error)
        self._span.__exit__(exc_type, exc, tb)

    def _write_outcome(self) -> None:
        # Outcome and usage go onto the span in one call: the SDK takes its lock once.
        attrs = self._outcome_attrs
        if self._usage.count:
            attrs = {**usage_attributes(self._usage.amounts()), **attrs}
        if attrs:  # usage numbers and outcome strings: valid as they are
            self._span._set_valid_attributes(attrs)

    def cut_short(self, outcome: str, reason: str, event: str | None = None) -> None:
        """End the round now, from outside it: timed out, interrupted or cancelled while it ran.

        The round gets `outcome` (one of `semconv.OUTCOMES_CUT_SHORT`), error status with `reason`,
        an event named `event` when given, and its usage so far (a round that already has an
        outcome keeps it); it ends now, whichever task or context calls this, so that it ends
        inside the session being closed. What later leaves the `with` block of the round (the
        cancellation of its task) is not recorded on it.
        """
        if self._closed:
            return
        self._closed = True
        try:
            if self.outcome is None:  # a round that already has its outcome only ends now
                self._set_outcome_attrs(outcome, error_message=reason)
                if event is not None:
                    self._span.add_event(event, {semconv.MASSGEN_TIMEOUT_REASON: reason})
                self._span.set_status("error", f"{outcome}: {reason}")
            self._write_outcome()
        except Exception as error:
            log_internal_error("agent round cut short", error)
        self._span.end()

    def set_outcome(
        self,
        outcome: str,
        *,
        answer_label: str | None = None,
        voted_for: str | None = None,
        voted_for_label: str | None = None,
        error_message: str | None = None,
    ) -> None:
        """Record how the round ended: `"answer"`, `"vote"` or `"error"` (which also sets error status).

        Args:
            outcome: `"answer"`, `"vote"` or `"error"`.
            answer_label: The label given to a new answer, e.g. `"agent1.1"`.
            voted_for: The agent voted for.
            voted_for_label: The answer label voted for.
            error_message: What went wrong.

        Raises:
            ConfigError: `outcome` is not one of the three.
        """
        if outcome not in semconv.OUTCOMES:
            raise ConfigError(f"outcome must be one of {', '.join(semconv.OUTCOMES)}, not {outcome!r}")
        self._set_outcome_attrs(
            outcome,
            answer_label=answer_label,
            voted_for=voted_for,
            voted_for_label=voted_for_label,
            error_message=error_message,
        )

    def _set_outcome_attrs(self, outcome: str, **fields: str | None) -> None:
        self.outcome = outcome
        attrs = {semconv.MASSGEN_OUTCOME: outcome}
        for key, name in _OUTCOME_FIELDS:
            value = fields.get(name)
            if value is not None:
                attrs[key] = value if type(value) is str else text_of(value)
        # Set when the round completes (with its usage); a later call replaces an earlier one.
        self._outcome_attrs = attrs
        if outcome == "error":
            self._span.set_status("error", fields.get("error_message") or "agent round failed")

    def add_usage(self, usage: Usage) -> None:
        """Add usage to this round (and to the session and scope around it)."""
        credit_usage(Usage.coerce(usage), chain=self._chain)


class AgentMixin:
    """Adds MassGen's agent round spans to an agent. The class must set `agent_id`.

    A round is the GenAI conventions' `invoke_agent` span: `gen_ai.agent.id` is `agent_id`,
    `gen_ai.agent.name` is `agent_name` when the class sets one (else `agent_id`),
    `gen_ai.provider.name` is `provider` when the class sets one (an agent that is also an
    `LLMBackendMixin`), and `gen_ai.conversation.id` is the session's.
    """

    agent_id: str

    def agent_round(
        self, round: int, round_type: str = semconv.ROUND_TYPE_INITIAL_ANSWER, **attrs: Any
    ) -> AgentRound:
        """Open the `agent.<id>.round_<n>` span (use with `with` or `async with`).

        Args:
            round: The agent's round number.
            round_type: `"initial_answer"`, `"voting"` or `"presentation"`.
            **attrs: Extra attributes (`num_context_answers=2` → `massgen.num_context_answers`).
        """
        agent_id = self._mastrace_agent_id()
        name = semconv.SPAN_AGENT_ROUND.format(agent_id=agent_id, round=round)
        return self._mastrace_round(name, agent_id, round, round_type, False, attrs)

    def agent_presentation(self, round: int | None = None, **attrs: Any) -> AgentRound:
        """Open the winner's `agent.<id>.presentation` span (`massgen.is_winner = True`)."""
        agent_id = self._mastrace_agent_id()
        name = semconv.SPAN_AGENT_PRESENTATION.format(agent_id=agent_id)
        return self._mastrace_round(name, agent_id, round, semconv.ROUND_TYPE_PRESENTATION, True, attrs)

    def _mastrace_round(
        self, name: str, agent_id: str, round: Any, round_type: Any, winner: bool, extra: Mapping[str, Any]
    ) -> AgentRound:
        agent_name = getattr(self, "agent_name", None)
        # The round's own attributes, valid as they are (no coercion pass); what the caller gave that
        # is not a plain string or number, and the extra attributes, go through it.
        valid: dict[str, Any] = {
            semconv.MASSGEN_AGENT_ID: agent_id,
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OP_INVOKE_AGENT,
            semconv.GEN_AI_AGENT_ID: agent_id,
        }
        user: dict[str, Any] = {}
        # (`put_own` with the usual case first, a plain string or int: one call fewer)
        if agent_name is None:
            valid[semconv.GEN_AI_AGENT_NAME] = agent_id
        else:
            put_own(valid, user, semconv.GEN_AI_AGENT_NAME, agent_name)
        provider = getattr(self, "provider", None)  # an agent that is also its LLM backend
        if isinstance(provider, str) and provider:
            put_own(valid, user, semconv.GEN_AI_PROVIDER_NAME, provider)
        session = current_session()
        if session is not None:
            conversation_id = session.conversation_id
            if type(conversation_id) is str:
                valid[semconv.GEN_AI_CONVERSATION_ID] = conversation_id
            else:
                put_own(valid, user, semconv.GEN_AI_CONVERSATION_ID, conversation_id)
            if session.config_hash is not None:
                valid[semconv.MASTRACE_CONFIG_HASH] = session.config_hash
        if type(round) is int:
            valid[semconv.MASSGEN_ROUND] = round
        else:
            put_own(valid, user, semconv.MASSGEN_ROUND, round)
        if type(round_type) is str:
            valid[semconv.MASSGEN_ROUND_TYPE] = round_type
        else:
            put_own(valid, user, semconv.MASSGEN_ROUND_TYPE, round_type)
        if winner:
            valid[semconv.MASSGEN_IS_WINNER] = True
        if extra:
            add_prefixed(user, extra)
        return AgentRound(MIXIN_TRACER._span(name, valid, user or None), agent_id)

    def _mastrace_agent_id(self) -> str:
        agent_id = getattr(self, "agent_id", None)
        if not agent_id:
            raise ConfigError(f"{type(self).__name__} uses AgentMixin but has no agent_id")
        return str(agent_id)
