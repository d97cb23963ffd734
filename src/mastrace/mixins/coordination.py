"""`CoordinationMixin`: the coordination session and its events, answers, votes and winner.

Span names and `massgen.*` keys follow MassGen's tracing, so its Logfire queries keep working:
`coordination.session` is the root; `Coordination event: <type>`, `Agent answer: <label>`,
`Agent vote: <voter> -> <label>` (linked to the answer it votes for), `Winner selected: <label>`
and `Final answer from <agent_id>` are log records under it.

Example:
    >>> import mastrace
    >>> class Orchestrator(mastrace.CoordinationMixin):
    ...     pass
    >>> orch = Orchestrator()
    >>> with orch.coordination_session("Write a haiku", ["agent_a", "agent_b"]):
    ...     orch.record_answer("agent_a", "agent1.1")
    ...     orch.record_vote("agent_b", "agent_a", "agent1.1", reason="concise")
"""

from __future__ import annotations

import contextvars
import random
import uuid
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import SpanContext

from .. import semconv
from ..pipeline._snapshots_on_spans import ConfigSnapshot
from ..registry import Registry
from ..tracing._errors import handle_internal_errors, log_internal_error
from ..tracing._genai import Conversation, conversation
from ..tracing._snapshot import dumps_json
from ..tracing._tracer import NoOpSpan, Span, Tracer, coerce_attribute, get_tracer
from ..usage import Usage, UsageAccumulator, credit_usage, pop_sink, push_sink, usage_attributes

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["CoordinationMixin", "CoordinationSession", "current_session", "prefixed"]

_CURRENT_SESSION: contextvars.ContextVar[CoordinationSession | None] = contextvars.ContextVar(
    "mastrace_coordination_session", default=None
)


def mixin_tracer() -> Tracer:
    """The tracer every mixin writes with (scope name `mastrace.mixins`)."""
    return MIXIN_TRACER


MIXIN_TRACER = get_tracer("mastrace.mixins")
"""`mixin_tracer()`, held: `get_tracer` keeps one tracer per name for the process, and a tracer
follows every `configure()`, so the mixins need not look it up for each span."""


