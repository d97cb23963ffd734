"""What viewers make of mastrace's GenAI spans: a real Arize Phoenix server (its span API, which
holds the OpenInference attributes Phoenix derives from the GenAI conventions and shows in its LLM
span view), and Jaeger UI's GenAI tab, applied to `mastrace export --format jaeger-json`.

Jaeger UI's GenAI tab (`GenAITab/genAiData.ts` in jaegertracing/jaeger-ui) cannot run here (no
build of it is installed), so `jaeger_genai_sections` restates what that parser does with a span's
tags: it claims `gen_ai.agent.*`, provider and model, `gen_ai.usage.*`, the conversation
(`gen_ai.input.messages` / `gen_ai.output.messages`, JSON arrays of `{role, parts}` rendered part by
part: text, `→ name(arguments)` for a tool call, `← response` for a tool result;
`gen_ai.system_instructions`) and the tool call (`gen_ai.tool.call.id`, `gen_ai.tool.name`, ...);
every other `gen_ai.*` tag falls into "Other GenAI Attributes"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import mastrace
from genai_peer import CALLS, OPENAI_CALL_ID, QUESTION, SYSTEM, serve
from mastrace.integrations.anthropic import instrument_anthropic, uninstrument_anthropic
from mastrace.integrations.openai import instrument_openai, uninstrument_openai
from phoenix_server import Phoenix

MASTRACE = Path(sys.executable).parent / "mastrace"
ANSWER = "It is sunny and 21°C in Paris."


class Agent(mastrace.AgentMixin, mastrace.ToolMixin):
    agent_id = "weather_agent"


def run_agent(url: str) -> None:
    """An agent round making the eight calls, with the tool execution between call and follow-up."""
    with mastrace.get_tracer().span("coordination.session"), Agent().agent_round(0) as rnd:
        for name, call in CALLS.items():
            call(url)
            if name == "openai tool call":
                with Agent().tool_execution(
                    "get_weather", call_id=OPENAI_CALL_ID, arguments={"city": "Paris"}
                ) as tool:
                    tool.set_result({"temperature_c": 21})
        rnd.set_outcome("answer")


@pytest.fixture
def instrumented() -> Iterator[str]:
    instrument_openai()
    instrument_anthropic()
    with serve() as url:
        yield url
    uninstrument_openai()
    uninstrument_anthropic()


def _messages(attributes: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """OpenInference's flattened `llm.input_messages.<i>.message.*` as a list of dicts."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if key.startswith(prefix + "."):
            index, rest = key[len(prefix) + 1 :].split(".", 1)
            found.setdefault(int(index), {})[rest.removeprefix("message.")] = value
    return [found[i] for i in sorted(found)]


