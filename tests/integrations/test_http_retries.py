"""The SDKs' own HTTP retries on the call span: the real `openai` and `anthropic` clients against a
loopback server that fails the first requests (HTTP 500, 429, a dropped connection)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

import anthropic
import openai
import pytest

from genai_peer import send_json, serve
from mastrace import semconv
from mastrace.integrations.anthropic import instrument_anthropic, uninstrument_anthropic
from mastrace.integrations.openai import instrument_openai, uninstrument_openai
from mastrace.testing import CapturedSpans

# model -> what its first requests get, in order ("drop" closes the connection without a reply)
FAILURES = {"flaky-500": [500], "flaky-429-500": [429, 500], "dropped": ["drop"], "always-500": [500] * 9}


class Handler(BaseHTTPRequestHandler):
    seen: ClassVar[dict[str, int]] = {}
    lock = threading.Lock()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
        model = body["model"]
        with self.lock:
            n = self.seen[model] = self.seen.get(model, 0) + 1
        plan = FAILURES.get(model, [])
        if n <= len(plan):
            if plan[n - 1] == "drop":
                self.close_connection = True
                self.wfile.flush()
                self.connection.close()
                return
            self._reply(int(plan[n - 1]), {"error": {"message": "try again", "type": "server_error"}})
            return
        if "anthropic-version" in self.headers:
            self._reply(
                200,
                {
                    "id": "m1",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [{"type": "text", "text": "ok"}],
                    "stop_reason": "end_turn",
                    "usage": {"input_tokens": 10, "output_tokens": 2},
                },
            )
            return
        self._reply(
            200,
            {
                "id": "c1",
                "object": "chat.completion",
                "created": 1,
                "model": model,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
            },
        )

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        send_json(self, payload, status, {"retry-after-ms": "1"})  # keep the SDK's back-off short

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def url() -> Iterator[str]:
    Handler.seen = {}
    assert instrument_openai() and instrument_anthropic()
    try:
        with serve(Handler) as base:
            yield base
    finally:
        uninstrument_openai()
        uninstrument_anthropic()


def _events(span: Any) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for e in span.events if e.name == semconv.EVENT_HTTP_RETRY]


def test_one_retry_is_one_event_and_two_attempts(mastrace_spans: CapturedSpans, url: str) -> None:
    """A 500 then a success: one call span, two attempts, one retry event with the status."""
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test-not-real", max_retries=2)
    client.chat.completions.create(model="flaky-500", messages=[{"role": "user", "content": "hi"}])
    (span,) = mastrace_spans.by_name("llm.openai.chat")
    assert span.attributes[semconv.MASTRACE_HTTP_ATTEMPTS] == 2
    (event,) = _events(span)
    assert event[semconv.HTTP_RESPONSE_STATUS_CODE] == 500 and event[semconv.MASTRACE_RETRY_ATTEMPT] == 1
    assert Handler.seen["flaky-500"] == 2  # what the server saw agrees


def test_async_retries_with_different_causes(mastrace_spans: CapturedSpans, url: str) -> None:
    """The async client: a 429 then a 500 then a success gives two events in order and three attempts."""

    async def call() -> None:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-test-not-real", max_retries=2)
        await client.chat.completions.create(
            model="flaky-429-500", messages=[{"role": "user", "content": "hi"}]
        )

    asyncio.run(call())
    (span,) = mastrace_spans.by_name("llm.openai.chat")
    events = _events(span)
    assert [e[semconv.HTTP_RESPONSE_STATUS_CODE] for e in events] == [429, 500]
    assert [e[semconv.MASTRACE_RETRY_ATTEMPT] for e in events] == [1, 2]
    assert span.attributes[semconv.MASTRACE_HTTP_ATTEMPTS] == 3 == Handler.seen["flaky-429-500"]


def test_a_dropped_connection_is_a_retry_without_a_status(mastrace_spans: CapturedSpans, url: str) -> None:
    """A connection closed without a reply is retried by the SDK and noted as a connection error."""
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test-not-real", max_retries=2)
    client.chat.completions.create(model="dropped", messages=[{"role": "user", "content": "hi"}])
    (event,) = _events(mastrace_spans.one("llm.openai.chat"))
    assert event[semconv.ERROR_TYPE] == "connection_error" and semconv.HTTP_RESPONSE_STATUS_CODE not in event


def test_retries_that_all_fail_end_the_call_in_error(mastrace_spans: CapturedSpans, url: str) -> None:
    """Every attempt failing: the span has error status and one event per retry made."""
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test-not-real", max_retries=2)
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="always-500", messages=[{"role": "user", "content": "hi"}])
    span = mastrace_spans.one("llm.openai.chat")
    assert span.status.status_code.name == "ERROR" and len(_events(span)) == 2
    assert span.attributes[semconv.MASTRACE_HTTP_ATTEMPTS] == 3 == Handler.seen["always-500"]


def test_a_call_without_retries_carries_no_retry_attributes(mastrace_spans: CapturedSpans, url: str) -> None:
    """No retry: no event and no attempt count (one attempt)."""
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test-not-real")
    client.chat.completions.create(model="steady", messages=[{"role": "user", "content": "hi"}])
    span = mastrace_spans.one("llm.openai.chat")
    assert not _events(span) and semconv.MASTRACE_HTTP_ATTEMPTS not in span.attributes


def test_the_anthropic_client_retries_are_noted_too(mastrace_spans: CapturedSpans, url: str) -> None:
    """The anthropic SDK's retry goes through the same hook."""
    client = anthropic.Anthropic(base_url=url, api_key="sk-ant-test-not-real", max_retries=2)
    client.messages.create(model="flaky-500", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    spans = [s for s in mastrace_spans.spans if str(s.name).startswith("llm.anthropic")]
    assert len(spans) == 1 and spans[0].attributes[semconv.MASTRACE_HTTP_ATTEMPTS] == 2
