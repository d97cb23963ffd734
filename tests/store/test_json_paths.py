"""The one JSON encoder (`dumps_json`, for snapshots, attributes and store rows) has two paths, the
optional `orjson` and the standard library, which write the same values: whatever `orjson` would
spell differently goes the standard library way. And no other module builds its own encoder."""

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

from mastrace.tracing import _snapshot
from mastrace.tracing._snapshot import dumps_json

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
        m.setattr(_snapshot, "_orjson", None)
        return dumps_json(value)


@pytest.mark.parametrize("value", ODD_VALUES)
def test_odd_values_read_back_the_same_on_both_paths(value: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, slow = dumps_json(value), _stdlib(value, monkeypatch)
    assert json.loads(fast) == json.loads(slow)


def test_values_orjson_would_spell_differently_take_the_standard_library_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert dumps_json({"x": math.nan}) == '{"x":"NaN"}'  # not null
    assert dumps_json({"d": datetime.date(2026, 1, 2)}) == _stdlib(
        {"d": datetime.date(2026, 1, 2)}, monkeypatch
    )
    assert dumps_json({"e": Color.RED}) == '{"e":"red"}'


def test_plain_attributes_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(_snapshot, "_compact_encode", lambda v: calls.append(v) or "{}")
    assert json.loads(dumps_json({"gen_ai.request.model": "m", "n": 3, "t": ("a",)})) == {
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
    fast = dumps_json(value)
    original = _snapshot._orjson
    _snapshot._orjson = None
    try:
        slow = dumps_json(value)
    finally:
        _snapshot._orjson = original
    assert json.loads(fast) == json.loads(slow)


def test_one_rule_per_odd_value_on_every_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """NaN, bytes, datetimes, sets, cycles and lone surrogates come out the same whichever path
    encodes, sorted or not."""
    cycle: list[Any] = [1]
    cycle.append(cycle)
    value = {
        "nan": math.nan,
        "bytes": b"\x00ab",
        "when": datetime.datetime(2026, 1, 2, 3, 4, 5),
        "set": {"b", "a"},
        "cycle": cycle,
        "text": "a\ud800b",
    }
    outputs = {dumps_json(value), dumps_json(value, sort_keys=True), _stdlib(value, monkeypatch)}
    parsed = [json.loads(text) for text in outputs]
    assert all(p == parsed[0] for p in parsed)
    got = parsed[0]
    assert got["nan"] == "NaN" and got["set"] == ["a", "b"] and got["text"] == "a\ufffdb"
    assert got["when"].startswith("2026-01-02T03:04:05") and got["cycle"][1] == _snapshot.CYCLE_MARKER
    assert isinstance(got["bytes"], str)


def test_sorted_output_never_depends_on_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    """Snapshot hashes must be the same with and without `orjson` installed."""
    value = {"b": 1e16, "a": [0.1, 2**70, "é"], "c": {"z": None, "y": True}}
    with monkeypatch.context() as m:
        m.setattr(_snapshot, "_orjson", None)
        without = dumps_json(value, sort_keys=True)
    assert (
        dumps_json(value, sort_keys=True)
        == without
        == json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    )


def test_no_other_module_builds_a_json_encoder() -> None:
    """Snapshots, attributes and store rows all go through `dumps_json`: a second encoder (with its
    own idea of NaN or bytes) in the modules that write them fails this test."""
    from pathlib import Path

    import mastrace

    root = Path(mastrace.__file__).parent
    writers = [
        "pipeline/_snapshots_on_spans.py",
        "pipeline/_transform.py",
        "scrubbing/_engine.py",
        "tracing/_tracer.py",
    ]
    writers += ["store/_rows.py", "store/_writer.py", "mixins/coordination.py", "registry.py", "usage.py"]
    for name in writers:
        text = (root / name).read_text(encoding="utf-8")
        for spelling in ("JSONEncoder(", "json.dumps(", "c_make_encoder", "orjson"):
            assert spelling not in text, f"{name} encodes JSON itself ({spelling})"


def test_the_c_encoder_is_where_it_was() -> None:
    """The reusable C encoder comes from `json.encoder.c_make_encoder`: if a Python release moves
    it, this fails (the encoder still works, through the slower public path)."""
    assert getattr(json.encoder, "c_make_encoder", None) is not None
    assert _snapshot._compact_encode.__name__ == "encode"
    assert _snapshot._compact_encode.__qualname__.startswith("_c_encoder")
