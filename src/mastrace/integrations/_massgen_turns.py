"""MassGen's coordination turns as MassGen itself counts them: the parts of `instrument_massgen()`
that follow a turn from start to end.

- A turn (one `Orchestrator.chat()`) always ends its `coordination.session`: with a final answer as
  MassGen closes it; with error status and `massgen.failure_reason` when it raised, was cancelled,
  or ended without one (MassGen's "no successful agents"), which MassGen never closes.
- The session ends after the winner's presentation span (MassGen closes the session from inside it).
- Votes are recorded once MassGen has settled them: a vote followed by a new answer is dropped by
  MassGen (all votes are reset) and is recorded with `massgen.vote.discarded=true`.
- MassGen's enforcement retries (a vote for an unknown agent, no workflow tool, ...) become
  `massgen.enforcement` events on the round they happened in.
- An MCP tool result the MCP SDK reports as an error (`isError`) sets error status on its
  `mcp.<server>.<tool>` span, whatever MassGen's `tool.success` says.
- Rounds still running when a turn ends are cut short: `interrupted` when a SIGINT (Ctrl-C) ended it,
  also when it reached the turn as the cancellation `asyncio.run()` turns it into (`SIGINT` below),
  else `cancelled`.
- LLM calls made by a MassGen backend are priced by MassGen's own calculator (LiteLLM's), so the
  costs equal MassGen's; a model MassGen cannot price is left to mastrace's table, else unknown.
"""

from __future__ import annotations

import contextvars
import functools
import signal
import sys
import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context

from .. import semconv
from ..mixins.coordination import CoordinationSession
from ..tracing._errors import handle_internal_errors, log_internal_error
from ..tracing._tracer import Span, get_tracer
from ..usage import TokenUsage

__all__ = ["MassGenPricing", "TurnState", "state"]

_FAILED_AGENT = "massgen.AgentError"
"""The exception type recorded for an agent failure MassGen only reports as a value."""
_AGENT_TIMEOUT = "agent_timeout"
"""MassGen's coordination event type for an agent its orchestrator timed out."""


def tracer() -> Any:
    return get_tracer("mastrace.massgen")


# -- prices --------------------------------------------------------------------------------------


