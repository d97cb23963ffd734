"""How `instrument_massgen()` follows a turn, through the `logfire` stand-in MassGen's tracer proxy
is given (no MassGen needed): votes settled as counted or discarded, a session that ends after its
presentation, and a turn that ends without a final answer, by an exception or a cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from mastrace.integrations import _massgen_spans as spans
from mastrace.integrations import _massgen_turns as turns
from mastrace.integrations import massgen as integration
from mastrace.integrations._massgen_logfire import LOGFIRE
from mastrace.testing import CapturedSpans


@pytest.fixture(autouse=True)
def fresh_state() -> Iterator[None]:
    integration.uninstrument_massgen()
    spans._state.on = spans._state.known = True  # as after instrumenting a known version
    yield
    integration.uninstrument_massgen()


def _vote(voter: str, label: str) -> None:
    LOGFIRE.info(
        f"Agent vote: {voter} -> {label}",
        agent_id=voter,
        voted_for_label=label,
        **{"massgen.vote.reason": "best"},
    )


def _open_session(tracker: object) -> Any:
    token = spans._session_tracker.set(id(tracker))
    try:
        cm = LOGFIRE.span("coordination.session", **{"massgen.task": "t", "massgen.agent_ids": "a,b"})
        cm.__enter__()
    finally:
        spans._session_tracker.reset(token)
    return cm


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


def test_votes_before_a_restart_are_discarded_and_later_ones_counted(mastrace_spans: CapturedSpans) -> None:
    """MassGen resets every vote when a new answer arrives: those are recorded as discarded."""
    tracker = object()
    session = _open_session(tracker)
    _vote("a", "agent2.1")
    _vote("b", "agent2.1")
    turns.restart_signal(_noop, tracker, ("c", ["a", "b", "c"]), {})
    _vote("a", "agent3.1")
    LOGFIRE.info("Winner selected: agent3.1", winner_agent_id="c")
    session.__exit__(None, None, None)
    votes = mastrace_spans.by_name("Agent vote: a -> agent2.1") + mastrace_spans.by_name(
        "Agent vote: b -> agent2.1"
    )
    assert len(votes) == 2 and all(v.attributes["massgen.vote.discarded"] is True for v in votes)
    counted = mastrace_spans.one("Agent vote: a -> agent3.1")
    assert "massgen.vote.discarded" not in counted.attributes
    assert counted.attributes["massgen.vote.reason"] == "best"
    session_span = mastrace_spans.one("coordination.session")
    assert all(
        v.parent is not None and v.parent.span_id == session_span.context.span_id for v in [*votes, counted]
    )
    assert counted.start_time < mastrace_spans.one("Winner selected: agent3.1").start_time


def test_the_session_ends_after_the_presentation_it_was_closed_in(mastrace_spans: CapturedSpans) -> None:
    """MassGen closes the session from inside the winner's presentation: it ends after it."""
    tracker = object()
    session = _open_session(tracker)
    token = spans._session_tracker.set(id(tracker))
    with LOGFIRE.span("agent.a.presentation", **{"massgen.agent_id": "a"}):
        session.__exit__(None, None, None)  # the final answer, while presenting
        assert not mastrace_spans.by_name("coordination.session")
    spans._session_tracker.reset(token)
    presentation = mastrace_spans.one("agent.a.presentation")
    session_span = mastrace_spans.one("coordination.session")
    assert presentation.attributes["massgen.outcome"] == "presentation"
    assert (
        session_span.start_time <= presentation.start_time and presentation.end_time <= session_span.end_time
    )


async def _chunks(*items: Any, error: BaseException | None = None) -> AsyncIterator[Any]:
    for item in items:
        yield item
    if error is not None:
        raise error


def _turn(stream: AsyncIterator[Any], *, final: bool = False) -> tuple[Any, Any]:
    """(MassGen's hold on the session, the watched turn); MassGen's tracker keeps the session open."""
    tracker = SimpleNamespace(final_winner="a" if final else None, final_answers={"a": 1} if final else {})
    orchestrator = SimpleNamespace(coordination_tracker=tracker)
    held = _open_session(tracker)
    return held, turns.watch_turn(orchestrator, stream)


async def _drain(stream: AsyncIterator[Any]) -> None:
    async for _ in stream:
        pass


def test_a_turn_without_a_final_answer_ends_its_session_failed(mastrace_spans: CapturedSpans) -> None:
    """MassGen's own failure (reported as a marked content chunk) becomes the session's error."""
    chunk = SimpleNamespace(
        type="content", content="❌ Unable to provide coordinated answer - no successful agents"
    )
    _held, stream = _turn(_chunks(chunk))
    asyncio.run(_drain(stream))
    span = mastrace_spans.one("coordination.session")
    assert span.status.status_code.name == "ERROR"
    assert span.attributes["massgen.failure_reason"].startswith("Unable to provide coordinated answer")


def test_a_turn_that_raises_records_the_exception_on_its_session(mastrace_spans: CapturedSpans) -> None:
    """An exception out of the turn ends the session with it (is_exception) and goes on to the caller."""
    _, stream = _turn(
        _chunks(SimpleNamespace(type="content", content="x"), error=RuntimeError("backend down"))
    )
    with pytest.raises(RuntimeError):
        asyncio.run(_drain(stream))
    span = mastrace_spans.one("coordination.session")
    assert span.status.status_code.name == "ERROR"
    assert [e.attributes["exception.type"] for e in span.events if e.name == "exception"] == ["RuntimeError"]
    assert "backend down" in span.attributes["massgen.failure_reason"]


def test_a_cancelled_turn_ends_its_session_as_cancelled(mastrace_spans: CapturedSpans) -> None:
    """A turn closed before its end (the consumer stopped, Ctrl-C) is a failed session, not a missing one."""

    async def stop_early() -> None:
        _held, stream = _turn(
            _chunks(SimpleNamespace(type="content", content="x"), SimpleNamespace(type="y"))
        )
        async for _ in stream:
            break
        await stream.aclose()

    asyncio.run(stop_early())
    span = mastrace_spans.one("coordination.session")
    assert (
        span.status.status_code.name == "ERROR" and "cancelled" in span.attributes["massgen.failure_reason"]
    )


def test_a_finished_turn_keeps_its_session_as_massgen_closed_it(mastrace_spans: CapturedSpans) -> None:
    """With a final answer, the end of the turn adds no error."""
    _held, stream = _turn(_chunks(SimpleNamespace(type="done", content=None)), final=True)
    asyncio.run(_drain(stream))
    span = mastrace_spans.one("coordination.session")
    assert span.status.status_code.name != "ERROR" and "massgen.failure_reason" not in span.attributes


def test_each_turn_is_an_experiment_run_of_its_question(mastrace_spans: CapturedSpans) -> None:
    """The question is the run's task, the earlier turns that asked it give its repetition index, and
    the outcome is `success` for a finished turn and `error` for a failed one."""
    failed = SimpleNamespace(type="content", content="❌ Unable to provide coordinated answer")
    for final in (True, False, True):
        chunk = SimpleNamespace(type="done", content=None) if final else failed
        _held, stream = _turn(_chunks(chunk), final=final)
        asyncio.run(_drain(stream))
    sessions = sorted(mastrace_spans.by_name("coordination.session"), key=lambda s: s.start_time or 0)
    assert [
        (
            s.attributes["mastrace.experiment.task_id"],
            s.attributes["mastrace.experiment.repetition"],
            s.attributes["mastrace.experiment.outcome"],
        )
        for s in sessions
    ] == [("t", 0, "success"), ("t", 1, "error"), ("t", 2, "success")]
