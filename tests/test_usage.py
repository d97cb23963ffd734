"""Usage records, provider usage parsing, static pricing, and crediting usage to sinks (`usage.py`)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest
from maseval.core.usage import TokenUsage as MasevalTokenUsage

from mastrace import CostCalculator, StaticPricing, TokenUsage, Usage, semconv
from mastrace.usage import UsageAccumulator, credit_usage, pop_sink, push_sink, usage_attributes


def test_usage_sum_keeps_matching_grouping_fields_and_drops_mismatches() -> None:
    """Adding usages sums cost and units; grouping fields survive only when both sides agree."""
    a = Usage(cost=0.5, units={"api_calls": 1}, provider="bloomberg", kind="service")
    b = Usage(cost=0.25, units={"api_calls": 2, "pages": 3}, provider="bloomberg", kind="llm")
    total = a + b
    assert total == Usage(cost=0.75, units={"api_calls": 3, "pages": 3}, provider="bloomberg", kind=None)


def test_sum_starts_from_zero_or_an_empty_usage() -> None:
    """`sum()` works both from its default start 0 and from `Usage()`."""
    records = [Usage(cost=0.5), Usage(cost=0.25)]
    assert sum(records, Usage()).cost == 0.75
    assert sum(records).cost == 0.75  # type: ignore[arg-type]


def test_token_usage_keeps_tokens_when_added_to_plain_usage_either_way() -> None:
    """TokenUsage + Usage and Usage + TokenUsage both keep the token counts."""
    tokens = TokenUsage(cost=0.5, input_tokens=10, output_tokens=4)
    for total in (tokens + Usage(cost=0.25), Usage(cost=0.25) + tokens):
        assert isinstance(total, TokenUsage)
        assert (total.cost, total.input_tokens, total.output_tokens) == (0.75, 10, 4)


def test_token_usages_add_field_by_field() -> None:
    """Every token field adds up."""
    total = TokenUsage(input_tokens=1, cached_input_tokens=2, reasoning_tokens=3) + TokenUsage(
        input_tokens=10, cached_input_tokens=20, reasoning_tokens=30, audio_tokens=5
    )
    assert isinstance(total, TokenUsage)
    assert (total.input_tokens, total.cached_input_tokens, total.reasoning_tokens, total.audio_tokens) == (
        11,
        22,
        33,
        5,
    )


def test_subtraction_gives_the_usage_accrued_since_an_earlier_total() -> None:
    """`later - earlier` is the delta, with the later record's grouping fields."""
    earlier = TokenUsage(cost=0.5, input_tokens=100, units={"calls": 1}, provider="openai")
    later = TokenUsage(cost=0.75, input_tokens=160, units={"calls": 3}, provider="openai")
    delta = later - earlier
    assert isinstance(delta, TokenUsage)
    assert (delta.cost, delta.input_tokens, delta.units, delta.provider) == (0.25, 60, {"calls": 2}, "openai")


def test_to_dict_and_from_dict_round_trip() -> None:
    """`Usage.from_dict(u.to_dict())` rebuilds an equal record of the same class."""
    for record in (
        Usage(cost=1.5, units={"calls": 2}, category="tools"),
        TokenUsage(input_tokens=7, kind="llm"),
    ):
        assert Usage.from_dict(record.to_dict()) == record


def test_to_dict_matches_maseval_field_names() -> None:
    """`TokenUsage.to_dict()` has exactly MASEval's keys."""
    assert TokenUsage().to_dict().keys() == MasevalTokenUsage().to_dict().keys()


def test_coerce_converts_a_maseval_usage() -> None:
    """A MASEval usage record becomes the equivalent mastrace record."""
    theirs = MasevalTokenUsage(cost=0.5, input_tokens=3, output_tokens=2, provider="anthropic")
    ours = Usage.coerce(theirs)
    assert ours == TokenUsage(cost=0.5, input_tokens=3, output_tokens=2, provider="anthropic")


