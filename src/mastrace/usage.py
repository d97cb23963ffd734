"""Usage records, cost calculators, and crediting usage to the spans that caused it.

`Usage` and `TokenUsage` have MASEval's fields and semantics: they add with `+` (and `sum()`),
subtract with `-`, and serialise with `to_dict()`. Grouping fields (`provider`, `category`,
`component_name`, `kind`) survive a sum when both sides agree and become `None` otherwise.

`TokenUsage.input_tokens` counts every input token, cached or not (OpenAI's `prompt_tokens`
convention); `TokenUsage.from_provider()` converts Anthropic's split counts to it.

Example:
    >>> from mastrace import StaticPricing, TokenUsage
    >>> usage = TokenUsage(input_tokens=1_000, output_tokens=200)
    >>> StaticPricing({"gpt-4o": {"input": 2.5, "output": 10.0}}).calculate_cost(usage, "gpt-4o")
    0.0045
"""

from __future__ import annotations

import contextvars
import dataclasses
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from . import semconv

__all__ = [
    "CostCalculator",
    "StaticPricing",
    "TokenUsage",
    "Usage",
    "UsageAccumulator",
    "credit_usage",
    "current_sinks",
    "usage_attributes",
]

UNPRICED_CALLS = "unpriced_calls"
"""The `Usage.units` key counting calls that had no known price: it adds up like any unit, so a
round or session that includes one knows its cost is incomplete (`semconv.MASTRACE_COST_UNKNOWN`)."""

UNCOUNTED_CALLS = "uncounted_calls"
"""The `Usage.units` key counting LLM calls whose usage never reached the client (a stream cut off
before its usage): a round or session that includes one knows its token counts leave that call out
(`semconv.MASTRACE_USAGE_UNKNOWN`)."""

_TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cached_input_tokens",
    "cache_creation_input_tokens",
    "reasoning_tokens",
    "audio_tokens",
)


def _same(a: str | None, b: str | None) -> str | None:
    return a if a == b else None


def as_count(value: Any) -> int:
    """A token count as providers send it: int, float (`12.0`), numeric string (`"12"`) or None.

    None, and anything that is not a number, counts as 0 ("not reported"). Never raises.
    """
    if type(value) is int:
        return value
    if value is None or isinstance(value, bool):
        return int(value or 0)
    try:
        number = float(value.strip()) if isinstance(value, (str, bytes)) else float(value)
    except (TypeError, ValueError, AttributeError, OverflowError):
        return 0
    return int(number) if math.isfinite(number) else 0


def as_amount(value: Any) -> float:
    """A cost as providers send it (float, int, numeric string or None); None counts as 0.0."""
    if type(value) is float:
        return value if math.isfinite(value) else 0.0
    if value is None or isinstance(value, bool):
        return 0.0
    try:
        number = float(value.strip()) if isinstance(value, (str, bytes)) else float(value)
    except (TypeError, ValueError, AttributeError, OverflowError):
        return 0.0
    return number if math.isfinite(number) else 0.0


