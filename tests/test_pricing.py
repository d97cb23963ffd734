"""Prices for LLM calls: the provider's cost first, then a calculator, the framework's, the
`genai-prices` table, and otherwise an unknown cost that is marked, never a silent $0."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

import mastrace
from mastrace import StaticPricing, TokenUsage, pricing, semconv
from mastrace.pricing import GenAIPrices, price_call
from mastrace.usage import UNPRICED_CALLS, Usage, usage_attributes

USAGE = TokenUsage(input_tokens=1_000, output_tokens=200)


class Fixed:
    """A calculator with one price for every model."""

    def __init__(self, cost: float | None) -> None:
        self.cost = cost
        self.calls = 0

    def calculate_cost(self, usage: TokenUsage, model_id: str) -> float | None:
        self.calls += 1
        return self.cost


class Broken:
    def calculate_cost(self, usage: TokenUsage, model_id: str) -> float | None:
        raise RuntimeError("price service down")


@pytest.fixture
def no_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The default table as it is without `mastrace[prices]` installed."""
    monkeypatch.setitem(sys.modules, "genai_prices", None)
    monkeypatch.setattr(pricing, "_default", pricing._Default())
    yield


def test_the_table_prices_known_models_at_list_prices() -> None:
    """gpt-4o-mini and gpt-4o cost what OpenAI lists ($0.15/$0.60 and $2.50/$10 per million)."""
    table = GenAIPrices()
    assert table.calculate_cost(USAGE, "gpt-4o-mini") == pytest.approx(1_000 * 0.15e-6 + 200 * 0.6e-6)
    assert table.calculate_cost(USAGE, "gpt-4o", "openai") == pytest.approx(0.0045)
    assert table.calculate_cost(USAGE, "gpt-4o-mini-2024-07-18") == table.calculate_cost(USAGE, "gpt-4o-mini")


def test_cached_input_is_priced_at_the_cached_rate() -> None:
    """Input read from a prompt cache costs less than fresh input (input_tokens counts both)."""
    fresh = GenAIPrices().calculate_cost(TokenUsage(input_tokens=1_000), "gpt-4o")
    cached = GenAIPrices().calculate_cost(TokenUsage(input_tokens=1_000, cached_input_tokens=800), "gpt-4o")
    assert fresh is not None and cached is not None and cached < fresh


@pytest.mark.parametrize("model", ["fake-model-7", "", "gpt-4o\x00", "x" * 5_000, "../../etc/passwd"])
def test_a_model_the_table_does_not_know_is_unknown_not_free(model: str) -> None:
    """Unknown, empty, odd or oversized model names are priced None, never 0."""
    assert GenAIPrices().calculate_cost(USAGE, model) is None
    priced = price_call(USAGE, model)
    assert priced.unknown and priced.usage.cost == 0.0 and priced.usage.units[UNPRICED_CALLS] == 1
    assert priced.attributes(model)[semconv.MASTRACE_COST_UNKNOWN] is True


def test_the_providers_cost_wins_over_every_calculator() -> None:
    """A cost the provider reported is the bill: no calculator is asked."""
    calculator = Fixed(9.0)
    priced = price_call(USAGE, "gpt-4o", reported=0.0042, calculator=calculator, framework=Fixed(8.0))
    assert priced.usage.cost == 0.0042 and priced.source == "provider" and calculator.calls == 0


def test_a_users_calculator_overrides_the_framework_and_the_table() -> None:
    """StaticPricing given by the user comes before the framework's prices and the table."""
    mine = StaticPricing({"gpt-4o": {"input": 1.0, "output": 1.0}})
    priced = price_call(USAGE, "gpt-4o", calculator=mine, framework=Fixed(8.0))
    assert priced.usage.cost == pytest.approx(0.0012) and priced.source == "calculator"