def test_with_cost_copies_every_field_and_a_subclass_keeps_its_own() -> None:
    """A priced copy has the new cost, the same counts and grouping, and units of its own."""
    usage = TokenUsage(
        cost=1.0,
        units={"calls": 1},
        provider="openai",
        category="models",
        component_name="a",
        kind="llm",
        input_tokens=10,
        output_tokens=5,
        total_tokens=15,
        cached_input_tokens=2,
        cache_creation_input_tokens=1,
        reasoning_tokens=3,
        audio_tokens=4,
    )
    # Every field is set above to other than its default: a field added to TokenUsage must be set
    # there too, so that this test sees `with_cost` copy it.
    defaults = TokenUsage()
    assert [
        f.name for f in dataclasses.fields(TokenUsage) if getattr(usage, f.name) == getattr(defaults, f.name)
    ] == []
    priced = usage.with_cost("0.25")  # type: ignore[arg-type]  # as a calculator may answer
    assert priced.to_dict() == {**usage.to_dict(), "cost": 0.25} and type(priced) is TokenUsage
    priced.units["calls"] = 9
    assert usage.units == {"calls": 1}

    @dataclasses.dataclass
    class Tagged(TokenUsage):
        tag: str = ""

    tagged = Tagged(input_tokens=1, tag="mine").with_cost(0.5)
    assert type(tagged) is Tagged and tagged.tag == "mine" and tagged.cost == 0.5 and tagged.input_tokens == 1


def test_from_provider_reads_openai_chat_usage() -> None:
    """OpenAI chat usage maps prompt/completion tokens, cached tokens and reasoning tokens."""
    usage = TokenUsage.from_provider(
        {
            "prompt_tokens": 120,
            "completion_tokens": 30,
            "total_tokens": 150,
            "prompt_tokens_details": {"cached_tokens": 100},
            "completion_tokens_details": {"reasoning_tokens": 12},
        },
        provider="openai",
    )
    assert usage == TokenUsage(
        provider="openai",
        kind="llm",
        input_tokens=120,
        output_tokens=30,
        total_tokens=150,
        cached_input_tokens=100,
        reasoning_tokens=12,
    )


def test_from_provider_counts_anthropic_cache_reads_and_writes_as_input() -> None:
    """Anthropic's uncached `input_tokens` plus cache reads and writes give the total input."""
    usage = TokenUsage.from_provider(
        SimpleNamespace(
            input_tokens=10, output_tokens=5, cache_read_input_tokens=200, cache_creation_input_tokens=40
        )
    )
    assert usage is not None
    assert (usage.input_tokens, usage.cached_input_tokens, usage.cache_creation_input_tokens) == (
        250,
        200,
        40,
    )
    assert usage.total_tokens == 255


def test_from_provider_returns_none_without_token_counts() -> None:
    """Objects that carry no token counts give None."""
    assert TokenUsage.from_provider(None) is None
    assert TokenUsage.from_provider({"model": "gpt-4o"}) is None
    assert TokenUsage.from_provider("text chunk") is None


def test_merge_max_combines_cumulative_counts_from_several_chunks() -> None:
    """The field-wise maximum of split reports is the call's usage."""
    start = TokenUsage(input_tokens=50, output_tokens=1)
    end = TokenUsage(output_tokens=40)
    merged = start.merge_max(end)
    assert (merged.input_tokens, merged.output_tokens) == (50, 40)


def test_static_pricing_uses_prices_per_million_tokens() -> None:
    """Fresh input, cached input and output are each billed at their own per-million price."""
    pricing = StaticPricing({"m": {"input": 2.0, "output": 8.0, "cached_input": 0.5}})
    usage = TokenUsage(input_tokens=1_500_000, cached_input_tokens=1_000_000, output_tokens=250_000)
    assert pricing.calculate_cost(usage, "m") == pytest.approx(0.5 * 2.0 + 1.0 * 0.5 + 0.25 * 8.0)


def test_static_pricing_returns_none_for_unknown_models() -> None:
    """A model without prices has no cost."""
    assert (
        StaticPricing({"m": {"input": 1.0, "output": 1.0}}).calculate_cost(TokenUsage(input_tokens=5), "x")
        is None
    )


