"""The development GenAI conventions behind `OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`:
cost attributes (`source=local` for mastrace's own prices) and `cache_write` instead of `cache_creation`;
1.41's attributes by default; the readers take a cost given only in the new attribute."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mastrace import LLMBackendMixin, StaticPricing, semconv
from mastrace.analysis import TraceStore, render_tree
from mastrace.testing import CapturedSpans

from .conftest import TraceWriter

CHUNKS: list[dict[str, Any]] = [
    {"model": "claude-x", "type": "message_start", "message": {"usage": {"input_tokens": 100,
     "cache_creation_input_tokens": 40, "output_tokens": 1}}},
    {"type": "message_delta", "usage": {"output_tokens": 20}},
]  # fmt: skip


class Backend(LLMBackendMixin):
    provider = "anthropic"
    cost_calculator = StaticPricing({"claude-x": {"input": 3.0, "output": 15.0}})


@pytest.mark.parametrize("opt_in", ["gen_ai_latest_experimental", "http,gen_ai_latest_experimental"])
def test_under_the_opt_in_cost_and_cache_write_are_written(
    mastrace_spans: CapturedSpans, monkeypatch: pytest.MonkeyPatch, opt_in: str
) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", opt_in)
    list(Backend().llm_stream("claude-x", CHUNKS))
    attrs = mastrace_spans.attributes("llm.anthropic.stream")
    cost = attrs[semconv.MASTRACE_USAGE]["cost"]
    assert cost > 0
    assert attrs["gen_ai.usage.cost.amount"] == cost
    assert (attrs["gen_ai.usage.cost.currency"], attrs["gen_ai.usage.cost.source"]) == ("USD", "local")
    assert attrs["gen_ai.usage.cache_write.input_tokens"] == 40
    assert "gen_ai.usage.cache_creation.input_tokens" not in attrs


def test_by_default_the_1_41_attributes_are_written(
    mastrace_spans: CapturedSpans, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_SEMCONV_STABILITY_OPT_IN", raising=False)
    list(Backend().llm_stream("claude-x", CHUNKS))
    attrs = mastrace_spans.attributes("llm.anthropic.stream")
    assert attrs["gen_ai.usage.cache_creation.input_tokens"] == 40
    assert not [key for key in attrs if key.startswith(("gen_ai.usage.cost.", "gen_ai.usage.cache_write."))]


def test_readers_take_a_cost_given_only_in_the_new_attribute(writer: TraceWriter, tmp_path: Path) -> None:
    """A call from another emitter with only `gen_ai.usage.cost.amount`: `runs` and `tree` show it."""
    writer.span("session", "llm.openai.chat", 0, 100, **{"gen_ai.usage.cost.amount": 0.0123,
                "gen_ai.usage.input_tokens": 10})  # fmt: skip
    with TraceStore(tmp_path / "store") as store:
        (run,) = store.runs()
        tree = render_tree(store.spans(writer.trace_id()))
    assert run.cost_text == "$0.0123"
    assert "cost=$0.0123" in tree


class _CountingEnviron(dict):  # type: ignore[type-arg]
    """A copy of the environment that counts the reads of `OTEL_SEMCONV_STABILITY_OPT_IN`."""

    reads = 0

    def _count(self, key: object) -> None:
        if key == semconv.SEMCONV_OPT_IN_ENV:
            type(self).reads += 1

    def get(self, key: Any, default: Any = None) -> Any:
        self._count(key)
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self._count(key)
        return super().__getitem__(key)


def test_the_opt_in_is_read_once_per_configure_not_per_call(
    mastrace_spans: CapturedSpans, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    import mastrace
    from mastrace import AgentMixin, TokenUsage

    class Agent(AgentMixin):
        agent_id = "agent_a"

    environ = _CountingEnviron(os.environ, OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai_latest_experimental")
    monkeypatch.setattr(os, "environ", environ)
    for _ in range(3):
        with Agent().agent_round(0) as rnd:
            rnd.add_usage(TokenUsage(input_tokens=10, output_tokens=2, cache_creation_input_tokens=4))
            list(Backend().llm_stream("claude-x", CHUNKS))
    assert environ.reads == 1
    calls = [s for s in mastrace_spans.spans if s.name == "llm.anthropic.stream"]
    assert len(calls) == 3
    assert all((s.attributes or {})["gen_ai.usage.cache_write.input_tokens"] == 40 for s in calls)

    # Changed later, it takes effect at the next configure(), which reads it again.
    environ.pop(semconv.SEMCONV_OPT_IN_ENV)
    mastrace_spans.clear()
    list(Backend().llm_stream("claude-x", CHUNKS))
    assert "gen_ai.usage.cost.amount" in mastrace_spans.attributes("llm.anthropic.stream")
    mastrace.configure()
    mastrace_spans.clear()
    list(Backend().llm_stream("claude-x", CHUNKS))
    list(Backend().llm_stream("claude-x", CHUNKS))
    assert environ.reads == 2
    for span in mastrace_spans.spans:
        attrs = span.attributes or {}
        assert attrs["gen_ai.usage.cache_creation.input_tokens"] == 40
        assert "gen_ai.usage.cost.amount" not in attrs