@pytest.mark.integration
def test_phoenix_shows_the_messages_tool_calls_and_kinds(
    phoenix: Phoenix, instrumented: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Phoenix classifies the spans (LLM, AGENT, TOOL) and holds every message, tool call and result."""
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "openinference.project.name=genai-viewers")
    mastrace.configure(service_name="genai", otlp=phoenix.url, local=False, capture_content=True)
    run_agent(instrumented)
    assert mastrace.force_flush(timeout=600).destinations["otlp"].exported == 11
    spans = phoenix.spans("genai-viewers", expected=11)
    by_name: dict[str, list[dict[str, Any]]] = {}
    for span in sorted(spans, key=lambda s: s["start_time"]):
        by_name.setdefault(span["name"], []).append(span)
    assert by_name["agent.weather_agent.round_0"][0]["span_kind"] == "AGENT"
    tool = by_name["Tool execution: get_weather"][0]
    assert tool["span_kind"] == "TOOL" and tool["attributes"]["tool.parameters.city"] == "Paris"
    assert tool["attributes"]["tool.id"] == OPENAI_CALL_ID
    assert json.loads(tool["attributes"]["output.value"]) == {"temperature_c": 21}
    chats = by_name["llm.openai.chat"]
    assert [s["span_kind"] for s in chats] == ["LLM", "LLM"]
    tool_call, follow_up = (s["attributes"] for s in chats)
    out = _messages(tool_call, "llm.output_messages")
    assert out[0]["tool_calls.0.tool_call.function.name"] == "get_weather"
    assert json.loads(out[0]["tool_calls.0.tool_call.function.arguments"]) == {"city": "Paris"}
    history = _messages(follow_up, "llm.input_messages")
    assert [m["role"] for m in history] == ["system", "user", "assistant", "tool"]
    assert history[0]["content"] == SYSTEM and history[1]["content"] == QUESTION
    assert history[2]["tool_calls.0.tool_call.id"] == OPENAI_CALL_ID
    assert history[3]["tool_call_id"] == OPENAI_CALL_ID and "temperature_c" in history[3]["content"]
    assert _messages(follow_up, "llm.output_messages")[0]["content"] == ANSWER
    assert (follow_up["llm.token_count.prompt"], follow_up["llm.token_count.completion"]) == (31, 9)
    for name in ("llm.anthropic.chat", "llm.anthropic.stream", "llm.openai.stream"):
        for span in by_name[name]:
            attributes = span["attributes"]
            assert span["span_kind"] == "LLM" and _messages(attributes, "llm.output_messages")
            if name.startswith("llm.anthropic"):
                assert attributes["llm.input_messages.0.message.role"] == "system"  # the instructions


def jaeger_genai_sections(tags: list[dict[str, Any]]) -> dict[str, Any]:
    """Jaeger UI's GenAI tab for one span (see the module docstring): the sections it shows."""
    values = {t["key"]: t["value"] for t in tags}
    claimed: set[str] = set()

    def get(key: str) -> Any:
        if key in values:
            claimed.add(key)
        return values.get(key)

    def parse(value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) and value.lstrip()[:1] in "[{" else value

    def render(part: dict[str, Any]) -> str:
        kind = part.get("type")
        if kind in ("text", "reasoning"):
            return str(part["content"])
        if kind == "tool_call":
            return f"→ {part.get('name', 'unknown_tool')}({json.dumps(parse(part.get('arguments')))})"
        if kind == "tool_call_response":
            return f"← {json.dumps(parse(part.get('response')))}"
        return "UNRENDERED " + json.dumps(part)  # the parser's fallback: a raw JSON dump

    def messages(value: Any) -> list[tuple[Any, str]]:
        if value is None:
            return []
        parsed = parse(value)
        assert isinstance(parsed, list), "the GenAI tab would show this as one role-less message"
        return [(m.get("role"), "\n\n".join(render(p) for p in m["parts"])) for m in parsed]

    sections: dict[str, Any] = {
        "agent": {k: get(f"gen_ai.agent.{k}") for k in ("id", "name")},
        "meta": {"provider": get("gen_ai.provider.name"), "model": get("gen_ai.response.model")},
        "tokens": {k: get(f"gen_ai.usage.{k}") for k in ("input_tokens", "output_tokens")},
        "input": messages(get("gen_ai.input.messages") or get("gen_ai.prompt")),
        "output": messages(get("gen_ai.output.messages") or get("gen_ai.completion")),
        "system": get("gen_ai.system_instructions"),
        "tool": {k: get(f"gen_ai.tool.{k}") for k in ("call.id", "name")},
    }
    get("gen_ai.request.model")
    sections["other"] = sorted(k for k in values if k.startswith("gen_ai.") and k not in claimed)
    return sections


def test_jaeger_ui_genai_tab_reads_the_jaeger_json_export(
    instrumented: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`mastrace export --format jaeger-json`: each LLM span's GenAI tab renders every message part."""
    store = tmp_path / "store"
    mastrace.configure(local=store, capture_content=True)
    run_agent(instrumented)
    mastrace.shutdown()
    out = tmp_path / "trace.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTRACE_", "OTEL_"))}
    done = subprocess.run(
        [str(MASTRACE), "export", "latest", "--format", "jaeger-json", "-o", str(out), "--store", str(store)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    spans = {
        s["operationName"] + "#" + s["spanID"]: s for s in json.loads(out.read_text())["data"][0]["spans"]
    }
    tabs = {key.split("#")[0]: jaeger_genai_sections(s["tags"]) for key, s in sorted(spans.items())}
    follow_up = next(
        jaeger_genai_sections(s["tags"])
        for s in spans.values()
        if s["operationName"] == "llm.openai.chat"
        and any(t["key"] == "mastrace.request.tool_call_ids" for t in s["tags"])
    )
    assert follow_up["input"] == [
        ("system", SYSTEM),
        ("user", QUESTION),
        ("assistant", '→ get_weather({"city": "Paris"})'),
        ("tool", '← {"temperature_c": 21, "sky": "sunny"}'),
    ]
    assert follow_up["output"] == [("assistant", ANSWER)]
    assert follow_up["tokens"] == {"input_tokens": 31, "output_tokens": 9}
    for name in ("llm.openai.stream", "llm.anthropic.chat", "llm.anthropic.stream"):
        tab = tabs[name]
        assert tab["input"] and tab["output"] and tab["meta"]["provider"] in ("openai", "anthropic")
        assert not [text for _, text in tab["input"] + tab["output"] if "UNRENDERED" in text]
    assert json.loads(tabs["llm.anthropic.chat"]["system"]) == [{"type": "text", "content": SYSTEM}]
    assert tabs["Tool execution: get_weather"]["tool"] == {"call.id": OPENAI_CALL_ID, "name": "get_weather"}
    assert tabs["agent.weather_agent.round_0"]["agent"] == {"id": "weather_agent", "name": "weather_agent"}
