"""Tests for mastrace.tracing._snapshot: the JSON-safe encoder, dumps_json, json_schema and size capping."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import math
import uuid
from decimal import Decimal
from pathlib import PurePosixPath
from typing import Any

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mastrace.tracing._snapshot import (
    CYCLE_MARKER,
    DEPTH_MARKER,
    MAX_DEPTH,
    Limits,
    cap_json,
    cap_string,
    dumps_json,
    json_schema,
    schema_for,
    to_json_value,
    truncation_marker,
)


class Color(enum.Enum):
    RED = "red"
    BLUE = 2


class Level(enum.IntEnum):
    HIGH = 3


@dataclasses.dataclass
class AgentConfig:
    agent_id: str
    tools: tuple[str, ...] = ()
    parent: Any = None


class ModelConfig(pydantic.BaseModel):
    model: str
    stop: set[str] = set()


class BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


class Plain:
    pass


def test_primitives_pass_through() -> None:
    """Strings, ints, finite floats, booleans and None are returned as they are."""
    assert to_json_value(["a", 1, 1.5, True, None]) == ["a", 1, 1.5, True, None]


def test_non_finite_floats_become_strings() -> None:
    """NaN and infinities become the strings JSON parsers know."""
    assert to_json_value([math.nan, math.inf, -math.inf]) == ["NaN", "Infinity", "-Infinity"]


def test_sets_are_sorted_when_possible() -> None:
    """Sets and frozensets become sorted lists."""
    assert to_json_value({"b", "c", "a"}) == ["a", "b", "c"]
    assert to_json_value(frozenset({3, 1, 2})) == [1, 2, 3]


def test_unsortable_sets_keep_every_item() -> None:
    """A set whose members cannot be ordered still becomes a list of all of them."""
    assert sorted(map(str, to_json_value({1, "a", 2.5}))) == ["1", "2.5", "a"]  # type: ignore[arg-type]


def test_tuples_become_lists() -> None:
    """Tuples become lists."""
    assert to_json_value((1, (2, 3))) == [1, [2, 3]]


def test_dataclasses_become_dicts() -> None:
    """Dataclasses become dicts of their fields, recursively encoded."""
    value = AgentConfig("agent_a", ("search", "vote"))
    assert to_json_value(value) == {"agent_id": "agent_a", "tools": ["search", "vote"], "parent": None}


def test_pydantic_models_become_dicts() -> None:
    """Pydantic models are dumped and encoded."""
    assert to_json_value(ModelConfig(model="gpt-4o", stop={"b", "a"})) == {
        "model": "gpt-4o",
        "stop": ["a", "b"],
    }


def test_enums_become_their_values() -> None:
    """Enum members become their values, including int-mixin enums."""
    assert to_json_value([Color.RED, Color.BLUE, Level.HIGH]) == ["red", 2, 3]


def test_dates_and_durations() -> None:
    """Datetimes, dates and times become ISO strings; durations become seconds."""
    moment = datetime.datetime(2025, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    value = [moment, moment.date(), moment.time(), datetime.timedelta(minutes=1, milliseconds=500)]
    assert to_json_value(value) == ["2025-01-02T03:04:05+00:00", "2025-01-02", "03:04:05", 60.5]


def test_decimal_uuid_and_path_become_strings() -> None:
    """Decimals, UUIDs and paths become their string forms."""
    ident = uuid.UUID(int=1)
    assert to_json_value([Decimal("1.10"), ident, PurePosixPath("/tmp/x")]) == ["1.10", str(ident), "/tmp/x"]


def test_utf8_bytes_become_text() -> None:
    """Bytes that decode as UTF-8 become that text."""
    assert to_json_value("héllo".encode()) == "héllo"


def test_binary_bytes_become_a_hex_preview() -> None:
    """Undecodable bytes become their length and a hex prefix."""
    assert to_json_value(b"\xff\x00" * 40) == f"<80 bytes: {'ff00' * 16}…>"


def test_exceptions_become_type_and_message() -> None:
    """Exceptions become "Type: message"."""
    assert to_json_value([ValueError("bad round"), KeyError()]) == ["ValueError: bad round", "KeyError"]


def test_mapping_keys_become_strings() -> None:
    """Non-string keys are spelled as json.dumps spells them."""
    assert to_json_value({1: "a", None: "c", 2.5: "d", Color.RED: "e"}) == {
        "1": "a",
        "null": "c",
        "2.5": "d",
        "red": "e",
    }
    assert to_json_value({True: "b"}) == {"true": "b"}


def test_repr_that_raises_is_named() -> None:
    """An object whose repr raises becomes a named placeholder."""
    assert to_json_value(BadRepr()) == "<unrepresentable BadRepr>"


def test_default_repr_has_no_address() -> None:
    """Objects with the default repr are named without their memory address, so snapshots are stable."""
    assert to_json_value(Plain()) == "<test_snapshot.Plain object>"


def test_functions_and_classes_are_named() -> None:
    """Functions and classes become their qualified names."""
    assert to_json_value([len, Plain]) == ["<function builtins.len>", "<class test_snapshot.Plain>"]


def test_list_cycle_is_marked() -> None:
    """A list containing itself shows the cycle marker where it repeats."""
    items: list[Any] = [1]
    items.append(items)
    assert to_json_value(items) == [1, CYCLE_MARKER]


def test_dict_cycle_is_marked() -> None:
    """A dict containing itself shows the cycle marker where it repeats."""
    node: dict[str, Any] = {"name": "root"}
    node["self"] = node
    assert to_json_value(node) == {"name": "root", "self": CYCLE_MARKER}


def test_dataclass_cycle_is_marked() -> None:
    """A cycle through a dataclass is cut too."""
    config = AgentConfig("a")
    config.parent = [config]
    assert to_json_value(config) == {"agent_id": "a", "tools": [], "parent": [CYCLE_MARKER]}


def test_shared_reference_is_not_a_cycle() -> None:
    """The same container twice side by side is encoded twice."""
    shared = [1, 2]
    assert to_json_value([shared, shared]) == [[1, 2], [1, 2]]


def test_depth_limit_is_marked() -> None:
    """Nesting past the depth limit is replaced by a marker."""
    value: Any = "leaf"
    for _ in range(MAX_DEPTH + 5):
        value = [value]
    encoded = to_json_value(value)
    for _ in range(MAX_DEPTH):
        encoded = encoded[0]  # type: ignore[index]
    assert encoded == DEPTH_MARKER


def test_huge_int_is_described() -> None:
    """An int too large to print becomes a description instead of an error."""
    assert to_json_value(1 << 20_000) == "<int of 20001 bits>"


def test_dumps_json_is_compact_and_keeps_unicode() -> None:
    """dumps_json writes compact JSON and keeps non-ASCII characters."""
    assert dumps_json({"agent": "エージェント", "n": [1, 2]}) == '{"agent":"エージェント","n":[1,2]}'


def test_dumps_json_matches_the_encoder() -> None:
    """The fast and the full path spell the same value the same way."""
    value = {1: "a", None: "b", "when": datetime.date(2025, 1, 2), "tags": {"x"}}
    assert json.loads(dumps_json(value)) == to_json_value(value)
    assert json.loads(dumps_json({**value, "nan": math.nan})) == {**to_json_value(value), "nan": "NaN"}  # type: ignore[dict-item]


def test_dumps_json_handles_odd_keys_and_cycles() -> None:
    """Tuple keys and cycles, which json.dumps refuses, encode without raising."""
    items: list[Any] = []
    items.append(items)
    assert json.loads(dumps_json({(1, 2): items})) == {"(1, 2)": [CYCLE_MARKER]}


def test_json_schema_reads_types_from_text() -> None:
    """A mapping of JSON texts gives object and array types from the first character."""
    schema = json.loads(json_schema({"cfg": '{"a": 1}', "ids": "[1, 2]"}))
    assert schema == {"type": "object", "properties": {"cfg": {"type": "object"}, "ids": {"type": "array"}}}


def test_json_schema_follows_each_key_set_and_type() -> None:
    """Asked again (from memory), the schema still follows the keys, their order and each text's type."""
    first = json_schema({"cfg": '{"a": 1}', "ids": " \n[1, 2]", "n": "3"})
    assert json_schema({"cfg": "{}", "ids": "[]", "n": "4"}) == first
    assert json.loads(first)["properties"] == {"cfg": {"type": "object"}, "ids": {"type": "array"}, "n": {}}
    assert json.loads(json_schema({"cfg": "[]", "ids": "[]", "n": "4"}))["properties"]["cfg"] == {
        "type": "array"
    }
    assert list(json.loads(json_schema({"ids": "[]", "cfg": "{}"}))["properties"]) == ["ids", "cfg"]
    assert schema_for("  [1]") == {"type": "array"} and schema_for(None) == {}
    schema_for("{}")["type"] = "changed"  # a caller's copy: nothing shared changes
    assert schema_for("{}") == {"type": "object"}


