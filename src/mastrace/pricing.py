"""Prices for LLM calls: never a silent $0.

One call's cost is decided in this order:

1. the cost the provider reported in its usage (OpenRouter's `usage.cost`): that is the bill;
2. the `cost_calculator` given to `instrument_openai()` (or another integration), e.g. a
   `StaticPricing` with your negotiated prices;
3. a framework's own calculator, where the framework prices its calls itself (MassGen does, through
   LiteLLM): mastrace's figures then equal the framework's;
4. the default price table, from Pydantic's maintained `genai-prices` package (install
   `mastrace[prices]`), which knows model aliases, dated names, tiered and cached-input prices;
5. otherwise the cost is **unknown**: the call's span carries `mastrace.cost.unknown=true` and
   `mastrace.cost.unknown_models`, the rounds and sessions that include it do too, and every report
   shows the cost as "—" with the models named, never as `$0`.

`genai-prices` was chosen over LiteLLM's model cost map: it is 12 MB installed with its
dependencies (LiteLLM is over 100 MB), it computes tiered and cache prices itself rather than
leaving the formula to us, and it needs no import of LiteLLM. Its first price costs about half a
second (importing pydantic and building the table), so the table is loaded on a background thread
when the first LLM call starts; only a call that ends before that finishes waits for it.

Example:
    >>> from mastrace import TokenUsage
    >>> from mastrace.pricing import GenAIPrices
    >>> usage = TokenUsage(input_tokens=1_000, output_tokens=200)
    >>> GenAIPrices().calculate_cost(usage, "gpt-4o")  # doctest: +SKIP
    0.0045
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import semconv
from .tracing._errors import log_internal_error, warn_once
from .usage import UNPRICED_CALLS, CostCalculator, TokenUsage

__all__ = ["GenAIPrices", "Priced", "default_pricing", "prepare", "price_call"]

# mastrace's provider names -> genai-prices' provider ids (others are matched by model alone).
_PROVIDERS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "openrouter": "openrouter",
    "google": "google",
    "gemini": "google",
    "mistral": "mistral",
    "groq": "groq",
    "deepseek": "deepseek",
    "x-ai": "x-ai",
    "xai": "x-ai",
    "azure": "azure",
    "aws.bedrock": "aws",
    "bedrock": "aws",
}

# Unknown model names remembered at most, and their longest length: a bound against endless new names.
_MAX_UNKNOWN = 4096
_MAX_REMEMBERED_NAME = 256


class GenAIPrices:
    """A `CostCalculator` over the `genai-prices` table (needs `mastrace[prices]`).

    Prices are those in force at the time of the call, in USD. A model the table does not know is
    priced as None (unknown), never as 0.
    """

    def __init__(self) -> None:
        # Models the table does not know, and the table they were looked up in. `genai-prices`
        # remembers the models it finds, not the ones it misses: each miss scans every model of
        # every provider (~70 µs), on each call to a local or fine-tuned model. A new table (one
        # `genai_prices.UpdatePrices` installs) is searched afresh.
        self._unknown: set[tuple[str, str | None]] = set()
        self._unknown_in: object = None
        self._api: tuple[Any, Any, Any] | None = None  # imported at the first price, then kept
        # Per model and provider, in the table above: the price of one token of each kind, when the
        # model's price is linear (no tiers, no time-bound prices). `genai-prices` computes a price in
        # ~130 µs (units, validation, Decimal); a rate card does it in ~2 µs, with the same Decimals.
        self._cards: dict[tuple[str, str | None], _RateCard | None] = {}

    def calculate_cost(self, usage: TokenUsage, model_id: str, provider: str | None = None) -> float | None:
        """The cost of `usage` on `model_id` (optionally for `provider`), or None when unknown."""
        if not model_id:
            return None
        api = self._api
        if api is None:
            from genai_prices import Usage, calc_price
            from genai_prices.data_snapshot import get_snapshot

            api = self._api = (Usage, calc_price, get_snapshot)
        price_usage, calc_price, get_snapshot = api
        provider_id = _PROVIDERS.get((provider or "").lower())
        table = get_snapshot()
        if table is not self._unknown_in:
            self._unknown, self._unknown_in, self._cards = set(), table, {}
        key = (model_id, provider_id)
        if key in self._unknown:
            return None
        card = self._cards.get(key, _NO_CARD)
        if card is not None and card is not _NO_CARD:
            cost: float | None = card.cost(usage)
            if cost is not None:
                return cost
        priced = price_usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cached_input_tokens,
            cache_write_tokens=usage.cache_creation_input_tokens,
        )
        result = _table_price(calc_price, priced, model_id, provider_id)
        if result is None:
            if len(self._unknown) < _MAX_UNKNOWN and len(model_id) <= _MAX_REMEMBERED_NAME:
                self._unknown.add(key)
            return None
        if card is _NO_CARD and len(self._cards) < _MAX_UNKNOWN and len(model_id) <= _MAX_REMEMBERED_NAME:
            self._cards[key] = _RateCard.of(result, price_usage, usage)
        return float(result.total_price)

    def gather_config(self) -> dict[str, Any]:
        """The table's name and version, for the configuration snapshot."""
        import importlib.metadata

        return {
            "type": type(self).__name__,
            "package": "genai-prices",
            "version": _version(importlib.metadata),
        }

    # The installed table's version is the process's: nothing to watch for a change.
    gather_config.__mastrace_config_inputs__ = lambda self: ()  # type: ignore[attr-defined]


