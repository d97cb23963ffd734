"""MASEval's gathering mixins: traces, configuration and usage of one component (`mixins/gather.py`)."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

from maseval.core.usage import TokenUsage as MasevalTokenUsage

from mastrace import ConfigurableMixin, TokenUsage, TraceableMixin, Usage, UsageTrackableMixin


class Model(TraceableMixin, ConfigurableMixin, UsageTrackableMixin):
    def __init__(self, model_id: str) -> None:
        self.model_id = model_id
        self.calls = 0

    def gather_traces(self) -> dict[str, Any]:
        return {**super().gather_traces(), "calls": self.calls}

    def gather_config(self) -> dict[str, Any]:
        return {**super().gather_config(), "model_id": self.model_id}

    def chat(self, tokens: int) -> None:
        self.calls += 1
        self.record_usage(TokenUsage(input_tokens=tokens, output_tokens=1, cost=0.5))


def test_base_gather_methods_return_type_and_timestamp() -> None:
    """The base traces and config hold the class name and an ISO timestamp."""
    for gathered in (TraceableMixin().gather_traces(), ConfigurableMixin().gather_config()):
        assert set(gathered) == {"type", "gathered_at"}
        assert gathered["type"] in ("TraceableMixin", "ConfigurableMixin")
        datetime.fromisoformat(gathered["gathered_at"])


def test_subclasses_extend_the_base_with_super() -> None:
    """A subclass adds its own fields to the base record."""
    model = Model("gpt-4o")
    model.chat(3)
    assert model.gather_config()["model_id"] == "gpt-4o" and model.gather_config()["type"] == "Model"
    assert model.gather_traces()["calls"] == 1


def test_gather_usage_is_empty_before_any_record() -> None:
    """A component that recorded nothing reports the zero usage."""
    assert Model("m").gather_usage() == Usage()


def test_record_usage_accumulates_into_gather_usage() -> None:
    """Every recorded call is part of the component's total."""
    model = Model("m")
    model.chat(10)
    model.chat(5)
    total = model.gather_usage()
    assert isinstance(total, TokenUsage)
    assert (total.input_tokens, total.output_tokens, total.cost) == (15, 2, 1.0)


def test_record_usage_is_exact_under_concurrent_threads() -> None:
    """Eight threads recording at once lose no record."""
    model = Model("m")

    def work() -> None:
        for _ in range(500):
            model.chat(1)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert model.gather_usage().input_tokens == 8 * 500  # type: ignore[attr-defined]


def test_record_usage_accepts_a_maseval_usage_record() -> None:
    """MASEval usage objects are converted when recorded."""
    model = Model("m")
    model.record_usage(MasevalTokenUsage(input_tokens=4, output_tokens=2))  # type: ignore[arg-type]
    assert model.gather_usage() == TokenUsage(input_tokens=4, output_tokens=2)