def test_json_schema_accepts_keys() -> None:
    """An iterable of keys declares each one an object."""
    assert json.loads(json_schema(["a"])) == {"type": "object", "properties": {"a": {"type": "object"}}}


def test_cap_string_leaves_short_strings() -> None:
    """Strings within the limit are returned unchanged."""
    text = "short"
    assert cap_string(text, 10) is text


def test_cap_string_marks_truncation() -> None:
    """A multi-megabyte string is cut to the limit and says how much was cut."""
    text = "x" * 3_000_000
    capped = cap_string(text, 64_000)
    kept = capped.index("…")
    assert len(capped) <= 64_000
    assert capped == "x" * kept + f"…[truncated {3_000_000 - kept} chars]"


def test_cap_json_keeps_small_documents() -> None:
    """JSON within the limit is returned unchanged and not marked as cut."""
    assert cap_json('{"a": 1}', 100) == ('{"a": 1}', False)


def test_cap_json_shortens_long_leaves() -> None:
    """A document with a multi-megabyte string stays valid JSON, within the limit, with a marker."""
    text = json.dumps({"prompt": "p" * 3_000_000, "model": "gpt-4o"})
    capped, cut = cap_json(text, 256_000)
    doc = json.loads(capped)
    assert cut and len(capped) <= 256_000
    assert doc["model"] == "gpt-4o"
    assert "…[truncated " in doc["prompt"]