@dataclass
class Usage:
    """A usage record for any billable resource (MASEval-compatible).

    `Usage()` is the zero element, so `sum(records, Usage())` works. Values are taken as providers
    send them: `None` means "not reported" and counts as 0, numeric strings (`"12"`) and floats
    are converted, so adding records never raises.

    Attributes:
        cost: Total cost (USD, or whatever unit the pricing uses).
        units: Countable units, e.g. `{"api_calls": 3}`.
        provider: Provider identifier, e.g. `"anthropic"`.
        category: Registry category, e.g. `"models"`.
        component_name: Component name within the category.
        kind: Component kind, e.g. `"llm"`.
    """

    cost: float = 0.0
    units: dict[str, int | float] = field(default_factory=dict)
    provider: str | None = None
    category: str | None = None
    component_name: str | None = None
    kind: str | None = None

    def __post_init__(self) -> None:
        if type(self.cost) is not float:
            self.cost = as_amount(self.cost)
        units = self.units
        # `units and`: most records have none, and this runs for every record and every sum.
        if not isinstance(units, dict) or (
            units and any(type(v) not in (int, float) for v in units.values())
        ):
            self.units = _clean_units(units)

    def _combine(self, other: Usage, sign: int) -> dict[str, Any]:
        units: dict[str, int | float] = dict(self.units)
        if other.units:
            for key, value in other.units.items():
                units[key] = units.get(key, 0) + sign * value
        # `_same` spelled out: this runs for every sum.
        provider, category, component, kind = self.provider, self.category, self.component_name, self.kind
        return {
            "cost": self.cost + sign * other.cost,
            "units": units,
            "provider": provider if provider == other.provider else None,
            "category": category if category == other.category else None,
            "component_name": component if component == other.component_name else None,
            "kind": kind if kind == other.kind else None,
        }

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        if isinstance(other, TokenUsage) and not isinstance(self, TokenUsage):
            return other.__add__(self)  # keep the token fields
        return Usage(**self._combine(other, 1))

    def __radd__(self, other: object) -> Usage:
        if other == 0:  # sum() starts from 0
            return self
        if isinstance(other, Usage):
            return other.__add__(self)
        return NotImplemented

    def __sub__(self, other: Usage) -> Usage:
        """The usage accrued between `other` (an earlier total) and `self`."""
        if not isinstance(other, Usage):
            return NotImplemented
        fields = self._combine(other, -1)
        fields.update(
            provider=self.provider, category=self.category, component_name=self.component_name, kind=self.kind
        )
        if isinstance(self, TokenUsage) or isinstance(other, TokenUsage):
            tokens: dict[str, Any] = {n: getattr(self, n, 0) - getattr(other, n, 0) for n in _TOKEN_FIELDS}
            return TokenUsage(**fields, **tokens)
        return Usage(**fields)

    def to_dict(self) -> dict[str, Any]:
        """Serialise to a JSON-compatible dictionary."""
        return {
            "cost": self.cost,
            "units": dict(self.units),
            "provider": self.provider,
            "category": self.category,
            "component_name": self.component_name,
            "kind": self.kind,
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Usage:
        """Rebuild a `Usage` (a `TokenUsage` when token fields are present) from `to_dict()` output."""
        base: dict[str, Any] = {
            "cost": float(data.get("cost") or 0.0),
            "units": dict(data.get("units") or {}),
            "provider": data.get("provider"),
            "category": data.get("category"),
            "component_name": data.get("component_name"),
            "kind": data.get("kind"),
        }
        if any(name in data for name in _TOKEN_FIELDS):
            tokens: dict[str, Any] = {name: int(data.get(name) or 0) for name in _TOKEN_FIELDS}
            return TokenUsage(**base, **tokens)
        return Usage(**base)

    @staticmethod
    def coerce(value: Any) -> Usage:
        """Return `value` as a mastrace `Usage`, converting any object with a compatible `to_dict()`."""
        if isinstance(value, Usage):
            return value
        to_dict = getattr(value, "to_dict", None)
        if callable(to_dict):
            return Usage.from_dict(to_dict())
        if isinstance(value, Mapping):
            return Usage.from_dict(value)
        raise TypeError(f"expected a Usage, not {type(value).__name__}")


@dataclass
class TokenUsage(Usage):
    """LLM usage with token counts (MASEval-compatible).

    Attributes:
        input_tokens: Every input token, cached or not.
        output_tokens: Output tokens, reasoning included.
        total_tokens: Input plus output, as reported.
        cached_input_tokens: Input tokens read from a prompt cache.
        cache_creation_input_tokens: Input tokens written to a prompt cache.
        reasoning_tokens: Output tokens spent on reasoning.
        audio_tokens: Audio tokens.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cached_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    reasoning_tokens: int = 0
    audio_tokens: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        # One test of the usual case (every count an int) before the loop that converts the others:
        # this runs for every record and every sum.
        if not (
            type(self.input_tokens) is int
            and type(self.output_tokens) is int
            and type(self.total_tokens) is int
            and type(self.cached_input_tokens) is int
            and type(self.cache_creation_input_tokens) is int
            and type(self.reasoning_tokens) is int
            and type(self.audio_tokens) is int
        ):
            for name in _TOKEN_FIELDS:
                value = getattr(self, name)
                if type(value) is not int:
                    setattr(self, name, as_count(value))

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        # The sum of two records is made without `__init__`: every field of both is already clean
        # (`__post_init__` ran for each), so every field of the sum is too. Sums run for every LLM
        # call, once per enclosing round, session and scope.
        fields = self._combine(other, 1)
        if isinstance(other, TokenUsage):  # the usual sum, without reading the fields by name
            fields["input_tokens"] = self.input_tokens + other.input_tokens
            fields["output_tokens"] = self.output_tokens + other.output_tokens
            fields["total_tokens"] = self.total_tokens + other.total_tokens
            fields["cached_input_tokens"] = self.cached_input_tokens + other.cached_input_tokens
            fields["cache_creation_input_tokens"] = (
                self.cache_creation_input_tokens + other.cache_creation_input_tokens
            )
            fields["reasoning_tokens"] = self.reasoning_tokens + other.reasoning_tokens
            fields["audio_tokens"] = self.audio_tokens + other.audio_tokens
            return _made(fields)
        if type(other) is Usage:  # no token fields: the sum has this record's counts (the zero, mostly)
            for name in _TOKEN_FIELDS:
                fields[name] = getattr(self, name)
            return _made(fields)
        tokens: dict[str, Any] = {n: getattr(self, n) + getattr(other, n, 0) for n in _TOKEN_FIELDS}
        return TokenUsage(**fields, **tokens)

    def to_dict(self) -> dict[str, Any]:
        """Serialise to a JSON-compatible dictionary."""
        if type(self) is not TokenUsage:  # a subclass may read its fields otherwise
            return {**super().to_dict(), **{name: getattr(self, name) for name in _TOKEN_FIELDS}}
        return {
            "cost": self.cost,
            "units": dict(self.units),
            "provider": self.provider,
            "category": self.category,
            "component_name": self.component_name,
            "kind": self.kind,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "audio_tokens": self.audio_tokens,
        }

    def with_cost(self, cost: float) -> TokenUsage:
        """A copy of this record with `cost` replaced."""
        if type(self) is not TokenUsage:  # a subclass may have fields of its own
            return dataclasses.replace(self, cost=cost, units=dict(self.units))
        # `dataclasses.replace` reads the class's fields on every call: once per LLM call, it costs
        # more than the rest of pricing one.
        if type(cost) is float and math.isfinite(cost):  # as `__post_init__` would leave it
            return _made(
                {
                    "cost": cost,
                    "units": dict(self.units),
                    "provider": self.provider,
                    "category": self.category,
                    "component_name": self.component_name,
                    "kind": self.kind,
                    "input_tokens": self.input_tokens,
                    "output_tokens": self.output_tokens,
                    "total_tokens": self.total_tokens,
                    "cached_input_tokens": self.cached_input_tokens,
                    "cache_creation_input_tokens": self.cache_creation_input_tokens,
                    "reasoning_tokens": self.reasoning_tokens,
                    "audio_tokens": self.audio_tokens,
                }
            )
        return TokenUsage(
            cost=cost,
            units=dict(self.units),
            provider=self.provider,
            category=self.category,
            component_name=self.component_name,
            kind=self.kind,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            total_tokens=self.total_tokens,
            cached_input_tokens=self.cached_input_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens,
            reasoning_tokens=self.reasoning_tokens,
            audio_tokens=self.audio_tokens,
        )

    @classmethod
    def from_provider(
        cls, usage: Any, *, provider: str | None = None, kind: str = "llm"
    ) -> TokenUsage | None:
        """Read a provider's usage object or dict; None when it holds no token counts.

        Understands OpenAI chat (`prompt_tokens`, `completion_tokens`, `*_tokens_details`), OpenAI
        responses and Anthropic (`input_tokens`, `output_tokens`, `cache_read_input_tokens`,
        `cache_creation_input_tokens`), and Gemini (`prompt_token_count`, ...).
        """
        if usage is None:
            return None
        if type(usage) is dict and cls is TokenUsage:
            counts = _plain_counts(usage)
            if counts is not None:
                return _from_counts(counts, provider, kind)
        prompt = _int(usage, "prompt_tokens", "prompt_token_count")
        inputs = _int(usage, "input_tokens")
        output = _int(usage, "completion_tokens", "output_tokens", "candidates_token_count")
        thoughts = _int(usage, "thoughts_token_count")
        if thoughts and output is not None and _int(usage, "completion_tokens", "output_tokens") is None:
            output += thoughts  # Gemini's candidates_token_count leaves the thinking tokens out
        if prompt is None and inputs is None and output is None:
            return None
        cache_read = _int(usage, "cache_read_input_tokens")
        cache_write_raw = _int(usage, "cache_creation_input_tokens")
        cache_write = cache_write_raw or 0
        cached = (
            cache_read
            if cache_read is not None
            else (
                _int(field_of(usage, "prompt_tokens_details"), "cached_tokens")
                or _int(field_of(usage, "input_tokens_details"), "cached_tokens")
                or _int(usage, "cached_content_token_count")
                or 0
            )
        )
        if prompt is None and (cache_read is not None or cache_write_raw is not None):
            # Anthropic counts cached input apart from `input_tokens`
            inputs = (inputs or 0) + (cache_read or 0) + cache_write
        total_in = prompt if prompt is not None else (inputs or 0)
        reasoning = (
            _int(field_of(usage, "completion_tokens_details"), "reasoning_tokens")
            or _int(field_of(usage, "output_tokens_details"), "reasoning_tokens")
            or _int(usage, "thoughts_token_count")
            or 0
        )
        total = _int(usage, "total_tokens", "total_token_count") or total_in + (output or 0)
        return cls(
            provider=provider,
            kind=kind,
            input_tokens=total_in,
            output_tokens=output or 0,
            total_tokens=total,
            cached_input_tokens=cached,
            cache_creation_input_tokens=cache_write,
            reasoning_tokens=reasoning,
        )

    def merge_max(self, other: TokenUsage) -> TokenUsage:
        """Field-wise maximum: combines cumulative counters reported across several stream chunks."""
        tokens: dict[str, Any] = {n: max(getattr(self, n), getattr(other, n)) for n in _TOKEN_FIELDS}
        # A total reported with the first part (Anthropic's message_start) misses the later output.
        tokens["total_tokens"] = max(tokens["total_tokens"], tokens["input_tokens"] + tokens["output_tokens"])
        return TokenUsage(
            cost=max(self.cost, other.cost),
            units=dict(self.units),
            provider=self.provider,
            category=self.category,
            component_name=self.component_name,
            kind=self.kind,
            **tokens,
        )


_new_object = object.__new__


def _made(fields: dict[str, Any]) -> TokenUsage:
    """A `TokenUsage` of `fields` (every field, in field order, each already clean), made without
    running `__init__` and `__post_init__`: what `TokenUsage(**fields)` gives, for a fraction."""
    record: TokenUsage = _new_object(TokenUsage)
    record.__dict__ = fields
    return record


def field_of(obj: Any, key: str) -> Any:
    """`obj[key]` for a mapping, `obj.key` otherwise; None when absent (provider payloads come as both)."""
    if obj is None:
        return None
    if type(obj) is dict or isinstance(obj, Mapping):  # a dict without the ABC check: most payloads
        return obj.get(key)
    return getattr(obj, key, None)


_PLAIN = frozenset({int, dict, type(None)})
_DETAILS = (
    "prompt_tokens_details",
    "input_tokens_details",
    "completion_tokens_details",
    "output_tokens_details",
)


def _plain_counts(usage: dict[str, Any]) -> dict[str, Any] | None:
    """`usage` when every count in it is an int (or None), and so are those of its `*_details`
    dicts: then `_int(usage, *keys)` is its first int under `keys`, what `_from_counts` reads.
    None for any other shape (floats, numeric strings, objects): `from_provider` reads those."""
    if not _PLAIN.issuperset(map(type, usage.values())):
        return None
    for name in _DETAILS:
        details = usage.get(name)
        if details is not None and (
            type(details) is not dict or not _PLAIN.issuperset(map(type, details.values()))
        ):
            return None
    return usage


def _first(get: Callable[[str], Any], *keys: str) -> int | None:
    for key in keys:
        value = get(key)
        if type(value) is int:
            return value
    return None


def _from_counts(usage: dict[str, Any], provider: str | None, kind: str) -> TokenUsage | None:
    """`TokenUsage.from_provider` of a usage dict whose counts are plain ints (`_plain_counts`):
    the same reading, with dict look-ups in place of `_int` and `field_of`."""
    get = usage.get
    prompt = _first(get, "prompt_tokens", "prompt_token_count")
    inputs = _first(get, "input_tokens")
    output = _first(get, "completion_tokens", "output_tokens", "candidates_token_count")
    thoughts = _first(get, "thoughts_token_count")
    if thoughts and output is not None and _first(get, "completion_tokens", "output_tokens") is None:
        output += thoughts
    if prompt is None and inputs is None and output is None:
        return None
    cache_read = _first(get, "cache_read_input_tokens")
    cache_write_raw = _first(get, "cache_creation_input_tokens")
    cache_write = cache_write_raw or 0
    if cache_read is not None:
        cached = cache_read
    else:
        details = get("prompt_tokens_details")
        cached = (details and _first(details.get, "cached_tokens")) or 0
        if not cached:
            details = get("input_tokens_details")
            cached = (
                (details and _first(details.get, "cached_tokens"))
                or _first(get, "cached_content_token_count")
                or 0
            )
    if prompt is None and (cache_read is not None or cache_write_raw is not None):
        inputs = (inputs or 0) + (cache_read or 0) + cache_write
    total_in = prompt if prompt is not None else (inputs or 0)
    details = get("completion_tokens_details")
    reasoning = (details and _first(details.get, "reasoning_tokens")) or 0
    if not reasoning:
        details = get("output_tokens_details")
        reasoning = (details and _first(details.get, "reasoning_tokens")) or thoughts or 0
    total = _first(get, "total_tokens", "total_token_count") or total_in + (output or 0)
    return TokenUsage(
        provider=provider,
        kind=kind,
        input_tokens=total_in,
        output_tokens=output or 0,
        total_tokens=total,
        cached_input_tokens=cached,
        cache_creation_input_tokens=cache_write,
        reasoning_tokens=reasoning,
    )


def _int(obj: Any, *keys: str) -> int | None:
    if obj is None:
        return None
    # `field_of` per key, with the mapping test made once: a call's usage is read a dozen times.
    get = obj.get if type(obj) is dict or isinstance(obj, Mapping) else None
    for key in keys:
        value = get(key) if get is not None else getattr(obj, key, None)
        if type(value) is int:  # the usual count, and what `as_count` would give for it
            return value
        if value is None:
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return as_count(value)
        if isinstance(value, str) and value.strip():
            count = as_count(value)
            if count or value.strip().strip("0.") == "":
                return count
    return None


def _clean_units(units: Any) -> dict[str, int | float]:
    try:
        items = list(dict(units).items()) if units else []
    except Exception:
        return {}
    out: dict[str, int | float] = {}
    for key, value in items:
        if type(value) in (int, float):
            out[str(key)] = value
        else:
            amount = as_amount(value)
            out[str(key)] = int(amount) if amount.is_integer() else amount
    return out


# -- cost ----------------------------------------------------------------------------------------


@runtime_checkable
class CostCalculator(Protocol):
    """Computes the cost of one call from its token usage (MASEval's protocol).

    Return `None` when the model's pricing is unknown.
    """

    def calculate_cost(self, usage: TokenUsage, model_id: str) -> float | None:
        """The cost of `usage` on `model_id`, or None when unknown."""
        ...


class StaticPricing:
    """A `CostCalculator` from fixed prices per million tokens, per model.

    Each model maps to `"input"` and `"output"` prices, and optionally `"cached_input"` and
    `"cache_creation_input"` (both default to the input price). Reasoning tokens are billed as
    output. Models are matched exactly.

    Example:
        >>> pricing = StaticPricing({"claude-sonnet-4-5": {"input": 3.0, "output": 15.0}})
        >>> pricing.calculate_cost(TokenUsage(input_tokens=2_000_000), "claude-sonnet-4-5")
        6.0
    """

    def __init__(self, prices: Mapping[str, Mapping[str, float]]) -> None:
        self._prices = {model: dict(rates) for model, rates in prices.items()}

    def calculate_cost(self, usage: TokenUsage, model_id: str) -> float | None:
        """The cost of `usage` on `model_id`, or None when the model has no price."""
        rates = self._prices.get(model_id)
        if rates is None:
            return None
        input_rate = rates.get("input", 0.0)
        cached_rate = rates.get("cached_input", input_rate)
        creation_rate = rates.get("cache_creation_input", input_rate)
        fresh = max(0, usage.input_tokens - usage.cached_input_tokens - usage.cache_creation_input_tokens)
        per_million = (
            fresh * input_rate
            + usage.cached_input_tokens * cached_rate
            + usage.cache_creation_input_tokens * creation_rate
            + usage.output_tokens * rates.get("output", 0.0)
        )
        return per_million / 1_000_000

    @property
    def models(self) -> list[str]:
        """The models that have prices."""
        return list(self._prices)

    def gather_config(self) -> dict[str, Any]:
        """The pricing table, for the configuration snapshot."""
        return {"type": type(self).__name__, "unit": "per_million_tokens", "prices": self._prices}

    # Made from the table alone: a registry gathers it again only when the table changed.
    gather_config.__mastrace_config_inputs__ = lambda self: (("prices", self._prices),)  # type: ignore[attr-defined]


# -- attributes ----------------------------------------------------------------------------------


def usage_attributes(usage: Usage, *, massgen: bool = True, gen_ai: bool = True) -> dict[str, Any]:
    """Span attributes for `usage`: the seed's `massgen.usage.*` and/or the GenAI `gen_ai.usage.*`."""
    attrs: dict[str, Any] = {}
    tokens = usage if isinstance(usage, TokenUsage) else None
    if massgen:
        attrs[semconv.MASSGEN_USAGE_COST] = float(usage.cost)
        if usage.units.get(UNPRICED_CALLS):
            attrs[semconv.MASTRACE_COST_UNKNOWN] = True
        if usage.units.get(UNCOUNTED_CALLS):
            attrs[semconv.MASTRACE_USAGE_UNKNOWN] = True
        if tokens is not None:
            attrs[semconv.MASSGEN_USAGE_INPUT] = tokens.input_tokens
            attrs[semconv.MASSGEN_USAGE_OUTPUT] = tokens.output_tokens
            attrs[semconv.MASSGEN_USAGE_REASONING] = tokens.reasoning_tokens
            attrs[semconv.MASSGEN_USAGE_CACHED_INPUT] = tokens.cached_input_tokens
    if gen_ai and tokens is not None:
        attrs[semconv.GEN_AI_USAGE_INPUT_TOKENS] = tokens.input_tokens
        attrs[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] = tokens.output_tokens
        # The GenAI conventions' optional counters are recorded when the provider reported some;
        # the massgen.* keys above always carry all four so that SQL sums stay simple.
        for key, value in (
            (semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, tokens.cached_input_tokens),
            (
                semconv.GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS
                if semconv.latest_conventions()
                else semconv.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
                tokens.cache_creation_input_tokens,
            ),
            (semconv.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, tokens.reasoning_tokens),
        ):
            if value:
                attrs[key] = value
    return attrs


# -- crediting usage to the enclosing round, session and registry scope ---------------------------


_ZERO = Usage()
"""The zero the sums below start from (never handed out, never changed: a sum makes a new record)."""


class UsageAccumulator:
    """A thread-safe running sum of usage, optionally split by label (e.g. agent id)."""

    __slots__ = ("_by_label", "_lock", "_own", "_total", "count", "label")

    def __init__(self, label: str | None = None) -> None:
        self.label = label
        self._lock = threading.Lock()
        # The running sum, kept raw: after one record it is that record itself (adding it to `Usage()`
        # costs more than the rest of an agent round's bookkeeping); `total` adds the zero on read.
        self._total: Usage | None = None
        self._by_label: dict[str, Usage] = {}
        # Records labelled with this accumulator's own label (an agent round's, mostly all of them):
        # kept as they are and summed only when `by_label()` is asked, not on every record.
        self._own: list[Usage] = []
        self.count = 0

    def add(self, usage: Usage, source: object = None, label: str | None = None) -> None:
        """Add one record; `label` names the innermost labelled accumulator that received it."""
        with self._lock:
            total = self._total
            if total is None:
                self._total = usage
            else:  # from the second record on, the same sum `Usage() + r1 + r2 + ...` as ever
                self._total = (_ZERO + total if self.count == 1 else total) + usage
            self.count += 1
            if label is None:
                return
            if label == self.label:
                self._own.append(usage)
            else:
                known = self._by_label.get(label)
                self._by_label[label] = (_ZERO if known is None else known) + usage

    @property
    def total(self) -> Usage:
        """The sum so far (`sum(records, Usage())`)."""
        with self._lock:
            total, count = self._total, self.count
        if total is None:
            return Usage()
        return Usage() + total if count == 1 else total

    def amounts(self) -> Usage:
        """The sum's tokens and cost, without `total`'s extra step for a single record: its provider,
        category, component and kind may be that record's own. For span attributes, which carry
        only amounts."""
        with self._lock:
            return self._total if self._total is not None else Usage()

    def by_label(self) -> dict[str, Usage]:
        """The sum so far per label."""
        with self._lock:
            out = dict(self._by_label)
            if self._own and self.label is not None:
                out[self.label] = sum(self._own, Usage())
            return out


class UsageSink(Protocol):
    """Anything that accepts credited usage (an accumulator, a registry scope's ledger)."""

    label: str | None

    def add(self, usage: Usage, source: object = None, label: str | None = None) -> None: ...


# One variable holding the chain of sinks, innermost last: a session's accumulator, a round's,
# a registry scope's ledger. Tasks and (propagated) threads inherit it with the context.
_SINKS: contextvars.ContextVar[tuple[UsageSink, ...]] = contextvars.ContextVar(
    "mastrace_usage_sinks", default=()
)


def push_sink(
    sink: UsageSink, *, replaces: Callable[[UsageSink], bool] | None = None
) -> contextvars.Token[tuple[UsageSink, ...]]:
    """Make `sink` receive the usage credited in this context until `pop_sink`.

    Sinks for which `replaces(sink)` is true stop receiving meanwhile (an inner scope of the same
    registry takes over from the outer one, so nothing is counted twice).
    """
    chain = _SINKS.get()
    if replaces is not None:
        chain = tuple(s for s in chain if not replaces(s))
    return _SINKS.set((*chain, sink))


def pop_sink(token: contextvars.Token[tuple[UsageSink, ...]], sink: UsageSink) -> None:
    """Undo `push_sink`, also when called from another context than the one that pushed."""
    try:
        _SINKS.reset(token)
    except (ValueError, RuntimeError):
        chain = _SINKS.get()
        if sink in chain:
            _SINKS.set(tuple(s for s in chain if s is not sink))


def current_sinks() -> tuple[UsageSink, ...]:
    """The sinks that usage credited in the current context goes to."""
    return _SINKS.get()


def credit_usage(usage: Usage, source: object = None, *, chain: tuple[UsageSink, ...] | None = None) -> None:
    """Credit `usage` to the enclosing agent rounds, coordination sessions and registry scopes.

    The LLM mixin and `UsageTrackableMixin.record_usage()` call this for you.

    Args:
        usage: The usage of one call.
        source: The component that incurred it (registry scopes count it for that component).
        chain: The sinks to credit instead of the current context's.
    """
    if chain is None:
        chain = _SINKS.get()
    if not chain:
        return
    label = None
    for sink in reversed(chain):  # the innermost labelled sink names the record
        if sink.label is not None:
            label = sink.label
            break
    for sink in chain:
        sink.add(usage, source, label)