def prefixed(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword attributes as span attributes: plain names get `massgen.`, dotted names stay as given."""
    out: dict[str, Any] = {}
    add_prefixed(out, attrs)
    return out


def add_prefixed(target: dict[str, Any], attrs: Mapping[str, Any]) -> None:
    """`target.update(prefixed(attrs))`, without the intermediate dict (hot paths)."""
    for key, value in attrs.items():
        target[key if "." in key else f"massgen.{key}"] = value


VALID_TYPES = frozenset({str, int, float, bool})
"""The types of attribute values valid as they are (exact types: subclasses are coerced)."""


def put_own(valid: dict[str, Any], user: dict[str, Any], key: str, value: Any) -> None:
    """Put a value a mixin was given (an agent id, a label) where it belongs: into `valid`, the
    attributes that skip the coercion pass, when it is a plain string, number or boolean as it is;
    else into `user`, which is coerced (None is left out, as coercion would leave it)."""
    if type(value) in VALID_TYPES:
        valid[key] = value
    elif value is not None:
        user[key] = value


def texts(values: Sequence[Any]) -> tuple[str, ...] | None:
    """`values` as the tuple of strings the coercion pass would make of them, or None when it would
    make something else of them (other types, None inside, nothing at all)."""
    if type(values) is not tuple:
        values = tuple(values)
    return values if values and {*map(type, values)} == _STR_ONLY else None


_STR_ONLY = {str}
_SET_ON_ENTER = (semconv.GEN_AI_CONVERSATION_ID, semconv.MASTRACE_CONFIG_HASH)


class SpanHandle:
    """What every mixin handle shares: the span, its own usage, attribute setters, and `async with`.

    A subclass implements `__enter__` and `__exit__`; `async with` runs the same code.
    """

    _span: Span | NoOpSpan
    _usage: UsageAccumulator | None = None

    def __enter__(self) -> Self:
        raise NotImplementedError

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    @property
    def usage(self) -> Usage:
        """The usage credited here so far."""
        return self._usage.total if self._usage is not None else Usage()

    @property
    def span(self) -> Span | NoOpSpan:
        """The underlying span handle."""
        return self._span

    def set_attribute(self, key: str, value: Any) -> None:
        """Set an attribute on the span."""
        self._span.set_attribute(key, value)

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        """Set several attributes on the span."""
        self._span.set_attributes(attributes)


def current_session() -> CoordinationSession | None:
    """The coordination session open in the current context, if any."""
    session = _CURRENT_SESSION.get()
    # One ended in another context is still set here (see `Conversation`): it is not open.
    return session if session is not None and session.is_open else None


def _log_span(
    name: str, valid: dict[str, Any], attrs: Mapping[str, Any], links: Sequence[Any] | None = None
) -> SpanContext | None:
    """A zero-duration log record (like `Tracer.event`) that returns its span context for links;
    `valid` holds the mixin's own attributes (valid as they are), `attrs` the user's."""
    return MIXIN_TRACER._log(name, attrs, links=links, valid=valid)


class CoordinationSession(SpanHandle):
    """The handle of a `coordination.session` span; a sync and async context manager.

    While open, it receives the usage recorded in its context (LLM streams, `record_usage()`),
    and puts the total on the span when it closes: `mastrace.usage` (JSON, with `by_agent`) and
    the `massgen.usage.*` totals.
    """

    _usage: UsageAccumulator

    def __init__(
        self,
        span: Span | NoOpSpan,
        registry: Registry,
        conversation: str | None = None,
        attributes: dict[str, Any] | None = None,
        user_attributes: dict[str, Any] | None = None,
    ) -> None:
        self._span = span
        self._registry = registry
        # The attributes the span starts with (the dict of valid values it was made with): the
        # session adds what it knows before the span starts, so that it all reaches the SDK in one call.
        self._attributes = attributes
        self._user_attributes = user_attributes  # the user's, which the span starts with too
        self._usage = UsageAccumulator()
        self._tokens: tuple[Any, Any, Any] | None = None
        self._pending_snapshot = False
        self.config_hash: str | None = None
        self._conversation: Conversation | None = None
        # `gen_ai.conversation.id`: given, else one per session; the agent rounds and LLM calls
        # inside carry it too, so a viewer can gather a session's spans by conversation.
        # A version-4 id from the process's random generator: `uuid4()` reads the OS (a system call
        # that gives up the interpreter lock, then waits up to a switch interval to get it back
        # while the export thread works).
        self.conversation_id = conversation or uuid.UUID(int=random.getrandbits(128), version=4).hex

    def __enter__(self) -> CoordinationSession:
        # The snapshot is cheap once the process-level facts (packages, git) are gathered, which
        # `configure()` starts on a thread, and once gathered it is gathered again only when a
        # component changed; if the facts are not ready, the snapshot is attached when the session
        # ends rather than the session waiting for them (the hash leaves them out: it is known now).
        span = self._span
        snap: ConfigSnapshot | None = None
        if not isinstance(span, Span):
            span.__enter__()
        else:
            given = self._attributes is not None
            attrs = self._attributes if self._attributes is not None else {}
            conversation_id: Any = self.conversation_id
            if type(conversation_id) is not str:  # given as another type: what coercion makes of it
                conversation_id = coerce_attribute(conversation_id)[0]
            if conversation_id is not None:
                attrs[semconv.GEN_AI_CONVERSATION_ID] = conversation_id
            with handle_internal_errors("coordination session config"):
                snap = self._registry.config_snapshot(wait=False)
                if snap is not None:
                    attrs[semconv.MASTRACE_CONFIG] = snap.text
                    if self._user_attributes:  # the session's snapshot replaces one given
                        self._user_attributes.pop(semconv.MASTRACE_CONFIG, None)
                    self.config_hash = attrs[semconv.MASTRACE_CONFIG_HASH] = snap.hash
                else:
                    self.config_hash = attrs[semconv.MASTRACE_CONFIG_HASH] = self._registry.config_hash()
            span.__enter__()
            if not given:  # texts only: valid as they are
                span._set_valid_attributes(attrs)
            if snap is not None:
                span._declare_json(semconv.MASTRACE_CONFIG, snap.text)
        self._pending_snapshot = isinstance(span, Span) and snap is None
        self._conversation = Conversation(self.conversation_id)
        self._tokens = (
            _CURRENT_SESSION.set(self),
            push_sink(self._usage),
            conversation.set(self._conversation),
        )
        return self

    @property
    def is_open(self) -> bool:
        """True between entering and leaving the session."""
        return self._tokens is not None

    def _attach_snapshot(self, *, wait: bool) -> None:
        snap: ConfigSnapshot | None = None
        with handle_internal_errors("coordination session config"):
            snap = self._registry.config_snapshot(wait=wait)
            if snap is not None:
                self._span.set_json_attribute(semconv.MASTRACE_CONFIG, snap.text)
                self._span.set_attribute(semconv.MASTRACE_CONFIG_HASH, snap.hash)
                self.config_hash = snap.hash
                self._pending_snapshot = False

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._tokens is not None:
            session_token, sink_token, conversation_token = self._tokens
            self._tokens = None
            pop_sink(sink_token, self._usage)
            if self._conversation is not None:
                self._conversation.id = None  # ended, whichever context still holds it
            for var, token, mine in (
                (conversation, conversation_token, self._conversation),
                (_CURRENT_SESSION, session_token, self),
            ):
                try:
                    var.reset(token)
                except (ValueError, RuntimeError):  # closed from another context
                    if var.get() is mine:
                        var.set(None)
        if self._pending_snapshot:  # a session shorter than the gathering of the process facts
            self._attach_snapshot(wait=True)
        with handle_internal_errors("coordination session usage"):
            total = self._usage.total
            record = {
                "total": total.to_dict(),
                "by_agent": {k: u.to_dict() for k, u in self._usage.by_label().items()},
            }
            # Built here, valid as they are: JSON text and the usage numbers, no coercion pass.
            self._span.set_json_attribute(semconv.MASTRACE_USAGE, dumps_json(record))
            self._span._set_valid_attributes(usage_attributes(total, gen_ai=False))
        self._span.__exit__(exc_type, exc, tb)

    def add_usage(self, usage: Usage) -> None:
        """Add usage incurred by the session itself (outside any agent round)."""
        credit_usage(Usage.coerce(usage), chain=(self._usage,))


class CoordinationMixin:
    """Adds MassGen's coordination spans to an orchestrator.

    The configuration snapshot comes from `mastrace_registry` when set, else from
    `mastrace.Registry.current()`.
    """

    mastrace_registry: Registry | None = None

    def coordination_session(
        self, task: str, agent_ids: Sequence[str], *, conversation_id: str | None = None, **attrs: Any
    ) -> CoordinationSession:
        """Open the root `coordination.session` span (use with `with` or `async with`).

        The span carries `massgen.task`, `massgen.agent_ids`, `massgen.num_agents`, the
        configuration of every registered component (`mastrace.config`, JSON, scrubbed on export)
        and its hash (`mastrace.config.hash`), and `gen_ai.conversation.id`, which the agent
        rounds and LLM calls inside the session carry too; keyword arguments become
        `massgen.<name>` attributes.

        Args:
            task: The task or question given to the agents.
            agent_ids: The participating agents.
            conversation_id: The session's id in your system (default: a new random id).
            **attrs: Extra attributes; dotted names are used as given.
        """
        agent_ids = list(agent_ids)
        valid: dict[str, Any] = {}
        user: dict[str, Any] = {}
        put_own(valid, user, semconv.MASSGEN_TASK, task)
        ids = texts(agent_ids)
        if ids is not None:
            valid[semconv.MASSGEN_AGENT_IDS] = ids
        else:
            user[semconv.MASSGEN_AGENT_IDS] = agent_ids
        valid[semconv.MASSGEN_NUM_AGENTS] = len(agent_ids)
        if attrs:
            add_prefixed(user, attrs)
        for key in _SET_ON_ENTER:  # the session's own values replace these as it opens
            user.pop(key, None)
        span = MIXIN_TRACER._span(semconv.SPAN_COORDINATION_SESSION, valid, user or None)
        registry = self.mastrace_registry or Registry.current()
        return CoordinationSession(span, registry, conversation_id, valid, user)

    def coordination_event(self, event_type: str, **attrs: Any) -> None:
        """Record `Coordination event: <event_type>` as a log record under the current span."""
        try:  # what `Tracer.event` does, with the mixin's own attribute valid as it is
            valid: dict[str, Any] = {}
            user: dict[str, Any] = {}
            put_own(valid, user, semconv.MASSGEN_EVENT_TYPE, event_type)
            if attrs:
                add_prefixed(user, attrs)
            _log_span(semconv.SPAN_COORDINATION_EVENT.format(event_type=event_type), valid, user)
        except Exception as exc:  # telemetry never fails the caller
            log_internal_error("event", exc)

    def record_answer(self, agent_id: str, label: str, **attrs: Any) -> None:
        """Record `Agent answer: <label>`; later votes for `label` link to it."""
        try:
            valid: dict[str, Any] = {}
            user: dict[str, Any] = {}
            put_own(valid, user, semconv.MASSGEN_AGENT_ID, agent_id)
            put_own(valid, user, semconv.MASSGEN_ANSWER_LABEL, label)
            if attrs:
                add_prefixed(user, attrs)
            ctx = _log_span(semconv.SPAN_AGENT_ANSWER.format(label=label), valid, user)
            if ctx is not None:
                self._mastrace_answers()[label] = ctx
        except Exception as exc:  # telemetry never fails the caller
            log_internal_error("record_answer", exc)

    def record_vote(
        self, voter: str, voted_for: str, label: str, reason: str | None = None, **attrs: Any
    ) -> None:
        """Record `Agent vote: <voter> -> <label>`, linked to the span of answer `label`."""
        self._linked_record(
            semconv.SPAN_AGENT_VOTE.format(voter=voter, target=label),
            label,
            (
                (semconv.MASSGEN_AGENT_ID, voter),
                (semconv.MASSGEN_VOTED_FOR, voted_for),
                (semconv.MASSGEN_VOTED_FOR_LABEL, label),
                (semconv.MASSGEN_VOTE_REASON, reason),
            ),
            attrs,
        )

    def record_winner(self, agent_id: str, label: str, **attrs: Any) -> None:
        """Record `Winner selected: <label>`, linked to the winning answer's span."""
        self._linked_record(
            semconv.SPAN_WINNER_SELECTED.format(label=label),
            label,
            (
                (semconv.MASSGEN_WINNER, agent_id),
                (semconv.MASSGEN_AGENT_ID, agent_id),
                (semconv.MASSGEN_ANSWER_LABEL, label),
            ),
            attrs,
        )

    def record_final_answer(self, agent_id: str, **attrs: Any) -> None:
        """Record `Final answer from <agent_id>`."""
        try:
            valid: dict[str, Any] = {}
            user: dict[str, Any] = {}
            put_own(valid, user, semconv.MASSGEN_AGENT_ID, agent_id)
            if attrs:
                add_prefixed(user, attrs)
            _log_span(semconv.SPAN_FINAL_ANSWER.format(agent_id=agent_id), valid, user)
        except Exception as exc:  # telemetry never fails the caller
            log_internal_error("record_final_answer", exc)

    def _linked_record(
        self, name: str, label: str, own: Sequence[tuple[str, Any]], attrs: Mapping[str, Any]
    ) -> None:
        try:
            valid: dict[str, Any] = {}
            user: dict[str, Any] = {}
            for key, value in own:
                put_own(valid, user, key, value)
            if attrs:
                add_prefixed(user, attrs)
            answer = self._mastrace_answers().get(label)
            _log_span(name, valid, user, links=[answer] if answer is not None else None)
        except Exception as exc:  # telemetry never fails the caller
            log_internal_error("record_vote", exc)

    def _mastrace_answers(self) -> dict[str, SpanContext]:
        answers: dict[str, SpanContext] | None = getattr(self, "_mastrace_answer_spans", None)
        if answers is None:
            answers = {}
            self._mastrace_answer_spans = answers
        return answers