class MassGenPricing:
    """A `CostCalculator` that asks MassGen's own token calculator (LiteLLM's prices).

    MassGen treats a cost of 0 for a call that used tokens as "not in the pricing database"
    (it warns so); that is returned as None (unknown), never as a price of 0.
    """

    _calculator: Any = None
    _lock = threading.Lock()

    def __init__(self, provider: str | None) -> None:
        self.provider = provider

    @classmethod
    def _shared(cls) -> Any:
        """MassGen's calculator; None when MassGen's pricing module cannot be imported."""
        with cls._lock:
            if cls._calculator is None:
                try:
                    from massgen.token_manager.token_manager import TokenCostCalculator
                except ImportError:
                    return None
                cls._calculator = TokenCostCalculator()
            return cls._calculator

    def calculate_cost(self, usage: TokenUsage, model_id: str) -> float | None:
        """MassGen's cost for `usage` on `model_id`, or None when MassGen has no price."""
        if not model_id:
            return None
        shape: dict[str, Any] = {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens or usage.input_tokens + usage.output_tokens,
        }
        if usage.cached_input_tokens:
            shape["prompt_tokens_details"] = {"cached_tokens": usage.cached_input_tokens}
        if usage.reasoning_tokens:
            shape["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
        calculator = self._shared()
        if calculator is None:
            return None
        cost = float(calculator.calculate_cost_with_usage_object(model_id, shape, self.provider) or 0.0)
        if cost <= 0.0 and (usage.input_tokens or usage.output_tokens):
            return None
        return cost


# -- shared state --------------------------------------------------------------------------------


@dataclass
class _Vote:
    name: str
    attributes: dict[str, Any]
    level: str
    at: int
    parent: Any


@dataclass
class TurnState:
    """What the integration follows while MassGen runs (one process, any number of turns)."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    # Each agent's open round (its `_RoundSpan`), so that errors and enforcement retries land on it.
    rounds: dict[str, Any] = field(default_factory=dict)
    # The open session of each coordination tracker (by id), and its presentation round if open.
    sessions: dict[int, SessionHandle] = field(default_factory=dict)
    votes: list[_Vote] = field(default_factory=list)

    def clear(self) -> None:
        with self.lock:
            self.rounds.clear()
            self.sessions.clear()
            self.votes.clear()


state = TurnState()


# -- votes -----------------------------------------------------------------------------------------


def hold_vote(name: str, attributes: dict[str, Any], level: str) -> None:
    """Keep a vote record until MassGen has settled it (counted, or dropped by a new answer)."""
    vote = _Vote(name, attributes, level, time.time_ns(), otel_context.get_current())
    with state.lock:
        state.votes.append(vote)


def settle_votes(*, discarded: bool) -> None:
    """Record the votes held so far, as discarded (a new answer reset them) or as counted."""
    with state.lock:
        votes, state.votes = state.votes, []
    for vote in votes:
        with handle_internal_errors("massgen vote"):
            attrs = dict(vote.attributes)
            if discarded:
                attrs[semconv.MASSGEN_VOTE_DISCARDED] = True
            token = otel_context.attach(vote.parent)
            try:
                span = tracer().span(vote.name, {semconv.LOGFIRE_SPAN_TYPE: "log", **attrs})
                if isinstance(span, Span):
                    span.start(attach=False, start_time=vote.at)
                    span.end(end_time=vote.at)
            finally:
                otel_context.detach(token)


def restart_signal(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """`CoordinationTracker.track_restart_signal`: MassGen has just reset every vote cast so far."""
    result = wrapped(*args, **kwargs)
    settle_votes(discarded=True)
    return result


def agent_action(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """`CoordinationTracker.track_agent_action`: a vote MassGen ignored (the voter had a restart
    pending) is never logged by MassGen as a vote; it is recorded here as a discarded one. A
    timeout (MassGen's orchestrator ran out of time while the agent worked) ends the agent's round
    and marks the session."""
    result = wrapped(*args, **kwargs)
    with handle_internal_errors("massgen agent action"):
        given = {**dict(zip(("agent_id", "action_type", "details"), args, strict=False)), **kwargs}
        action = str(getattr(given.get("action_type"), "value", given.get("action_type")))
        if action == "vote_ignored":
            _ignored_vote(instance, str(given.get("agent_id")), str(given.get("details") or ""))
        elif action == semconv.OUTCOME_TIMEOUT:
            agent_timed_out(instance, str(given.get("agent_id")), str(given.get("details") or "timeout"))
    return result


def agent_timed_out(tracker: Any, agent: str, reason: str) -> None:
    """MassGen's `agent_timeout`: a `Coordination event: agent_timeout` record for the agent, its
    open round ended with outcome `timeout`, and the turn's session marked as timed out."""
    attrs = {
        semconv.MASSGEN_AGENT_ID: agent,
        semconv.GEN_AI_AGENT_ID: agent,
        semconv.MASSGEN_EVENT_TYPE: _AGENT_TIMEOUT,
        semconv.MASSGEN_TIMEOUT_REASON: reason,
        semconv.LOGFIRE_MSG: f"Coordination event: {_AGENT_TIMEOUT} ({agent}: {reason})",
        semconv.LOGFIRE_LEVEL_NUM: semconv.LEVEL_WARN,
    }
    tracer()._log(f"Coordination event: {_AGENT_TIMEOUT}", attrs)
    proxy = state.rounds.get(agent)
    if proxy is not None:
        proxy.cut_short(semconv.OUTCOME_TIMEOUT, reason, semconv.EVENT_MASSGEN_TIMEOUT)
    handle = open_session(tracker)
    if handle is not None:
        handle.time_out(reason)


def _ignored_vote(tracker: Any, voter: str, details: str) -> None:
    target = details.removeprefix("Voted for ").split(" but ignored", 1)[0].strip()
    mapping: dict[str, str] = getattr(tracker, "get_anonymous_agent_mapping", dict)()
    voted_for = mapping.get(target, target)
    attrs = {
        semconv.MASSGEN_AGENT_ID: voter,
        semconv.GEN_AI_AGENT_ID: voter,
        semconv.MASSGEN_VOTED_FOR: voted_for,
        semconv.MASSGEN_VOTE_DISCARDED: True,
        semconv.LOGFIRE_MSG: f"Agent vote: {voter} -> {voted_for} (ignored: a new answer came first)",
    }
    tracer()._log(f"Agent vote: {voter} -> {voted_for}", attrs)
    proxy = state.rounds.get(voter)
    if proxy is not None:
        proxy.discard_vote()


# -- enforcement retries ---------------------------------------------------------------------------


def enforcement_event(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """`CoordinationTracker.track_enforcement_event`: an event on the agent's open round."""
    result = wrapped(*args, **kwargs)
    with handle_internal_errors("massgen enforcement"):
        names = ("agent_id", "reason", "attempt", "max_attempts", "tool_calls", "error_message")
        given = {**dict(zip(names, args, strict=False)), **kwargs}
        proxy = state.rounds.get(str(given.get("agent_id")))
        if proxy is not None:
            attrs = {
                semconv.MASSGEN_ENFORCEMENT_REASON: given.get("reason"),
                semconv.MASSGEN_ENFORCEMENT_ATTEMPT: given.get("attempt"),
                semconv.MASSGEN_ENFORCEMENT_MAX_ATTEMPTS: given.get("max_attempts"),
                semconv.MASSGEN_ENFORCEMENT_TOOL_CALLS: list(given.get("tool_calls") or []),
                semconv.MASSGEN_ENFORCEMENT_BUFFER_CHARS_LOST: int(given.get("buffer_chars") or 0),
                semconv.MASSGEN_ENFORCEMENT_ERROR: given.get("error_message"),
            }
            proxy.enforcement({k: v for k, v in attrs.items() if v is not None})
    return result


# -- MCP results -----------------------------------------------------------------------------------

mcp_span: contextvars.ContextVar[McpSpan | None] = contextvars.ContextVar(
    "mastrace_massgen_mcp", default=None
)


class McpSpan:
    """MassGen's `mcp.<server>.<tool>` span: an error result sets error status and `tool.success=false`."""

    def __init__(self, span: Any) -> None:
        self._span = span
        self.error: str | None = None

    def fail(self, message: str) -> None:
        self.error = message
        self._span.set_status("error", message)
        self._span.set_attribute(semconv.MASSGEN_TOOL_SUCCESS, False)
        self._span.set_attribute(semconv.MASTRACE_TOOL_SUCCESS, False)
        self._span.set_attribute(semconv.ERROR_TYPE, "tool_error")

    def set_attribute(self, key: str, value: Any) -> None:
        if key == semconv.MASSGEN_TOOL_SUCCESS and self.error is not None:
            return  # MassGen says True for every result it got back
        self._span.set_attribute(key, value)

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        for key, value in attributes.items():
            self.set_attribute(key, value)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._span, name)


@dataclass
class ToolCall:
    """One tool use as MassGen's `mcp_tool.<name>` span wraps it: MassGen may call the MCP server
    more than once for it (it retries a call that raised), each attempt an `mcp.*` span."""

    attempts: int = 0
    error: tuple[str | None, str] | None = None
    """How the last attempt failed: (exception type or None for an error result, message); else None."""


tool_call: contextvars.ContextVar[ToolCall | None] = contextvars.ContextVar(
    "mastrace_massgen_tool_call", default=None
)


def tool_call_failed(span: Any, error: tuple[str | None, str]) -> None:
    """The tool use failed (its last attempt did): its wrapper span says so, with the attempt's
    error, so that the errors table lists the failure once (at the attempt)."""
    kind, message = error
    if kind is not None:
        span.add_event(
            "exception",
            {
                semconv.EXCEPTION_TYPE: kind,
                semconv.EXCEPTION_MESSAGE: message,
                semconv.EXCEPTION_ESCAPED: False,
            },
        )
    span.set_status("error", f"{kind}: {message}" if kind is not None else message)
    span.set_attribute(semconv.MASTRACE_TOOL_SUCCESS, False)
    span.set_attribute(semconv.ERROR_TYPE, kind or "tool_error")


async def call_tool(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """`mcp.ClientSession.call_tool`: an `isError` result marks the MassGen MCP span it is under."""
    result = await wrapped(*args, **kwargs)
    span = mcp_span.get()
    if span is not None and getattr(result, "isError", False):
        with handle_internal_errors("massgen mcp result"):
            texts = [getattr(c, "text", "") for c in getattr(result, "content", None) or ()]
            span.fail(" ".join(t for t in texts if isinstance(t, str))[:500] or "tool returned an error")
    return result


# -- SIGINT ----------------------------------------------------------------------------------------

INTERRUPTED = "KeyboardInterrupt (SIGINT)"
"""The start of the failure reason of a turn a SIGINT ended (and of its rounds' error message)."""


def sigint_runner() -> Any:
    """The `asyncio.Runner` handling SIGINT in this process now, else None (read only: mastrace
    installs no signal handler).

    From Python 3.11, `asyncio.run()` handles SIGINT while its main task runs: the first one cancels
    the main task, so the turn ends with a `CancelledError`, and the runner counts it (the
    `KeyboardInterrupt` is raised only once the task has ended). MassGen's `CancellationManager`,
    while registered, keeps the handler it replaced (`_original_handler`).
    """
    runner_type = getattr(sys.modules.get("asyncio"), "Runner", None)
    if runner_type is None:  # Python 3.10: SIGINT raises KeyboardInterrupt, seen as it propagates
        return None
    handler: Any = signal.getsignal(signal.SIGINT)
    for _ in range(3):
        if isinstance(handler, functools.partial):
            owner = getattr(handler.func, "__self__", None)
            return owner if isinstance(owner, runner_type) else None
        handler = getattr(getattr(handler, "__self__", None), "_original_handler", None)
        if handler is None:
            return None
    return None


def runner_interrupted(runner: Any) -> bool:
    """Whether `runner` (an `asyncio.Runner`) has received a SIGINT while it ran its main task."""
    count = getattr(runner, "_interrupt_count", 0)
    return isinstance(count, int) and count > 0


def caused_by_interrupt(exc: BaseException | None) -> bool:
    """Whether `exc` is a `KeyboardInterrupt`, or was raised while one was being handled or because
    of one (Python 3.10's `asyncio.run()` cancels its tasks as the `KeyboardInterrupt` leaves it)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen and len(seen) < 16:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def interrupted_reason(reason: str) -> str:
    """A turn's failure reason, said to be a SIGINT's doing."""
    if reason.startswith(KeyboardInterrupt.__name__):
        reason = reason[len(KeyboardInterrupt.__name__) :].lstrip(": ")
    return f"{INTERRUPTED}: {reason}" if reason else INTERRUPTED


# -- the session of a turn ---------------------------------------------------------------------------


class SessionHandle:
    """The `coordination.session` of one MassGen turn, as MassGen's tracker holds it.

    MassGen enters it when a turn starts and exits it at the final answer; the integration ends
    it when the turn ends any other way. Its end waits for an open presentation round.
    """

    def __init__(self, session: CoordinationSession, tracker_id: int) -> None:
        self.session = session
        self.tracker_id = tracker_id
        self.open = False
        self.presenting: Any = None  # the presentation round, while open
        self._close_after_presentation = False
        self.failure: str | None = None
        self.timed_out = False
        self.interrupted = False  # a SIGINT ended the turn (MassGen's own Ctrl-C flag said so)
        # Whoever handles SIGINT while the turn runs (`sigint_runner`), to ask at the end whether it
        # came: by then `asyncio.run()` may have put its handler back.
        runner = sigint_runner()
        self._runner = weakref.ref(runner) if runner is not None else None

    def __enter__(self) -> Any:
        self.session.__enter__()
        self.open = True
        with state.lock:
            state.sessions[self.tracker_id] = self
        return self.session.span

    def __exit__(self, exc_type: Any = None, exc: BaseException | None = None, tb: Any = None) -> None:
        if not self.open:
            return
        if exc is None and self.presenting is not None:
            self._close_after_presentation = True  # MassGen closes the session inside its presentation
            return
        self.close(exc)

    def presentation_ended(self) -> None:
        self.presenting = None
        if self._close_after_presentation:
            self.close(None)

    def time_out(self, reason: str) -> None:
        """MassGen's orchestrator timed out: the session says so (`massgen.finish_reason=timeout`,
        the reason, error status) however the turn ends (MassGen presents an answer it has)."""
        if not self.open or self.timed_out:
            return
        self.timed_out = True
        span = self.session.span
        span.set_attribute(semconv.MASSGEN_FINISH_REASON, semconv.OUTCOME_TIMEOUT)
        span.set_attribute(semconv.MASSGEN_TIMEOUT_REASON, reason)
        span.set_status("error", f"{semconv.OUTCOME_TIMEOUT}: {reason}")

    def was_interrupted(self, exc: BaseException | None = None) -> bool:
        """Whether a SIGINT ended the turn: `exc` (what ended it) is or follows a `KeyboardInterrupt`,
        or the `asyncio.Runner` handling SIGINT received one (it cancels the turn's task)."""
        if self.interrupted or caused_by_interrupt(exc):
            return True
        runner = self._runner() if self._runner is not None else None
        return runner is not None and runner_interrupted(runner)

    def fail(self, reason: str, exc: BaseException | None = None) -> None:
        """End the turn's session as failed (`reason` says why; a SIGINT's doing says so)."""
        if not self.open:
            return
        if self.was_interrupted(exc):
            self.interrupted = True
            reason = interrupted_reason(reason)
        self.failure = reason
        span = self.session.span
        span.set_attribute(semconv.MASSGEN_FAILURE_REASON, reason)
        if exc is None:
            span.set_status("error", reason)
        self.close(exc)

    def close(self, exc: BaseException | None) -> None:
        if not self.open:
            return
        self.open = False
        with state.lock:
            if state.sessions.get(self.tracker_id) is self:
                del state.sessions[self.tracker_id]
        try:
            settle_votes(discarded=False)
            self._end_open_rounds(exc)
            # The run's outcome, as an experiment counts it: a failed turn is a failed run.
            failed = exc is not None or self.failure is not None
            self.session.span.set_attribute(
                semconv.MASTRACE_EXPERIMENT_OUTCOME, "error" if failed else "success"
            )
        finally:
            self.session.__exit__(type(exc) if exc is not None else None, exc, None)

    def _end_open_rounds(self, exc: BaseException | None) -> None:
        """Rounds of this session still running end now, before it, with an outcome that says why:
        `interrupted` (SIGINT), else `cancelled` (the turn was cancelled or ended without them)."""
        with state.lock:
            mine = [
                (agent, proxy)
                for agent, proxy in state.rounds.items()
                if getattr(proxy, "session", None) in (None, self.session)
            ]
        if not mine:
            return
        interrupted = self.was_interrupted(exc)
        outcome = semconv.OUTCOME_INTERRUPTED if interrupted else semconv.OUTCOME_CANCELLED
        reason = self.failure or (f"{type(exc).__name__}: {exc}" if exc is not None else "the turn ended")
        if interrupted and not reason.startswith(INTERRUPTED):
            reason = interrupted_reason(reason)
        for agent, proxy in mine:
            with handle_internal_errors("massgen open round"):
                proxy.cut_short(outcome, reason)
                with state.lock:
                    if state.rounds.get(agent) is proxy:
                        del state.rounds[agent]


def open_session(tracker: Any) -> SessionHandle | None:
    with state.lock:
        return state.sessions.get(id(tracker))


def _final_answer_given(orchestrator: Any) -> bool:
    tracker = getattr(orchestrator, "coordination_tracker", None)
    return bool(getattr(tracker, "final_winner", None)) and bool(getattr(tracker, "final_answers", None))


async def watch_turn(orchestrator: Any, stream: Any) -> Any:
    """Pass a turn's chunks through; when the turn ends without closing its session, end it failed."""
    error_text: str | None = None
    outcome: tuple[str, BaseException | None] | None = None
    try:
        async for chunk in stream:
            kind, content = getattr(chunk, "type", None), getattr(chunk, "content", None)
            # MassGen reports its own failures as error chunks, or as content marked "❌"
            if content and (kind == "error" or (kind == "content" and str(content).startswith("❌"))):
                error_text = str(content).removeprefix("❌").strip()
            yield chunk
    except GeneratorExit:
        outcome = ("cancelled: the turn was closed before it finished", None)
        await stream.aclose()
        raise
    except BaseException as exc:  # CancelledError and KeyboardInterrupt end the turn too
        outcome = (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, exc)
        raise
    finally:
        with handle_internal_errors("massgen turn end"):
            handle = open_session(getattr(orchestrator, "coordination_tracker", None))
            if handle is not None and handle.open:
                # MassGen's own Ctrl-C handler (interactive sessions) only raises a flag.
                manager = getattr(orchestrator, "cancellation_manager", None)
                if getattr(manager, "is_cancelled", False) is True:
                    handle.interrupted = True
                if getattr(orchestrator, "is_orchestrator_timeout", False) is True:
                    handle.time_out(
                        str(getattr(orchestrator, "timeout_reason", None) or "time limit exceeded")
                    )
                if _final_answer_given(orchestrator):
                    handle.close(None)  # the turn is over: its presentation too, or abandoned
                elif outcome is not None:
                    handle.fail(outcome[0], outcome[1])
                else:
                    handle.fail(error_text or "the turn ended without a final answer")


def agent_failed(span: Any, message: str) -> None:
    """Record an agent failure MassGen only yields as a value as an exception event (`is_exception`)."""
    try:
        span.add_event(
            "exception",
            {
                semconv.EXCEPTION_TYPE: _FAILED_AGENT,
                semconv.EXCEPTION_MESSAGE: message,
                semconv.EXCEPTION_ESCAPED: False,
            },
        )
    except Exception as exc:
        log_internal_error("massgen agent failure", exc)