class _RateCard:
    """A model's price per token of each kind, below its first tier, as exact integers over one
    denominator: `int / int` rounds once, as `float()` of `genai-prices`' exact Decimal sum does,
    without Decimal arithmetic (whose context is per `contextvars` context: a stream's copied
    context makes a new one at every call).

    Built from the first priced call of a model when none of its prices depends on the date, and
    checked against that call's price before use: a card never prices differently from the table.
    A call with more input tokens than the model's first tier starts at asks the table.
    """

    __slots__ = ("cache_read", "cache_write", "denominator", "input", "limit", "output")

    def __init__(self, per_token: Sequence[Any], limit: float) -> None:
        ratios = [p.as_integer_ratio() for p in per_token]
        denominator = math.lcm(*(d for _, d in ratios))
        self.input, self.output, self.cache_read, self.cache_write = (
            n * (denominator // d) for n, d in ratios
        )
        self.denominator = denominator
        self.limit = limit

    def cost(self, usage: TokenUsage) -> float | None:
        """The cost of `usage`, or None when a tiered price applies (more input than `limit`)."""
        tokens = usage.input_tokens
        if tokens >= self.limit:
            return None
        cached = usage.cached_input_tokens
        written = usage.cache_creation_input_tokens
        output = usage.output_tokens
        if not (type(tokens) is int and type(cached) is int and type(written) is int and type(output) is int):
            return None
        total: int = (
            self.input * (tokens - cached - written)
            + self.output * output
            + self.cache_read * cached
            + self.cache_write * written
        )
        return total / self.denominator

    @classmethod
    def of(cls, result: Any, price_usage: Any, usage: TokenUsage) -> _RateCard | None:
        """The card of the model `result` priced, or None when its price cannot be one."""
        try:
            from decimal import Decimal

            model, provider, model_price = result.model, result.provider, result.model_price
            if not isinstance(model.prices, type(model_price)):
                return None  # prices that change with the date
            limit: float = float("inf")
            for value in vars(model_price).values():
                tiers = getattr(value, "tiers", None)
                if tiers:
                    limit = min(limit, *(tier.start for tier in tiers))
                elif value is not None and not isinstance(value, Decimal):
                    return None
            probe = 1_000 if limit > 1_000 else 1
            per_token = [
                model.calc_price(price_usage(**fields), provider).total_price / probe
                for fields in (
                    {"input_tokens": probe},
                    {"output_tokens": probe},
                    {"input_tokens": probe, "cache_read_tokens": probe},
                    {"input_tokens": probe, "cache_write_tokens": probe},
                )
            ]
            card = cls(per_token, limit)
            if usage.input_tokens < limit and card.cost(usage) != float(result.total_price):
                return None
            return card
        except Exception:  # anything unexpected in the table: keep asking it
            return None


_NO_CARD: Any = object()


def _table_price(calc_price: Any, priced: Any, model_id: str, provider_id: str | None) -> Any:
    """`genai-prices`' price calculation for a model, or None when the table does not know it."""
    try:
        return calc_price(priced, model_id, provider_id=provider_id)
    except LookupError:
        if provider_id is None:
            return None
    try:  # a model served through a provider the table files it under another name
        return calc_price(priced, model_id)
    except LookupError:
        return None


def _version(metadata: Any) -> str | None:
    try:
        return str(metadata.version("genai-prices"))
    except Exception:
        return None


# -- the default table, loaded once, off the caller's path -------------------------------------------


class _Default:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started = False
        self.ready = threading.Event()
        self.pricing: GenAIPrices | None = None


_default = _Default()


def _load() -> None:
    try:
        import genai_prices

        genai_prices.calc_price(genai_prices.Usage(input_tokens=1), "gpt-4o", provider_id="openai")
        _default.pricing = GenAIPrices()
    except ImportError:
        _default.pricing = None
    except Exception as exc:  # a broken install: unknown costs, and one log line
        log_internal_error("price table", exc)
        _default.pricing = None
    finally:
        _default.ready.set()


def prepare() -> None:
    """Start loading the default price table on a daemon thread (once per process; cheap after)."""
    if _default.started:
        return
    with _default.lock:
        if _default.started:
            return
        _default.started = True
    threading.Thread(target=_load, name="mastrace-prices", daemon=True).start()


def default_pricing() -> GenAIPrices | None:
    """The default price table: `GenAIPrices` when `genai-prices` is installed, else None.

    Waits for the background load `prepare()` started (starting it if needed).
    """
    if not _default.ready.is_set():  # once loaded, no lock: this runs for every LLM call
        prepare()
        _default.ready.wait()
    return _default.pricing


# -- one call's price ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Priced:
    """One call's usage with its cost decided.

    Attributes:
        usage: The usage, with `cost` set (0.0 when unknown) and, when unknown, one
            `unpriced_calls` unit so that sums keep track of it.
        source: `provider`, `calculator`, `framework` or `genai-prices`; None when unknown.
    """

    usage: TokenUsage
    source: str | None

    @property
    def unknown(self) -> bool:
        """True when no price was found for the call."""
        return self.source is None

    def attributes(self, model: str) -> dict[str, Any]:
        """The call span's cost attributes: where the cost came from, or that it is unknown."""
        if self.source is None:
            return {semconv.MASTRACE_COST_UNKNOWN: True, semconv.MASTRACE_COST_UNKNOWN_MODELS: [model or "?"]}
        attrs: dict[str, Any] = {semconv.MASTRACE_COST_SOURCE: self.source}
        if semconv.latest_conventions():  # the development conventions' cost, under their opt-in
            attrs[semconv.GEN_AI_USAGE_COST_AMOUNT] = float(self.usage.cost)
            attrs[semconv.GEN_AI_USAGE_COST_CURRENCY] = "USD"
            attrs[semconv.GEN_AI_USAGE_COST_SOURCE] = (
                self.source if self.source == "provider" else semconv.COST_SOURCE_LOCAL
            )
        return attrs


def price_call(
    usage: TokenUsage,
    model: str,
    *,
    provider: str | None = None,
    reported: float | None = None,
    calculator: CostCalculator | None = None,
    framework: CostCalculator | None = None,
) -> Priced:
    """Decide one call's cost (see the module docstring for the order)."""
    if reported is not None:
        return Priced(usage.with_cost(reported), "provider")
    for source, calc in (("calculator", calculator), ("framework", framework)):
        if calc is not None:
            cost = _try(calc.calculate_cost, usage, model)
            if cost is not None:
                return Priced(usage.with_cost(cost), source)
    table = default_pricing()
    if table is not None:
        cost = _try(lambda u, m: table.calculate_cost(u, m, provider), usage, model)
        if cost is not None:
            return Priced(usage.with_cost(cost), "genai-prices")
    unpriced = usage.with_cost(0.0)
    unpriced.units[UNPRICED_CALLS] = unpriced.units.get(UNPRICED_CALLS, 0) + 1
    return Priced(unpriced, None)


def _try(calculate: Callable[[TokenUsage, str], float | None], usage: TokenUsage, model: str) -> float | None:
    try:
        cost = calculate(usage, model)
    except Exception as exc:  # a calculator that fails prices nothing; the call still records
        name = type(getattr(calculate, "__self__", calculate)).__name__
        warn_once(
            f"cost-calculator:{name}",
            f"mastrace: cost calculator {name} failed ({type(exc).__name__}: {exc}); "
            "its calls are priced by the next source, or shown as unknown",
        )
        return None
    if cost is None or isinstance(cost, bool) or not isinstance(cost, (int, float)):
        return None
    cost = float(cost)
    return cost if math.isfinite(cost) and cost >= 0 else None  # NaN or negative: not a price


def unknown_models(models: Sequence[str | None]) -> list[str]:
    """Distinct model names in first-seen order (for `mastrace.cost.unknown_models`)."""
    seen: dict[str, None] = {}
    for model in models:
        if model:
            seen.setdefault(model, None)
    return list(seen)
