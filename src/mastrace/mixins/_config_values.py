"""What `ConfigurableMixin.gather_config()` records by default: a component's plain-data attributes.

A value is *plain data* when a configuration snapshot can hold it as what it is: numbers, text,
booleans, None, enums, dates and times, UUIDs, paths, bytes, `Decimal`, dataclasses, pydantic
models, and lists, tuples, sets and dicts of those. Anything else (an SDK client, a lock, a
callable, an open file) is configuration of another kind, or runtime state: it is left out rather
than recorded as a repr that changes from run to run. Values are encoded by the snapshot encoder
(`to_json_value`), so bytes, sets and objects follow the same rules as everywhere else.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import threading
import uuid
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from pathlib import PurePath
from typing import Any

from ..pipeline._snapshots_on_spans import VOLATILE_KEYS
from ..scrubbing._names import secret_key_word
from ..tracing._snapshot import MAX_DEPTH, JsonValue, to_json_value

__all__ = ["config_inputs", "config_values", "is_plain_data"]

_SCALARS = (
    str,
    int,
    float,
    bool,
    type(None),
    bytes,
    bytearray,
    enum.Enum,
    datetime.date,
    datetime.time,
    datetime.timedelta,
    uuid.UUID,
    PurePath,
)
_SEQUENCES = (list, tuple, set, frozenset)
_MAX_ITEMS = 10_000  # a bigger container is data the component holds, not its configuration

# Components whose config is being gathered on this thread: a cycle of components (an agent that
# holds its orchestrator, which holds its agents) records each one once.
_active = threading.local()


def _is_data_object(value: Any) -> bool:
    cls = type(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return True
    if cls.__module__ == "decimal" and cls.__name__ == "Decimal":
        return True
    return callable(getattr(value, "model_dump", None)) and any(
        base.__module__.startswith("pydantic") for base in cls.__mro__[1:]
    )


def is_plain_data(value: Any, depth: int = 0) -> bool:
    """Whether `value` is plain data (see the module docstring), checked to `MAX_DEPTH` levels."""
    if isinstance(value, _SCALARS) or _is_data_object(value):
        return True
    if depth >= MAX_DEPTH:
        return False
    if isinstance(value, _SEQUENCES):
        return len(value) <= _MAX_ITEMS and all(is_plain_data(v, depth + 1) for v in value)
    if isinstance(value, Mapping):
        return len(value) <= _MAX_ITEMS and all(
            isinstance(k, (str, int, float, bool, enum.Enum)) and is_plain_data(v, depth + 1)
            for k, v in value.items()
        )
    return False


def _attributes(obj: object) -> Iterator[tuple[str, Any]]:
    """The instance attributes of `obj`: its `__dict__`, then its slots."""
    seen: set[str] = set()
    for name, value in getattr(obj, "__dict__", {}).items():
        seen.add(name)
        yield name, value
    for klass in type(obj).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in seen or name in ("__dict__", "__weakref__"):
                continue
            seen.add(name)
            try:
                yield name, getattr(obj, name)
            except AttributeError:  # a slot never assigned
                continue


def _scrub_keys(value: JsonValue) -> JsonValue:
    """`value` with the value under every secret-named key replaced by the key scrubber's marker."""
    if isinstance(value, dict):
        return {
            k: _redacted(k) if secret_key_word(k) is not None else _scrub_keys(v) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_scrub_keys(v) for v in value]
    return value


def _redacted(name: str) -> str:
    where = secret_key_word(name)
    word = name[where[0] : where[1]] if where is not None else name
    return f"[Scrubbed due to {word!r}]"


@contextmanager
def _gathering(obj: object) -> Iterator[bool]:
    """Yields False when `obj` is already being gathered further up this thread (a cycle)."""
    active: set[int] = getattr(_active, "ids", None) or set()
    _active.ids = active
    if id(obj) in active:
        yield False
        return
    active.add(id(obj))
    try:
        yield True
    finally:
        active.discard(id(obj))


def _nested_config(value: Any) -> JsonValue:
    """The configuration of a nested component (anything with `gather_config()`), or a marker."""
    with _gathering(value) as fresh:
        if not fresh:
            return "<cycle>"
        gathered = value.gather_config()
    encoded = to_json_value(gathered)
    if isinstance(encoded, dict):  # its collection time is not configuration (the hash must not move)
        return {k: v for k, v in encoded.items() if k not in VOLATILE_KEYS}
    return encoded


def config_inputs(
    obj: object, attributes: Collection[str] | None = None, exclude: Collection[str] = ()
) -> Iterator[tuple[str, Any]]:
    """The `(name, value)` pairs `config_values` reads: what the configuration is made from."""
    if attributes is not None:
        items: Iterator[tuple[str, Any]] = ((n, getattr(obj, n, None)) for n in attributes)
    else:
        items = ((n, v) for n, v in _attributes(obj) if not n.startswith("_"))
    return ((n, v) for n, v in items if n not in exclude)


def config_values(
    obj: object, attributes: Collection[str] | None = None, exclude: Collection[str] = ()
) -> dict[str, JsonValue]:
    """The attributes of `obj` worth recording as its configuration, JSON-safe and key-scrubbed.

    Args:
        obj: The component.
        attributes: Record exactly these (read with `getattr`, so properties and private names
            work too); None for every public instance attribute.
        exclude: Never record these.
    """
    out: dict[str, JsonValue] = {}
    with _gathering(obj):
        for name, value in config_inputs(obj, attributes, exclude):
            if secret_key_word(name) is not None:
                out[name] = _redacted(name)
            elif callable(getattr(value, "gather_config", None)) and not isinstance(value, type):
                out[name] = _nested_config(value)
            elif is_plain_data(value):
                out[name] = _scrub_keys(to_json_value(value))
    return out
