"""The store writer's two JSON paths (the optional `orjson`, the standard library) write the same
values: whatever `orjson` would spell differently goes the standard library way."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mastrace.store import _rows

orjson = pytest.importorskip("orjson")  # in the test environment; the fallback is tested below too


class Color(str, enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int


ODD_VALUES: list[Any] = [
    {"nan": math.nan, "inf": math.inf, "ninf": -math.inf},
    {"surrogate": "a\ud800b"},
    {"big": 2**70, "neg": -(2**70)},
    {"when": datetime.datetime(2026, 11, 24, 12, 0, tzinfo=datetime.timezone.utc)},
    {"enum": Color.RED, "point": Point(1)},
    {1: "int key", "k": None},
    {"unicode": "naïve — 日本 \u2028 \x00 \x1f", "float": 1e16, "small": 1e-7, "tuple": ("a", "b")},
    {"prompt mentions null": "null is not None"},
]


def _stdlib(value: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    with monkeypatch.context() as m:
        m.setattr(_rows, "_orjson", None)
        return _rows._dumps(value)


@pytest.mark.parametrize("value", ODD_VALUES)
def test_odd_values_read_back_the_same_on_both_paths(value: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, slow = _rows._dumps(value), _stdlib(value, monkeypatch)
    assert json.loads(fast) == json.loads(slow)


def test_values_orjson_would_spell_differently_take_the_standard_library_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _rows._dumps({"x": math.nan}) == '{"x":"NaN"}'  # not null
    assert _rows._dumps({"d": datetime.date(2026, 1, 2)}) == _stdlib(
        {"d": datetime.date(2026, 1, 2)}, monkeypatch
    )
    assert _rows._dumps({"e": Color.RED}) == '{"e":"red"}'


def test_plain_attributes_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(_rows, "_encode", lambda v: calls.append(v) or "{}")
    assert json.loads(_rows._dumps({"gen_ai.request.model": "m", "n": 3, "t": ("a",)})) == {
        "gen_ai.request.model": "m",
        "n": 3,
        "t": ["a"],
    }
    assert calls == []  # the standard library encoder was not needed


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.text()
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=12), values, max_size=6))
def test_any_json_shaped_value_reads_back_the_same_on_both_paths(value: dict[str, Any]) -> None:
    fast = _rows._dumps(value)
    original = _rows._orjson
    _rows._orjson = None
    try:
        slow = _rows._dumps(value)
    finally:
        _rows._orjson = original
    assert json.loads(fast) == json.loads(slow)
