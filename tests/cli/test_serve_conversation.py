"""An LLM span read as a conversation in `mastrace serve`'s run page (Debian's Chromium): messages by
role, tool calls with their arguments, results named after their calls, reasoning, finish reason,
tokens and cost, the raw attributes one click away; one agent's whole conversation; nested JSON as
a tree whose values keep the panel's width and whose keys never break inside a word."""

from __future__ import annotations

from playwright.sync_api import Page

import mastrace
from mastrace.serve import IntakeServer

from .test_serve_browser import url, write_here

LONG = "The quick brown fox jumps over the lazy dog. " * 45  # ~2,000 characters
SYSTEM = [{"type": "text", "content": "You are agent_a. Answer briefly."}]
FIRST_INPUT = [
    {"role": "user", "parts": [{"type": "text", "content": "What is the weather in Paris?"}]},
]
FIRST_OUTPUT = [
    {
        "role": "assistant",
        "parts": [
            {"type": "reasoning", "content": "I should look the weather up."},
            {
                "type": "tool_call",
                "id": "call_7",
                "name": "get_weather",
                "arguments": {"city": "Paris", "unit": "C"},
            },
        ],
        "finish_reason": "tool_call",
    }
]
SECOND_INPUT = [
    *FIRST_INPUT,
    *FIRST_OUTPUT,
    {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_7", "response": {"temp": 21}}]},
]
SECOND_OUTPUT = [{"role": "assistant", "parts": [{"type": "text", "content": LONG}], "finish_reason": "stop"}]
DEEP = {"a": {"b": {"c": {"d": "z" * 300}}}}


def build(tracer: mastrace.Tracer) -> None:
    usage = {"massgen.agent_id": "agent_a"}
    with tracer.span("agent.agent_a.round_0", attributes=usage):
        for name, inputs, outputs, tokens in (
            ("llm.openai.chat first", FIRST_INPUT, FIRST_OUTPUT, (120, 30)),
            ("llm.openai.chat second", SECOND_INPUT, SECOND_OUTPUT, (180, 400)),
        ):
            with tracer.span(
                name,
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "gpt-4o",
                    "gen_ai.system_instructions": SYSTEM,
                    "gen_ai.input.messages": inputs,
                    "gen_ai.output.messages": outputs,
                    "gen_ai.usage.input_tokens": tokens[0],
                    "gen_ai.usage.output_tokens": tokens[1],
                    "massgen.usage.cost": 0.0042,
                    "gen_ai.request.temperature_and_top_p_together": 0.5,
                    "deep": DEEP,
                },
            ):
                pass


def open_call(server: IntakeServer, page: Page, name: str) -> str:
    trace_id = write_here(server.intake.store, build)
    page.goto(url(server, f"/runs/{trace_id}"))
    page.wait_for_selector("#status:has-text('4 span(s), live')")
    page.click(f".row:has(.label:text-is('{name}'))")
    page.wait_for_selector("#details .conversation")
    return trace_id


def test_an_llm_span_reads_as_a_conversation(server: IntakeServer, page: Page) -> None:
    """Roles in order, the tool call's name, id and pretty arguments, its result under the call's
    name, the reasoning part, the finish reason, tokens and cost; long text wraps in the panel."""
    open_call(server, page, "llm.openai.chat second")
    roles = page.eval_on_selector_all("#details .conversation .msg", "ms => ms.map(m => m.dataset.role)")
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    call = page.locator("#details .msg[data-role='assistant'] .tool-call").first
    assert call.locator(".tool-name").text_content() == "get_weather"
    assert call.locator(".call-id").text_content() == "call_7"
    assert call.locator("pre.args").text_content() == '{\n  "city": "Paris",\n  "unit": "C"\n}'
    result = page.locator("#details .msg[data-role='tool'] .tool-result")
    assert result.locator(".tool-name").text_content() == "get_weather"  # matched to its call by id
    assert result.locator("pre.result").text_content() == '{\n  "temp": 21\n}'
    assert (
        page.locator("#details .reasoning").first.text_content() == "reasoningI should look the weather up."
    )
    finishes = page.locator("#details .msg .finish").all_text_contents()
    assert finishes == ["finish: tool_call", "finish: stop"]
    assert page.text_content("#details .conv-facts") == "gpt-4o · 180 in / 400 out · $0.0042"
    # The long answer wraps: as wide as the panel allows, many lines tall, nothing scrolls sideways.
    text = page.locator("#details .msg.output .part.text")
    box = text.bounding_box()
    panel = page.locator("#details").bounding_box()
    assert box is not None and panel is not None
    assert box["width"] > 0.7 * panel["width"] and box["height"] > 10 * 14
    assert page.eval_on_selector("#details", "d => d.scrollWidth <= d.clientWidth + 1")
    # The raw attributes are one click away.
    raw = page.locator("#details details.raw")
    assert not raw.evaluate("d => d.open")
    raw.locator("> summary").click()
    page.wait_for_selector("#details tr[data-key='gen_ai.input.messages']")


def test_nested_json_keeps_full_width_and_keys_never_break_inside_a_word(
    server: IntakeServer, page: Page
) -> None:
    """A string four levels down is laid out wide, not one character per line; every key breaks
    only at its dots (each word of it on one line)."""
    open_call(server, page, "llm.openai.chat first")
    page.click("#details details.raw > summary")
    page.wait_for_selector("#details tr[data-key='deep']")
    deepest = page.locator("#details tr[data-key='deep'] .jt-str")
    box = deepest.bounding_box()
    cell = page.locator("#details tr[data-key='deep'] > td").nth(1).bounding_box()
    assert box is not None and cell is not None
    assert box["width"] > 0.65 * cell["width"] and box["height"] < 12 * 20, (box, cell)
    broken = page.evaluate(
        """() => [...document.querySelectorAll('#details td.key, #details .jt-key')].flatMap(cell =>
              [...cell.querySelectorAll('*'), cell].flatMap(e => [...e.childNodes])
                .filter(n => n.nodeType === 3 && n.textContent.length)
                .filter(n => { const r = document.createRange(); r.selectNodeContents(n);
                               return r.getClientRects().length > 1; })
                .map(n => n.textContent))"""
    )
    assert broken == []
    key = page.locator("#details tr[data-key='gen_ai.request.temperature_and_top_p_together'] td.key")
    assert key.text_content() == "gen_ai.request.temperature_and_top_p_together"


def test_an_agents_whole_conversation_without_repeated_history(server: IntakeServer, page: Page) -> None:
    """Choosing an agent and "conversation" shows its LLM calls in order, each message once."""
    trace_id = write_here(server.intake.store, build)
    page.goto(url(server, f"/runs/{trace_id}"))
    page.wait_for_selector("#status:has-text('4 span(s), live')")
    assert page.is_disabled("#agent-conv")
    page.select_option("#agent", "agent_a")
    page.click("#agent-conv")
    page.wait_for_selector("#details h2:has-text('conversation of agent_a')")
    page.wait_for_function("document.querySelectorAll('#details .conversation').length === 2")
    roles = page.eval_on_selector_all("#details .msg", "ms => ms.map(m => m.dataset.role)")
    # first call: system, user, assistant (tool call); second: only the tool result and the answer
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert page.locator("#details .conv-call a").all_text_contents()[0].startswith("llm.openai.chat first")
    assert page.locator("#details .tool-result .tool-name").text_content() == "get_weather"
