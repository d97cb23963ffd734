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