def test_the_framework_prices_what_the_user_did_not() -> None:
    """A calculator that knows nothing (None) passes on to the framework's."""
    priced = price_call(USAGE, "gpt-4o", calculator=Fixed(None), framework=Fixed(0.5))
    assert priced.usage.cost == 0.5 and priced.source == "framework"


def test_a_broken_calculator_is_skipped_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    """A calculator that raises prices nothing (one warning); the table still prices the call."""
    with caplog.at_level("WARNING", logger="mastrace"):
        first = price_call(USAGE, "gpt-4o", calculator=Broken())
        price_call(USAGE, "gpt-4o", calculator=Broken())
    assert first.source == "genai-prices" and first.usage.cost == pytest.approx(0.0045)
    assert [r.getMessage() for r in caplog.records].count(caplog.records[0].getMessage()) == 1
    assert "price service down" in caplog.records[0].getMessage()


@pytest.mark.parametrize("bad", [float("nan"), True, "0.1", -1])
def test_a_calculator_answer_that_is_not_a_price_is_unknown(bad: object) -> None:
    """NaN, booleans, strings and negative amounts are no price: the call stays unknown."""
    priced = price_call(USAGE, "fake-model", calculator=Fixed(bad))  # type: ignore[arg-type]
    assert priced.unknown and priced.usage.cost == 0.0


def test_without_the_table_every_unpriced_call_is_unknown(no_table: None) -> None:
    """Without genai-prices installed, gpt-4o is unknown rather than $0."""
    assert pricing.default_pricing() is None
    assert price_call(USAGE, "gpt-4o").unknown


def test_unknown_calls_add_up_and_mark_the_rounds_and_sessions() -> None:
    """The unpriced-call count survives sums, so a round or session with one says its cost is unknown."""
    known = price_call(USAGE, "gpt-4o").usage
    unknown = price_call(USAGE, "fake-model").usage
    total = sum([known, unknown], Usage())
    attrs = usage_attributes(total)
    assert attrs[semconv.MASTRACE_COST_UNKNOWN] is True and attrs[
        semconv.MASSGEN_USAGE_COST
    ] == pytest.approx(0.0045)
    assert semconv.MASTRACE_COST_UNKNOWN not in usage_attributes(known + known)


def test_an_llm_mixin_call_without_a_calculator_is_priced_by_the_table(mastrace_spans: object) -> None:
    """`LLMBackendMixin` streams are priced by the table; an unknown model is marked on the span."""

    class Backend(mastrace.LLMBackendMixin):
        provider = "openai"

    chunks = [{"usage": {"prompt_tokens": 1_000, "completion_tokens": 200}}]
    list(Backend().llm_stream("gpt-4o", iter(chunks)))
    list(Backend().llm_stream("house-model", iter(chunks)))
    spans = mastrace_spans.by_name("llm.openai.stream")  # type: ignore[attr-defined]
    known, unknown = sorted(spans, key=lambda s: s.attributes["gen_ai.request.model"])
    assert known.attributes[semconv.MASTRACE_COST_SOURCE] == "genai-prices"
    assert unknown.attributes[semconv.MASTRACE_COST_UNKNOWN] is True
    assert list(unknown.attributes[semconv.MASTRACE_COST_UNKNOWN_MODELS]) == ["house-model"]


@pytest.fixture
def table_searches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The model names `genai-prices` searched its table for (its own lookup, counted, not replaced)."""
    from genai_prices import data_snapshot

    searched: list[str] = []
    real = data_snapshot.DataSnapshot.find_provider_model

    def counted(self: Any, model_ref: str, *args: Any) -> Any:
        searched.append(model_ref)
        return real(self, model_ref, *args)

    monkeypatch.setattr(data_snapshot.DataSnapshot, "find_provider_model", counted)
    return searched


def test_an_unknown_model_is_searched_for_once_per_table(
    table_searches: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local model's calls cost one search of the table, not one per call; a new table is searched again."""
    from genai_prices import data_snapshot

    table = GenAIPrices()
    for _ in range(3):
        assert table.calculate_cost(USAGE, "my-finetune", "openai") is None
    assert table_searches == ["my-finetune", "my-finetune"]  # with its provider, then without
    assert table.calculate_cost(USAGE, "gpt-4o", "openai") == pytest.approx(0.0045)  # known ones priced
    updated = data_snapshot.DataSnapshot(
        providers=data_snapshot.get_snapshot().providers, from_auto_update=True
    )
    monkeypatch.setattr(data_snapshot, "_custom_snapshot", updated)  # what `UpdatePrices` installs
    table_searches.clear()
    assert table.calculate_cost(USAGE, "my-finetune", "openai") is None
    assert table_searches == ["my-finetune", "my-finetune"]


