"""How `instrument_massgen()` follows a turn, through the `logfire` stand-in MassGen's tracer proxy
is given (no MassGen needed): votes settled as counted or discarded, a session that ends after its
presentation, and a turn that ends without a final answer, by an exception or a cancellation."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler
from types import SimpleNamespace
from typing import Any

import pytest

from live_server import serving
from mastrace.integrations import _massgen_spans as spans
from mastrace.integrations import _massgen_turns as turns
from mastrace.integrations import massgen as integration
from mastrace.integrations._massgen_logfire import LOGFIRE
from mastrace.testing import CapturedSpans, capture_spans


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


def test_turns_count_their_repetition_from_the_configured_one() -> None:
    """An experiment run one process per repetition (`mastrace run --repetition 2 -- massgen ...`):
    the process's turns of a question are repetitions 2, 3, ..."""
    with capture_spans(repetition=2) as captured:
        for _ in range(2):
            _held, stream = _turn(_chunks(SimpleNamespace(type="done", content=None)), final=True)
            asyncio.run(_drain(stream))
    sessions = sorted(captured.by_name("coordination.session"), key=lambda s: s.start_time or 0)
    assert [s.attributes["mastrace.experiment.repetition"] for s in sessions] == [2, 3]  # type: ignore[index]


async def _never_answered(waiting: asyncio.Event) -> None:
    waiting.set()
    await asyncio.Event().wait()  # the LLM call that is never answered


def _round_cut_short_by(
    end: Callable[[], None], call: Callable[[asyncio.Event], Any] = _never_answered
) -> None:
    """A turn whose agent `b` waits for an LLM call (`call`, which sets the event once it waits) when
    `end()` runs inside the turn (MassGen's real layout: the session opens inside `asyncio.run()`, the
    round runs in a task of its own, and the turn's stream cancels it as the turn ends)."""

    async def main() -> None:
        opened = asyncio.Event()

        async def agent_round() -> None:
            with LOGFIRE.span("agent.b.round_0", **{"massgen.agent_id": "b"}):
                await call(opened)

        async def chunks() -> AsyncIterator[Any]:
            round_task = asyncio.create_task(agent_round())
            try:
                await opened.wait()
                yield SimpleNamespace(type="content", content="working")
                end()
                await asyncio.Event().wait()
            finally:
                round_task.cancel()

        _held, stream = _turn(chunks())
        await _drain(stream)

    asyncio.run(main())


def test_a_sigint_ends_the_open_rounds_and_the_turn_as_interrupted(mastrace_spans: CapturedSpans) -> None:
    """Ctrl-C while an agent waits for its LLM: `asyncio.run()` (Python 3.11 and later) turns the SIGINT
    into a cancellation of its main task and raises `KeyboardInterrupt` only after; the round still
    running ends `interrupted`, and the session's reason says SIGINT. The program sees the interrupt as
    it would untraced, and mastrace leaves the SIGINT handler alone."""
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        _round_cut_short_by(lambda: signal.raise_signal(signal.SIGINT))
    assert signal.getsignal(signal.SIGINT) is before
    (round_span,) = mastrace_spans.by_name("agent.b.round_0")
    session = mastrace_spans.one("coordination.session")
    assert round_span.attributes["massgen.outcome"] == "interrupted"
    assert round_span.attributes["massgen.error_message"].startswith("KeyboardInterrupt (SIGINT)")
    assert round_span.status.status_code.name == "ERROR"
    assert session.attributes["massgen.failure_reason"].startswith("KeyboardInterrupt (SIGINT)")
    assert session.status.status_code.name == "ERROR"
    assert session.attributes["mastrace.experiment.outcome"] == "error"
    assert (round_span.end_time or 0) <= (session.end_time or 0)


def test_a_plain_cancellation_ends_the_open_rounds_as_cancelled(mastrace_spans: CapturedSpans) -> None:
    """The same turn with its task cancelled by the program (no SIGINT): `cancelled`, as before."""

    def cancel_the_main_task() -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()

    with pytest.raises(asyncio.CancelledError):
        _round_cut_short_by(cancel_the_main_task)
    (round_span,) = mastrace_spans.by_name("agent.b.round_0")
    session = mastrace_spans.one("coordination.session")
    assert round_span.attributes["massgen.outcome"] == "cancelled"
    assert session.attributes["massgen.failure_reason"] == "CancelledError"