def test_cap_json_falls_back_to_a_preview_object() -> None:
    """A document too large even with short leaves becomes a truncation object with a preview."""
    text = json.dumps(list(range(100_000)))
    capped, cut = cap_json(text, 1_000)
    doc = json.loads(capped)
    assert cut and len(capped) <= 1_000
    assert doc["mastrace.truncated"] is True
    assert doc["chars"] == len(text)
    assert doc["preview"].startswith("[0, 1, 2")


def test_cap_json_caps_non_json_as_text() -> None:
    """Text that only looks like JSON is capped as a plain string."""
    capped, cut = cap_json("[INFO] " + "x" * 1_000, 5_000, string_limit=100)
    assert cut and 90 <= len(capped) <= 100
    assert capped.startswith("[INFO] ")


def test_limits_defaults() -> None:
    """The default limits are the documented ones."""
    assert Limits() == Limits(max_string_chars=64_000, max_json_chars=256_000, max_attributes=128)


_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.binary(max_size=20)
    | st.builds(Plain)
    | st.builds(BadRepr)
    | st.sampled_from(list(Color))
    | st.datetimes()
    | st.decimals(allow_nan=True)
)
_hashable = st.integers() | st.text(max_size=5) | st.floats(allow_nan=True)
_trees = st.recursive(
    _leaves,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.text(max_size=8) | st.integers() | st.booleans(), children, max_size=5)
        | st.tuples(children, children)
        | st.sets(_hashable, max_size=5)
        | st.frozensets(_hashable, max_size=5)
        | st.builds(AgentConfig, st.text(max_size=5), st.just(()), children)
    ),
    max_leaves=25,
)


def _with_cycles(value: Any) -> Any:
    as_list: list[Any] = [value]
    as_list.append(as_list)
    as_dict: dict[str, Any] = {"value": value, "list": as_list}
    as_dict["self"] = as_dict
    return as_dict


@settings(max_examples=150, deadline=None)
@given(value=_trees, cyclic=st.booleans(), limit=st.integers(min_value=200, max_value=2_000))
def test_dumps_json_never_raises_and_caps(value: Any, cyclic: bool, limit: int) -> None:
    """Any value, cycles included, encodes to parseable JSON, and capping keeps it parseable and bounded."""
    if cyclic:
        value = _with_cycles(value)
    text = dumps_json(value)
    json.loads(text)
    capped, _ = cap_json(text, limit)
    json.loads(capped)
    assert len(capped) <= limit + len(truncation_marker(len(text)))


@pytest.mark.parametrize("size", [0, 1, 63_999, 64_000, 64_001, 1_000_000])
def test_cap_string_bound(size: int) -> None:
    """A capped string never exceeds its limit."""
    assert len(cap_string("y" * size, 64_000)) <= 64_000
