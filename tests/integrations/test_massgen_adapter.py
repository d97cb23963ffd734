"""The MassGen integration's pieces that need no MassGen: the `logfire` stand-in MassGen's tracer
proxy is given (sessions, rounds with running totals, held-back LLM spans, log records), and the
answer without the package. The whole run is tested against the real MassGen in `tests_massgen/`."""

from __future__ import annotations

import importlib.util
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from live_server import serving
from mastrace.integrations import massgen as integration
from mastrace.integrations._massgen_logfire import LOGFIRE
from mastrace.integrations.openai import instrument_openai, uninstrument_openai
from mastrace.testing import CapturedSpans
from mastrace.tracing._errors import reset_reported

from .test_openai import COMPLETION_TOKENS, PROMPT_TOKENS, Handler


@pytest.fixture(autouse=True)
def fresh_state() -> Iterator[None]:
    integration.uninstrument_massgen()  # also clears what earlier tests left (totals, answers)
    yield
    integration.uninstrument_massgen()


def test_without_massgen_installed_it_warns_once_and_returns_false(caplog: pytest.LogCaptureFixture) -> None:
    assert importlib.util.find_spec("massgen") is None  # the main test environment has no MassGen
    reset_reported()
    with caplog.at_level(logging.WARNING, logger="mastrace"):
        assert integration.instrument_massgen() is False
        assert integration.instrument_massgen() is False
    assert [r.getMessage() for r in caplog.records].count(
        "mastrace: instrument_massgen() needs the massgen package; nothing traced"
    ) == 1