def test_endless_new_model_names_are_not_all_remembered() -> None:
    """Thousands of distinct or oversized unknown names stay unknown, and what is remembered is bounded."""
    table = GenAIPrices()
    for i in range(pricing._MAX_UNKNOWN + 50):
        assert table.calculate_cost(USAGE, f"local-model-{i}") is None
    assert table.calculate_cost(USAGE, "m" * 5_000) is None
    assert len(table._unknown) == pricing._MAX_UNKNOWN
    assert all(len(name) <= 256 for name, _ in table._unknown)


def _table_only(usage: TokenUsage, model: str, provider: str | None) -> float | None:
    """The price `genai-prices` computes itself, with no remembered rate card."""
    from genai_prices import Usage, calc_price

    priced = Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cached_input_tokens,
        cache_write_tokens=usage.cache_creation_input_tokens,
    )
    try:
        return float(calc_price(priced, model, provider_id=provider).total_price)
    except LookupError:
        return None


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("gpt-4o", "openai"),
        ("gpt-4o-mini", None),
        ("claude-sonnet-4-5", "anthropic"),
        ("gemini-2.5-pro", "google"),
    ],
)
def test_a_remembered_model_price_equals_the_table_for_every_usage(model: str, provider: str | None) -> None:
    """After a model's first call, its calls (fresh, cached, cache-written, past a price tier) cost exactly
    what `genai-prices` computes for each."""
    import random

    rng = random.Random(7)
    table = GenAIPrices()
    for _ in range(300):
        inp = rng.choice([rng.randint(0, 5_000), rng.randint(0, 400_000)])
        read = rng.randint(0, inp // 2)
        written = rng.randint(0, (inp - read) // 2)
        usage = TokenUsage(
            input_tokens=inp,
            output_tokens=rng.randint(0, 8_000),
            cached_input_tokens=read,
            cache_creation_input_tokens=written,
        )
        assert table.calculate_cost(usage, model, provider) == _table_only(usage, model, provider), usage


def test_a_model_is_priced_by_the_table_once_per_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many calls of one model ask `genai-prices` once (then its per-token prices are reused); a new table
    (what `UpdatePrices` installs) is asked again."""
    import genai_prices
    from genai_prices import data_snapshot

    usages = [TokenUsage(input_tokens=100 + i, output_tokens=i) for i in range(50)]
    expected = [_table_only(usage, "gpt-4o", "openai") for usage in usages]
    asked: list[str] = []
    real = genai_prices.calc_price

    def counted(usage: Any, model_ref: str, **kwargs: Any) -> Any:
        asked.append(model_ref)
        return real(usage, model_ref, **kwargs)

    monkeypatch.setattr(genai_prices, "calc_price", counted)
    table = GenAIPrices()
    assert [table.calculate_cost(usage, "gpt-4o", "openai") for usage in usages] == expected
    assert asked == ["gpt-4o"]
    updated = data_snapshot.DataSnapshot(
        providers=data_snapshot.get_snapshot().providers, from_auto_update=True
    )
    monkeypatch.setattr(data_snapshot, "_custom_snapshot", updated)
    table.calculate_cost(USAGE, "gpt-4o", "openai")
    assert asked == ["gpt-4o", "gpt-4o"]
