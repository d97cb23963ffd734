"""What a set of components' configurations were gathered from, kept to tell when to gather again.

A configuration snapshot is the registered components' `gather_config()` output. Gathering it
(every component's attributes read, encoded and compared) costs far more than checking that
nothing it was gathered from has changed, so `Registry.config_snapshot()` keeps a `ConfigState`
next to the snapshot it built and gathers again only when the registrations or that state changed.

A component can be checked this way only when its `gather_config()` says what it reads: the
method carries `__mastrace_config_inputs__`, a function of the component returning the
`(name, value)` pairs its configuration is made from (`ConfigurableMixin.gather_config()` reads
the attributes it records; `StaticPricing` its table). A component without one (any
`gather_config()` written by hand, which may read state held anywhere) is gathered every time.

Values are compared as follows: text, numbers and other immutable values by value; containers,
dataclasses and pydantic models against a deep copy kept when the state was taken (so a dict
changed in place is seen); a nested component (a value with its own `gather_config()`) by
identity and by its own state; any other object by identity (its configuration is not recorded).
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import decimal
import enum
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import PurePath
from typing import Any

__all__ = ["INPUTS_MARK", "ConfigState", "config_inputs_of"]

INPUTS_MARK = "__mastrace_config_inputs__"
"""The attribute of a `gather_config` function that names what its result is made from."""

Inputs = Callable[[Any], Iterable[tuple[str, Any]]]

_IMMUTABLE = (
    str,
    int,
    float,
    bool,
    type(None),
    bytes,
    enum.Enum,
    datetime.date,
    datetime.time,
    datetime.timedelta,
    uuid.UUID,
    PurePath,
    decimal.Decimal,
)
_CONTAINERS = (list, tuple, set, frozenset, dict, bytearray, Mapping)
_BY_IDENTITY = object()  # kept instead of a copy: compared by identity only
_MAX_COMPONENTS = 1_000  # a graph of components larger than this is gathered every time


def config_inputs_of(component: object) -> Inputs | None:
    """The function naming what `component.gather_config()` reads, or None when it does not say."""
    method = getattr(type(component), "gather_config", None)
    inputs = getattr(method, INPUTS_MARK, None)
    return inputs if callable(inputs) else None


def _has_config(value: Any) -> bool:
    return callable(getattr(value, "gather_config", None)) and not isinstance(value, type)


def _needs_copy(value: Any) -> bool:
    """Whether `value` may change in place in a way its configuration would show."""
    if isinstance(value, _CONTAINERS):
        return True
    if dataclasses.is_dataclass(value):
        return True
    return callable(getattr(value, "model_dump", None))  # a pydantic model


def _same(value: Any, ref: Any, kept: Any) -> bool:
    if kept is _BY_IDENTITY:
        if value is ref:
            return True
        # Equal immutable values (a text rebuilt with the same content) count as unchanged.
        return type(value) is type(ref) and isinstance(value, _IMMUTABLE) and bool(value == ref)
    if value is not ref:
        return False
    try:
        return bool(value == kept)
    except Exception:  # a value whose __eq__ raises counts as changed
        return False


class _Unknown(Exception):
    """A component whose configuration cannot be told unchanged without gathering it."""


class ConfigState:
    """The inputs of some components' configurations at one moment; `unchanged()` compares them now.

    Build it with `ConfigState.capture()` *before* gathering: a change made while gathering is then
    seen by the next check.
    """

    __slots__ = ("_items",)

    def __init__(self, items: list[tuple[object, Inputs, tuple[tuple[str, Any, Any], ...]]]) -> None:
        self._items = items

    @classmethod
    def capture(cls, components: Iterable[object]) -> ConfigState | None:
        """The state of `components` and the components nested in them, or None when one of them
        does not say what its configuration is made from (or cannot be copied)."""
        items: list[tuple[object, Inputs, tuple[tuple[str, Any, Any], ...]]] = []
        seen: set[int] = set()
        pending = list(components)
        try:
            while pending:
                component = pending.pop()
                if id(component) in seen:
                    continue
                seen.add(id(component))
                if len(seen) > _MAX_COMPONENTS:
                    return None
                inputs = config_inputs_of(component)
                if inputs is None:
                    return None
                entries = []
                for name, value in inputs(component):
                    if _has_config(value):
                        pending.append(value)
                        entries.append((name, value, _BY_IDENTITY))
                    elif _needs_copy(value):
                        entries.append((name, value, copy.deepcopy(value)))
                    else:
                        entries.append((name, value, _BY_IDENTITY))
                items.append((component, inputs, tuple(entries)))
        except Exception:  # not copyable, or an attribute that raises: gather every time
            return None
        return cls(items)

    def unchanged(self) -> bool:
        """Whether every input still has the value it had when this state was captured. Never raises."""
        try:
            for component, inputs, entries in self._items:
                current = tuple(inputs(component))
                if len(current) != len(entries):
                    return False
                for (name, value), (kept_name, ref, kept) in zip(current, entries, strict=True):
                    if name != kept_name or not _same(value, ref, kept):
                        return False
        except Exception:
            return False
        return True