def test_a_massgen_that_fails_to_import_is_named_with_the_real_cause(
    caplog: pytest.LogCaptureFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed MassGen whose own import fails (as with mcp 2, which lacks a name MassGen
    imports) is reported with the ImportError's message, not as a missing package."""
    package = tmp_path / "massgen"
    package.mkdir()
    (package / "__init__.py").write_text("from json import streamablehttp_client\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reset_reported()
    with caplog.at_level(logging.WARNING, logger="mastrace"):
        assert integration.instrument_massgen() is False
    messages = [r.getMessage() for r in caplog.records]
    assert any(
        m.startswith("mastrace: massgen is installed but cannot be imported (ImportError: ")
        and "cannot import name 'streamablehttp_client' from 'json'" in m
        for m in messages
    ), messages
    assert not any("needs the massgen package" in m for m in messages)


def _round(agent: str, n: int, totals: tuple[int, int]) -> None:
    with LOGFIRE.span(f"agent.{agent}.round_{n}", **{"massgen.agent_id": agent, "massgen.round": n}) as span:
        span.set_attribute("massgen.outcome", "answer")
        span.set_attribute("massgen.usage.input", totals[0])  # MassGen writes the running total
        span.set_attribute("massgen.usage.output", totals[1])


def test_running_totals_on_rounds_become_each_rounds_own_usage(mastrace_spans: CapturedSpans) -> None:
    with LOGFIRE.span("coordination.session", **{"massgen.task": "t", "massgen.agent_ids": "a,b"}):
        _round("a", 0, (100, 10))
        _round("b", 0, (40, 4))
        _round("a", 1, (250, 25))
    rounds = {
        s.name: (s.attributes["massgen.usage.input"], s.attributes["massgen.usage.output"])
        for s in mastrace_spans.spans
        if s.name.startswith("agent.")
    }
    assert rounds == {"agent.a.round_0": (100, 10), "agent.b.round_0": (40, 4), "agent.a.round_1": (150, 15)}
    session = mastrace_spans.attributes("coordination.session")
    assert session["massgen.usage.input"] == 290 and session["massgen.agent_ids"] == ("a", "b")
    round_1 = mastrace_spans.by_name("agent.a.round_1")[0]
    assert mastrace_spans.parent_of(round_1).name == "coordination.session"  # type: ignore[union-attr]
    assert round_1.attributes["massgen.outcome"] == "answer"


def test_message_templates_are_formatted_and_records_name_agents(mastrace_spans: CapturedSpans) -> None:
    LOGFIRE.info("Agent restart: {agent_id} (reason: {reason})", agent_id="agent_a", reason="new answer")
    LOGFIRE.info("Agent answer: agent1.1", agent_id="agent_a", answer_label="agent1.1")
    LOGFIRE.info("Agent vote: agent_b -> agent1.1", agent_id="agent_b", voted_for_label="agent1.1")
    LOGFIRE.info("Broken {template", x=1)
    LOGFIRE.warn("Odd keys", level="high", name="n", msg_template="t")  # names of the API's own parameters
    restart = mastrace_spans.attributes("Agent restart: {agent_id} (reason: {reason})")
    assert restart["logfire.msg"] == "Agent restart: agent_a (reason: new answer)"
    assert restart["logfire.msg_template"] == "Agent restart: {agent_id} (reason: {reason})"
    assert restart["massgen.agent_id"] == "agent_a" and restart["gen_ai.agent.id"] == "agent_a"
    vote = mastrace_spans.attributes("Agent vote: agent_b -> agent1.1")
    assert vote["massgen.voted_for"] == "agent_a" and vote["massgen.voted_for_label"] == "agent1.1"
    assert mastrace_spans.attributes("Broken {template")["logfire.msg"] == "Broken {template"
    odd = mastrace_spans.attributes("Odd keys")
    assert (odd["level"], odd["name"], odd["logfire.level_num"]) == ("high", "n", 13)


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with serving(Handler, "/v1") as url:
        yield url


def test_the_sdk_call_takes_over_the_frameworks_llm_span(
    mastrace_spans: CapturedSpans, server_url: str
) -> None:
    assert instrument_openai()
    try:
        client = openai.OpenAI(base_url=server_url, api_key="sk-test-not-real", max_retries=0)
        with LOGFIRE.span("agent.a.round_0", **{"massgen.agent_id": "a"}):
            with LOGFIRE.span(
                "llm.chatcompletion.stream", **{"llm.provider": "chatcompletion", "llm.model": "m"}
            ) as held:
                stream = client.chat.completions.create(
                    model="m",
                    messages=[{"role": "user", "content": "hi"}],
                    stream=True,
                    stream_options={"include_usage": True},
                )
                held.set_attribute("massgen.context_compression", False)  # set after the call started
            # The framework's block ended before the stream is read (as MassGen's does).
            text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    finally:
        uninstrument_openai()
    assert text
    (llm,) = mastrace_spans.by_name("llm.chatcompletion.stream")
    assert mastrace_spans.names().count("llm.openai.stream") == 0  # one span per call, not two
    assert llm.attributes["llm.model"] == "m" and llm.attributes["gen_ai.usage.input_tokens"] == PROMPT_TOKENS
    assert llm.attributes["mastrace.stream.completed"] is True
    assert llm.attributes["massgen.context_compression"] is False
    rnd = mastrace_spans.one("agent.a.round_0")
    assert mastrace_spans.parent_of(llm) is rnd
    assert (rnd.attributes["massgen.usage.input"], rnd.attributes["massgen.usage.output"]) == (
        PROMPT_TOKENS,
        COMPLETION_TOKENS,
    )


def test_an_llm_span_no_sdk_call_claims_is_recorded_as_the_framework_opened_it(
    mastrace_spans: CapturedSpans,
) -> None:
    with pytest.raises(RuntimeError), LOGFIRE.span("llm.gemini.stream", **{"llm.model": "g"}) as span:
        span.set_attribute("massgen.context_compression", True)
        time.sleep(0.01)
        raise RuntimeError("quota")
    llm = mastrace_spans.one("llm.gemini.stream")
    assert llm.end_time - llm.start_time >= 10_000_000  # type: ignore[operator]
    assert llm.attributes["massgen.context_compression"] is True and not llm.status.is_ok


def test_an_error_massgen_only_yields_fails_the_round(mastrace_spans: CapturedSpans) -> None:
    import asyncio

    from mastrace import traced_stream

    async def agent_stream():  # type: ignore[no-untyped-def]
        with LOGFIRE.span("agent.b.round_1", **{"massgen.agent_id": "b"}):
            yield ("content", "thinking")
            yield ("error", "Invalid agent_id after 3 attempts")
            yield ("done", None)

    async def consume() -> list[object]:
        stream = integration._watch_errors(traced_stream(agent_stream()), "b")
        items = []
        while True:  # one task per chunk, as MassGen's orchestrator pulls them
            item = await asyncio.create_task(stream.__anext__())
            items.append(item)
            if item[0] == "done":
                await stream.aclose()
                return items

    assert len(asyncio.run(consume())) == 3
    rnd = mastrace_spans.one("agent.b.round_1")
    assert rnd.attributes["massgen.outcome"] == "error"
    assert rnd.attributes["massgen.error_message"] == "Invalid agent_id after 3 attempts"
    assert not rnd.status.is_ok