def test_static_pricing_is_a_cost_calculator() -> None:
    """StaticPricing satisfies the CostCalculator protocol."""
    assert isinstance(StaticPricing({}), CostCalculator)


def test_usage_attributes_name_both_conventions() -> None:
    """Token usage becomes massgen.usage.* and gen_ai.usage.* attributes."""
    attrs = usage_attributes(TokenUsage(cost=0.5, input_tokens=9, output_tokens=4, reasoning_tokens=2))
    assert attrs[semconv.MASSGEN_USAGE_INPUT] == 9 and attrs[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 9
    assert (
        attrs[semconv.MASSGEN_USAGE_REASONING] == 2
        and attrs[semconv.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] == 2
    )
    assert attrs[semconv.MASSGEN_USAGE_COST] == 0.5


def test_credit_usage_reaches_every_sink_labelled_by_the_innermost() -> None:
    """Credited usage goes to every sink in the context, filed under the innermost label."""
    outer, inner = UsageAccumulator(), UsageAccumulator(label="agent_a")
    outer_token = push_sink(outer)
    inner_token = push_sink(inner)
    credit_usage(TokenUsage(input_tokens=3))
    pop_sink(inner_token, inner)
    credit_usage(TokenUsage(input_tokens=5))
    pop_sink(outer_token, outer)
    credit_usage(TokenUsage(input_tokens=100))
    assert outer.total.input_tokens == 8  # type: ignore[attr-defined]
    assert inner.total.input_tokens == 3  # type: ignore[attr-defined]
    assert outer.by_label()["agent_a"].input_tokens == 3  # type: ignore[attr-defined]


def test_gemini_thinking_tokens_count_as_output() -> None:
    """`thoughts_token_count` is added to `candidates_token_count`, as output includes reasoning."""
    usage = TokenUsage.from_provider(
        {"prompt_token_count": 100, "candidates_token_count": 50, "thoughts_token_count": 400}
    )
    assert usage is not None
    assert (usage.output_tokens, usage.reasoning_tokens) == (450, 400)


# -- values as providers send them -------------------------------------------------------------------
def test_token_usage_takes_none_strings_and_floats() -> None:
    """`None` means "not reported" (0); numeric strings and floats are converted; adding never raises."""
    a = TokenUsage(input_tokens=None, output_tokens="12", total_tokens=7.0, cost="0.5")  # type: ignore[arg-type]
    assert (a.input_tokens, a.output_tokens, a.total_tokens, a.cost) == (0, 12, 7, 0.5)
    b = TokenUsage(input_tokens=" 3 ", reasoning_tokens=float("nan"), cost=None)  # type: ignore[arg-type]
    assert (b.input_tokens, b.reasoning_tokens, b.cost) == (3, 0, 0.0)
    total = a + b + Usage(cost=None, units={"api_calls": "2"})  # type: ignore[arg-type, dict-item]
    assert isinstance(total, TokenUsage)
    assert (total.input_tokens, total.output_tokens, total.cost, total.units) == (
        3,
        12,
        0.5,
        {"api_calls": 2},
    )
    assert sum([a, b], Usage()).to_dict()["output_tokens"] == 12  # type: ignore[union-attr]
    assert TokenUsage(input_tokens="many").input_tokens == 0  # type: ignore[arg-type]


def test_provider_usage_with_string_counts_is_read() -> None:
    usage = TokenUsage.from_provider({"prompt_tokens": "10", "completion_tokens": None, "total_tokens": 10.0})
    assert usage is not None and (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (10, 0, 10)


@pytest.mark.parametrize("count", [1, 2, 3])
def test_accumulated_total_is_the_sum_of_the_records_from_zero(count: int) -> None:
    """`total` is `sum(records, Usage())` for any number of records, labels included (the sum of one
    record is not that record), and agrees with `by_label()`; `amounts()` carries the same numbers."""
    records = [
        TokenUsage(input_tokens=10 + i, output_tokens=2, cost=0.5, provider="openai", kind="llm")
        for i in range(count)
    ]
    acc = UsageAccumulator(label="agent_a")
    for record in records:
        acc.add(record, None, "agent_a")
    expected = sum(records, Usage())
    assert acc.total == expected and acc.total is not records[0]
    assert acc.by_label()["agent_a"] == expected
    assert usage_attributes(acc.amounts()) == usage_attributes(expected)


def test_sums_of_clean_records_skip_post_init_and_equal_the_constructed_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sum (and `with_cost`) of records already checked is made without `__post_init__` (it runs for
    every LLM call, once per enclosing round, session and scope), and is the same record, field order
    included, as the constructor makes."""
    a = TokenUsage(cost=0.25, units={"calls": 1}, provider="openai", kind="llm", input_tokens=10,
                   output_tokens=2, total_tokens=12, cached_input_tokens=4, reasoning_tokens=1)  # fmt: skip
    b = TokenUsage(
        cost=0.5, units={"calls": 2, "images": 1}, provider="openai", input_tokens=5, audio_tokens=3
    )
    expected = {
        "a + b": TokenUsage(
            cost=0.75,
            units={"calls": 3, "images": 1},
            provider="openai",
            input_tokens=15,
            output_tokens=2,
            total_tokens=12,
            cached_input_tokens=4,
            reasoning_tokens=1,
            audio_tokens=3,
        ),
        "zero + a": TokenUsage(
            cost=0.25,
            units={"calls": 1},
            input_tokens=10,
            output_tokens=2,
            total_tokens=12,
            cached_input_tokens=4,
            reasoning_tokens=1,
        ),
        "a.with_cost": dataclasses.replace(a, cost=1.5),
    }
    calls = []
    post_init = TokenUsage.__post_init__
    monkeypatch.setattr(TokenUsage, "__post_init__", lambda self: calls.append(self) or post_init(self))
    made = {"a + b": a + b, "zero + a": Usage() + a, "a.with_cost": a.with_cost(1.5)}
    assert calls == []
    for name, record in made.items():
        assert type(record) is TokenUsage, name
        assert record == expected[name], name
        assert list(vars(record).items()) == list(vars(expected[name]).items()), name
        assert record.units is not a.units and record.units is not b.units, name
    assert a.to_dict() == {**Usage.to_dict(a), **{f: getattr(a, f) for f in (
        "input_tokens", "output_tokens", "total_tokens", "cached_input_tokens", "cache_creation_input_tokens",
        "reasoning_tokens", "audio_tokens")}}  # fmt: skip


def test_from_provider_reads_a_plain_usage_dict_as_the_general_reading_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Dicts whose counts are all ints take a shorter path (every LLM call reads one): it gives what the
    general reading gives, on every mix of OpenAI, Anthropic and Gemini keys and detail dicts."""
    import random

    from mastrace import usage as usage_module

    keys = ["prompt_tokens", "prompt_token_count", "input_tokens", "completion_tokens", "output_tokens",
            "candidates_token_count", "thoughts_token_count", "cache_read_input_tokens",
            "cache_creation_input_tokens", "cached_content_token_count", "total_tokens",
            "total_token_count"]  # fmt: skip
    details = [
        "prompt_tokens_details",
        "input_tokens_details",
        "completion_tokens_details",
        "output_tokens_details",
    ]
    rng = random.Random(7)
    shapes = []
    for _ in range(3000):
        shape: dict[str, Any] = {
            k: rng.choice([None, 0, 1, 7, 250]) for k in rng.sample(keys, rng.randint(0, 6))
        }
        for k in rng.sample(details, rng.randint(0, 2)):
            shape[k] = rng.choice(
                [None, {}, {"cached_tokens": 5}, {"reasoning_tokens": 3}, {"cached_tokens": 0}, 5]
            )
        shapes.append(shape)
    fast = [TokenUsage.from_provider(s, provider="openai") for s in shapes]
    monkeypatch.setattr(usage_module, "_plain_counts", lambda usage: None)
    general = [TokenUsage.from_provider(s, provider="openai") for s in shapes]
    assert fast == general
    assert sum(r is None for r in fast) > 100 and sum(r is not None for r in fast) > 1000