def test_massgen_s_own_ctrl_c_handler_keeps_the_runner_it_replaced_in_view() -> None:
    """MassGen's `CancellationManager` replaces the SIGINT handler while a turn runs and keeps the one
    it replaced: the runner is still found through it, and nothing else is mistaken for one."""

    class Manager:  # what MassGen's CancellationManager keeps
        def __init__(self, original: Any) -> None:
            self._original_handler = original

        def _handle_signal(self, signum: int, frame: Any) -> None:
            raise KeyboardInterrupt

    async def main() -> tuple[Any, Any, Any]:
        runner = turns.sigint_runner()
        manager = Manager(signal.getsignal(signal.SIGINT))
        previous = signal.signal(signal.SIGINT, manager._handle_signal)
        try:
            through = turns.sigint_runner()
        finally:
            signal.signal(signal.SIGINT, previous)
        return runner, through, asyncio.get_running_loop()

    runner, through, _loop = asyncio.run(main())
    if hasattr(asyncio, "Runner"):  # Python 3.11 and later
        assert isinstance(runner, asyncio.Runner) and through is runner
        assert not turns.runner_interrupted(runner)
    else:
        assert runner is None and through is None
    assert turns.sigint_runner() is None  # outside asyncio.run(): the default handler


class _HeldStream(BaseHTTPRequestHandler):
    """A streamed completion that sends its first chunk and is held there, before its usage."""

    protocol_version = "HTTP/1.1"
    release = threading.Event()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o"}
        chunk["choices"] = [{"index": 0, "delta": {"content": "Thinking"}, "finish_reason": None}]
        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.flush()
        self.release.wait(600)
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        return None


def test_an_llm_call_a_sigint_cuts_off_ends_inside_its_round_with_its_usage_unknown(
    mastrace_spans: CapturedSpans,
) -> None:
    """SIGINT while agent `b` reads a stream whose usage has not come: the call ends with its round,
    inside it, cut off (error status), its usage unknown rather than 0; the round and the session say
    their token counts leave it out."""
    openai = pytest.importorskip("openai")
    from mastrace.integrations.openai import instrument_openai, uninstrument_openai

    async def read_the_stream(url: str, reading: asyncio.Event) -> None:
        client = openai.AsyncOpenAI(base_url=url, api_key="sk-test-not-real", max_retries=0)
        stream = await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "x"}], stream=True
        )
        async for _ in stream:
            reading.set()

    _HeldStream.release.clear()
    instrument_openai()
    try:
        with serving(_HeldStream, "/v1") as url, pytest.raises(KeyboardInterrupt):
            try:
                _round_cut_short_by(
                    lambda: signal.raise_signal(signal.SIGINT), lambda ready: read_the_stream(url, ready)
                )
            finally:
                _HeldStream.release.set()
    finally:
        uninstrument_openai()
    llm = mastrace_spans.one("llm.openai.stream")
    round_span = mastrace_spans.one("agent.b.round_0")
    session = mastrace_spans.one("coordination.session")
    assert llm.attributes["mastrace.usage.unknown"] is True
    assert (
        llm.attributes["mastrace.stream.chunks"] == 1 and llm.attributes["mastrace.stream.completed"] is False
    )
    assert "gen_ai.usage.input_tokens" not in llm.attributes
    assert llm.status.status_code.name == "ERROR" and "cut off: interrupted" in (llm.status.description or "")
    assert llm.parent is not None and llm.parent.span_id == round_span.context.span_id
    assert (llm.end_time or 0) <= (round_span.end_time or 0)
    assert round_span.attributes["massgen.outcome"] == "interrupted"
    assert round_span.attributes["mastrace.usage.unknown"] is True
    assert session.attributes["mastrace.usage.unknown"] is True
