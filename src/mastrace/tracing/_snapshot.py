"""JSON-safe encoding of arbitrary values, and size capping with a visible marker.

`to_json_value` turns anything into a plain tree of dicts, lists, strings, finite numbers, booleans
and `None`; `dumps_json` serialises it. Neither raises. Encoders are looked up by type along the
MRO and the result is cached per type, so encoding a value of a known type costs one dict lookup.

`cap_string` and `cap_json` bound the size of what leaves the process; `cap_json` keeps its output
valid JSON.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import math
import re
import sys
import types
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from contextlib import suppress
from pathlib import PurePath
from typing import Any, TypeAlias, Union

from opentelemetry.util.types import AttributeValue

from .. import semconv

__all__ = [
    "CYCLE_MARKER",
    "DEPTH_MARKER",
    "MAX_DEPTH",
    "JsonValue",
    "Limits",
    "cap_json",
    "cap_string",
    "coerce_value",
    "dumps_json",
    "json_schema",
    "loads_json",
    "safe_repr",
    "schema_for",
    "to_json_value",
]

JsonValue: TypeAlias = Union[dict[str, "JsonValue"], list["JsonValue"], str, int, float, bool, None]  # noqa: UP007
Encoder = Callable[[Any, set[int], int], JsonValue]

MAX_DEPTH = 32
CYCLE_MARKER = "<cycle>"
DEPTH_MARKER = "<max depth reached>"
TRUNCATED_KEY = semconv.MASTRACE_TRUNCATED
_MAX_INT_BITS = 13_000  # str(int) refuses more than 4300 digits (about 14_000 bits)
_BYTES_PREVIEW = 32
_MAX_RESOLVED = 4_096
_OBJECT_REPR: Any = object.__repr__
_FLOAT_NAMES = {math.inf: "Infinity", -math.inf: "-Infinity"}


@dataclasses.dataclass(frozen=True)
class Limits:
    """Size limits applied to attributes before export.

    Attributes:
        max_string_chars: Longest plain string attribute (or sequence item) kept, marker included.
        max_json_chars: Longest JSON string attribute kept; the result stays valid JSON.
        max_attributes: Most attributes kept per span, event or link.
        max_sequence_items: Most items kept in a sequence attribute.
    """

    max_string_chars: int = 64_000
    max_json_chars: int = 256_000
    max_attributes: int = 128
    max_sequence_items: int = 4_096


# -- encoding ------------------------------------------------------------------------------------


def safe_repr(obj: Any) -> str:
    """`repr(obj)`, without memory addresses for default reprs, and never raising."""
    try:
        cls = type(obj)
        if cls.__repr__ is _OBJECT_REPR:  # no memory address: keeps snapshots stable across runs
            return f"<{cls.__module__}.{cls.__qualname__} object>"
        result = repr(obj)
        if isinstance(result, str) and result:
            return str(result)
    except Exception:
        pass
    try:
        return f"<unrepresentable {type(obj).__name__}>"
    except Exception:  # pragma: no cover - a metaclass that breaks __name__
        return "<unrepresentable>"


def _key(key: Any) -> str:
    # Same spelling as json.dumps gives non-string keys, so both encoding paths agree.
    if type(key) is str:
        return key
    if key is None or isinstance(key, bool):
        return "null" if key is None else ("true" if key else "false")
    if isinstance(key, enum.Enum):
        return _key(key.value)
    if isinstance(key, float):
        return _FLOAT_NAMES.get(key, "NaN") if not math.isfinite(key) else float.__repr__(key)
    if isinstance(key, int):
        return int.__repr__(key) if key.bit_length() <= _MAX_INT_BITS else f"<int of {key.bit_length()} bits>"
    if isinstance(key, str):
        return str.__str__(key)
    value = to_json_value(key)
    return value if isinstance(value, str) else safe_repr(key)


def _enter(obj: Any, seen: set[int], depth: int) -> JsonValue | None:
    """The marker to use instead of descending into `obj`, or None when it is fine to descend."""
    if id(obj) in seen:
        return CYCLE_MARKER
    if depth >= MAX_DEPTH:
        return DEPTH_MARKER
    return None


def _encode_mapping(obj: Mapping[Any, Any], seen: set[int], depth: int) -> JsonValue:
    marker = _enter(obj, seen, depth)
    if marker is not None:
        return marker
    seen.add(id(obj))
    try:
        return {_key(k): _encode(v, seen, depth + 1) for k, v in obj.items()}
    finally:
        seen.discard(id(obj))


def _encode_items(obj: Iterable[Any], seen: set[int], depth: int) -> JsonValue:
    marker = _enter(obj, seen, depth)
    if marker is not None:
        return marker
    seen.add(id(obj))
    try:
        return [_encode(v, seen, depth + 1) for v in obj]
    finally:
        seen.discard(id(obj))


def _encode_set(obj: Set[Any], seen: set[int], depth: int) -> JsonValue:
    try:
        items: Iterable[Any] = sorted(obj)
    except Exception:  # unorderable members: keep iteration order
        items = list(obj)
    marker = _enter(obj, seen, depth)
    if marker is not None:
        return marker
    seen.add(id(obj))
    try:
        return [_encode(v, seen, depth + 1) for v in items]
    finally:
        seen.discard(id(obj))


def _encode_dataclass(obj: Any, seen: set[int], depth: int) -> JsonValue:
    marker = _enter(obj, seen, depth)
    if marker is not None:
        return marker
    seen.add(id(obj))
    try:
        return {
            f.name: _encode(getattr(obj, f.name, None), seen, depth + 1)
            for f in dataclasses.fields(obj)
            if f.repr
        }
    finally:
        seen.discard(id(obj))


def _encode_pydantic(obj: Any, seen: set[int], depth: int) -> JsonValue:
    marker = _enter(obj, seen, depth)
    if marker is not None:
        return marker
    seen.add(id(obj))
    try:
        return _encode(obj.model_dump(), seen, depth + 1)
    finally:
        seen.discard(id(obj))


def _encode_float(obj: float, seen: set[int], depth: int) -> JsonValue:
    value = float(obj)
    if math.isfinite(value):
        return value
    return _FLOAT_NAMES.get(value, "NaN")


def _encode_int(obj: int, seen: set[int], depth: int) -> JsonValue:
    value = int(obj)
    bits = value.bit_length()
    return value if bits <= _MAX_INT_BITS else f"<int of {bits} bits>"


def _encode_bytes(obj: bytes | bytearray | memoryview, seen: set[int], depth: int) -> JsonValue:
    data = bytes(obj)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        more = "…" if len(data) > _BYTES_PREVIEW else ""
        return f"<{len(data)} bytes: {data[:_BYTES_PREVIEW].hex()}{more}>"


def _encode_exception(obj: BaseException, seen: set[int], depth: int) -> JsonValue:
    name = type(obj).__name__
    try:
        message = str(obj)
    except Exception:
        message = "<unprintable>"
    return f"{name}: {message}" if message else name


def _encode_callable(obj: Any, seen: set[int], depth: int) -> JsonValue:
    kind = "class" if isinstance(obj, type) else "function"
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    module = getattr(obj, "__module__", None)
    if not isinstance(name, str):
        return safe_repr(obj)
    return f"<{kind} {module}.{name}>" if isinstance(module, str) else f"<{kind} {name}>"


def _str(obj: Any, seen: set[int], depth: int) -> JsonValue:
    return str(obj)


def _isoformat(obj: Any, seen: set[int], depth: int) -> JsonValue:
    return str(obj.isoformat())


_ENCODERS: dict[type, Encoder] = {
    str: lambda o, s, d: str.__str__(o),
    bool: lambda o, s, d: bool(o),
    int: _encode_int,
    float: _encode_float,
    type(None): lambda o, s, d: None,
    dict: _encode_mapping,
    list: _encode_items,
    tuple: _encode_items,
    set: _encode_set,
    frozenset: _encode_set,
    bytes: _encode_bytes,
    bytearray: _encode_bytes,
    memoryview: _encode_bytes,
    enum.Enum: lambda o, s, d: _encode(o.value, s, d),
    datetime.datetime: _isoformat,
    datetime.date: _isoformat,
    datetime.time: _isoformat,
    datetime.timedelta: lambda o, s, d: o.total_seconds(),
    uuid.UUID: _str,
    PurePath: _str,
    re.Pattern: lambda o, s, d: _encode(o.pattern, s, d),
    range: lambda o, s, d: repr(o),
    BaseException: _encode_exception,
    type: _encode_callable,
    types.FunctionType: _encode_callable,
    types.BuiltinFunctionType: _encode_callable,
    types.MethodType: _encode_callable,
    types.GeneratorType: lambda o, s, d: safe_repr(o),
    types.CoroutineType: lambda o, s, d: safe_repr(o),
}
_RESOLVED: dict[type, Encoder] = {}
_optional_loaded: set[str] = set()


def _load_optional_encoders() -> None:
    """Register encoders for modules, once each, after the user has imported them.

    A `Decimal` or an IP address can only be encoded once its module is loaded, so `decimal` and
    `ipaddress` (several ms to import) are not loaded by mastrace itself.
    """
    if "decimal" not in _optional_loaded and "decimal" in sys.modules:
        _optional_loaded.add("decimal")
        _ENCODERS[sys.modules["decimal"].Decimal] = _str
    if "ipaddress" not in _optional_loaded and "ipaddress" in sys.modules:
        _optional_loaded.add("ipaddress")
        ip = sys.modules["ipaddress"]
        for name in (
            "IPv4Address",
            "IPv6Address",
            "IPv4Network",
            "IPv6Network",
            "IPv4Interface",
            "IPv6Interface",
        ):
            _ENCODERS[getattr(ip, name)] = _str
    if "pydantic" not in _optional_loaded and "pydantic" in sys.modules:
        _optional_loaded.add("pydantic")
        with suppress(ModuleNotFoundError, ImportError):
            import pydantic

            _ENCODERS[pydantic.BaseModel] = _encode_pydantic
            _ENCODERS[pydantic.SecretStr] = _str
            _ENCODERS[pydantic.SecretBytes] = _str


def _resolve(cls: type) -> Encoder:
    _load_optional_encoders()
    for base in cls.__mro__:
        encoder = _ENCODERS.get(base)
        if encoder is not None:
            return encoder
    if dataclasses.is_dataclass(cls):
        return _encode_dataclass
    if issubclass(cls, Mapping):
        return _encode_mapping
    if issubclass(cls, Set):
        return _encode_set
    if issubclass(cls, Sequence):
        return _encode_items
    return lambda o, s, d: safe_repr(o)


def _encode(obj: Any, seen: set[int], depth: int) -> JsonValue:
    cls = type(obj)
    if cls is str or cls is bool or obj is None:
        return obj  # type: ignore[no-any-return]
    try:
        encoder = _RESOLVED.get(cls)
        if encoder is None:
            if len(_RESOLVED) > _MAX_RESOLVED:  # classes made on the fly must not grow this forever
                _RESOLVED.clear()
            encoder = _RESOLVED[cls] = _resolve(cls)
        return encoder(obj, seen, depth)
    except Exception:
        return safe_repr(obj)


def to_json_value(obj: Any, seen: set[int] | None = None) -> JsonValue:
    """Convert any value to a JSON-safe tree of dicts, lists, strings, numbers, booleans and None.

    Containers repeated on the current path become `"<cycle>"`; nesting deeper than `MAX_DEPTH`
    becomes `"<max depth reached>"`; non-finite floats become `"NaN"`, `"Infinity"` or
    `"-Infinity"`; an object with no known encoding becomes its repr. Never raises.

    Args:
        obj: The value to convert.
        seen: Ids of the containers enclosing `obj` (for encoders that recurse).

    Example:
        >>> to_json_value({"tags": {"b", "a"}, "ratio": float("nan")})
        {'tags': ['a', 'b'], 'ratio': 'NaN'}
    """
    return _encode(obj, set() if seen is None else seen, 0)


def _default(obj: Any) -> JsonValue:
    return to_json_value(obj)


def _c_encoder(sort_keys: bool) -> Callable[[Any], str]:
    """A reusable C encoder: `json.JSONEncoder.encode` builds one per call, which doubles the cost
    of encoding a small attribute dict. It checks no cycles (a cycle raises RecursionError, and the
    value then takes the `to_json_value` path, which marks cycles)."""
    plain = json.JSONEncoder(
        ensure_ascii=False, separators=(",", ":"), allow_nan=False, sort_keys=sort_keys, default=_default
    )
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython always has the accelerator
        return plain.encode
    try:
        encoder = make(
            None, _default, json.encoder.encode_basestring, None, ":", ",", sort_keys, False, False
        )
    except TypeError:  # pragma: no cover - another accelerator signature: the public, slower path
        return plain.encode

    def encode(value: Any) -> str:
        if type(value) is str:  # the C encoder only takes containers
            return plain.encode(value)
        return "".join(encoder(value, 0))

    return encode


_compact_encode = _c_encoder(sort_keys=False)
_sorted_encode = _c_encoder(sort_keys=True)

_orjson: Any
try:  # optional (`mastrace[speed]`): several times faster on attribute dicts than the standard library
    import orjson as _orjson

    # Types the standard library path spells its own way go that way (orjson would encode them).
    _ORJSON_OPTIONS = (
        _orjson.OPT_PASSTHROUGH_DATETIME
        | _orjson.OPT_PASSTHROUGH_DATACLASS
        | _orjson.OPT_PASSTHROUGH_SUBCLASS
    )
except ImportError:  # pragma: no cover - exercised by the tests through `_orjson = None`
    _orjson = None
    _ORJSON_OPTIONS = 0


def dumps_json(value: Any, *, sort_keys: bool = False) -> str:
    """Serialise any value to compact JSON: the one encoder for snapshots, attributes and store rows.

    Never raises. One rule each, whichever path encodes: NaN and the infinities become the strings
    `"NaN"`, `"Infinity"` and `"-Infinity"`; bytes, datetimes, sets, dataclasses, cycles and
    other types are spelled as `to_json_value` spells them; a lone surrogate (which UTF-8 cannot
    hold) becomes U+FFFD. With `orjson` installed, unsorted output comes from it whenever it would
    write the same values (it refuses big ints, odd keys and types and lone surrogates, and writes
    NaN as `null`: those go the standard library way). Sorted output (canonical snapshots, whose
    hash must not depend on what is installed) always comes from the standard library.

    Example:
        >>> dumps_json({"model": "gpt-4o", "stop": ("\\n",), "seed": None})
        '{"model":"gpt-4o","stop":["\\\\n"],"seed":null}'
    """
    if _orjson is not None and not sort_keys:
        try:
            out: bytes = _orjson.dumps(value, option=_ORJSON_OPTIONS)
        except TypeError:
            pass
        else:
            if b"null" not in out:  # NaN would be `null`; a real None goes the other way too
                return out.decode("utf-8")
    encode = _sorted_encode if sort_keys else _compact_encode
    try:
        text = encode(value)
    except (ValueError, TypeError, RecursionError):  # NaN, cycles, odd keys: normalise first
        try:
            text = encode(to_json_value(value))
        except Exception:  # pragma: no cover - to_json_value output is always encodable
            text = encode(safe_repr(value))
    return text if utf8_safe(text) else SURROGATE.sub("\ufffd", text)


def loads_json(text: str | bytes) -> Any:
    """Parse JSON text (with `orjson` when installed, else the standard library; both read what
    `dumps_json` writes). Raises ValueError on invalid JSON."""
    if _orjson is not None:
        try:
            return _orjson.loads(text)
        except ValueError:  # e.g. a bare NaN, which only the standard library reads
            pass
    return json.loads(text)


def json_schema(attrs: Mapping[str, str] | Iterable[str]) -> str:
    """Logfire's `logfire.json_schema` value for attributes whose values are JSON strings.

    Args:
        attrs: Attribute key → JSON text (the type is read from the first character), or just
            the keys (each is then declared an object).
    """
    properties: dict[str, dict[str, str]] = {}
    if type(attrs) is dict or isinstance(attrs, Mapping):  # a dict without the ABC check: every span
        # Spans of one kind declare the same keys with the same types, span after span: the text is
        # built once per such set (this runs as every span with a JSON attribute ends).
        if len(attrs) == 1:  # the usual declaration: one JSON attribute
            ((key, text),) = attrs.items()
            kinds: tuple[tuple[str, str], ...] = ((key, _first_char(text)),)
        else:
            kinds = tuple((key, _first_char(text)) for key, text in attrs.items())
        known = _SCHEMAS.get(kinds)
        if known is not None:
            return known
        for key, first in kinds:
            properties[key] = _SCHEMA_OF.get(first, {})
        text = dumps_json({"type": "object", "properties": properties})
        if len(_SCHEMAS) >= _MAX_SCHEMAS:
            _SCHEMAS.clear()
        _SCHEMAS[kinds] = text
        return text
    for key in attrs:
        properties[key] = {"type": "object"}
    return dumps_json({"type": "object", "properties": properties})


_SCHEMAS: dict[tuple[tuple[str, str], ...], str] = {}
_MAX_SCHEMAS = 256
_SCHEMA_OF = {"[": {"type": "array"}, "{": {"type": "object"}}


def _first_char(text: Any) -> str:
    if not isinstance(text, str):
        return ""
    first = text[:1]
    return text.lstrip()[:1] if first.isspace() else first  # no copy of a long text to read one char


def schema_for(text: Any) -> dict[str, str]:
    """The `logfire.json_schema` property for one JSON text, read from its first character."""
    return dict(_SCHEMA_OF.get(_first_char(text), {}))


# -- capping -------------------------------------------------------------------------------------


def truncation_marker(removed: int) -> str:
    """The text appended where `removed` characters were cut off."""
    return f"…[truncated {removed} chars]"


def cap_string(s: str, limit: int) -> str:
    """Return `s` if it fits in `limit` characters, else a prefix followed by a truncation marker.

    The result is at most `limit` characters long, unless `limit` is shorter than the marker.

    Example:
        >>> cap_string("x" * 100, 40)
        'xxxxxxxxxxxxxxxxxx…[truncated 82 chars]'
    """
    if len(s) <= limit:
        return s
    keep = max(limit - len(truncation_marker(len(s))), 0)
    return s[:keep] + truncation_marker(len(s) - keep)


def _leaf_steps(limit: int) -> list[int]:
    steps = sorted({limit // 2, limit // 8, limit // 32, 1_024, 256, 64}, reverse=True)
    return [s for s in steps if 64 <= s <= limit // 2] or [64]


def cap_json(text: str, limit: int, *, string_limit: int | None = None) -> tuple[str, bool]:
    """Bound a JSON string to `limit` characters while keeping it valid JSON.

    Long strings inside are shortened first (each with a truncation marker); if the document is
    still too large it is replaced by `{"mastrace.truncated": true, "chars": N, "preview": "..."}`.
    Text that does not parse as JSON is capped as a plain string to `string_limit`.

    Args:
        text: The JSON text.
        limit: The most characters kept for JSON text.
        string_limit: The most characters kept when `text` is not JSON (default `limit`).

    Returns:
        The capped text and whether anything was cut.

    Example:
        >>> cap_json('{"prompt": "' + "x" * 500 + '"}', 200)[0][:40]
        '{"prompt":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxx'
    """
    plain = limit if string_limit is None else min(string_limit, limit)
    if len(text) <= plain:
        return text, False
    try:
        value = json.loads(text)
    except Exception:
        return cap_string(text, plain), True
    if len(text) <= limit:
        return text, False
    try:
        for step in _leaf_steps(limit):
            shortened = dumps_json(_shorten_leaves(value, step))
            if len(shortened) <= limit:
                return shortened, True
    except Exception:  # absurdly deep documents: fall back to the preview
        pass
    return _preview_object(text, limit), True


def _shorten_leaves(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return cap_string(value, limit)
    if isinstance(value, list):
        return [_shorten_leaves(v, limit) for v in value]
    if isinstance(value, dict):
        return {cap_string(k, limit): _shorten_leaves(v, limit) for k, v in value.items()}
    return value


def _preview_object(text: str, limit: int) -> str:
    """A small JSON object standing in for `text`, as long as fits in `limit` characters."""
    budget = max(limit - 80, 0)
    while True:
        preview = cap_string(text, budget) if budget else ""
        out = dumps_json({TRUNCATED_KEY: True, "chars": len(text), "preview": preview})
        if len(out) <= limit or not budget:
            return out
        # Escaping can lengthen the preview; shrink in proportion and try again.
        budget = max(budget - (len(out) - limit) - 8, 0)


# -- OpenTelemetry attribute values -----------------------------------------------------------------
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1  # OTLP carries attribute ints as int64
SURROGATE = re.compile("[\ud800-\udfff]")
"""A lone surrogate: text holding one cannot be written as UTF-8."""


def utf8_safe(text: str) -> bool:
    """Whether `text` can be written as UTF-8 (has no lone surrogate), at C speed."""
    return text.isascii() or SURROGATE.search(text) is None


_PRIMITIVES = (str, bool, int, float)


def coerce_value(value: Any) -> tuple[AttributeValue | None, bool]:
    """A valid OpenTelemetry attribute value for `value`, and whether it became a JSON string.

    `None` gives `(None, False)`: the attribute is dropped.
    """
    t = type(value)
    if t is str or t is bool or t is float:
        return value, False
    if t is int:
        return (value, False) if _INT_MIN <= value <= _INT_MAX else (str(to_json_value(value)), False)
    if value is None:
        return None, False
    if t is tuple or t is list:
        return _coerce_sequence(value)
    for base in _PRIMITIVES:  # subclasses: enums with a str/int mixin, numpy scalars
        if isinstance(value, base):
            return coerce_value(base.__str__(value) if base is str else base(value))
    if isinstance(value, (Mapping, Set, list, tuple)):
        return dumps_json(value), True
    encoded = to_json_value(value)
    if isinstance(encoded, (dict, list)):  # dataclasses, pydantic models, other containers
        return dumps_json(encoded), True
    return coerce_value(encoded)


def _coerce_sequence(value: Sequence[Any]) -> tuple[AttributeValue | None, bool]:
    kinds = {type(v) for v in value if v is not None}
    if not kinds:
        return tuple(value), False  # empty, or only None (allowed inside OTel sequences)
    if len(kinds) == 1:
        kind = next(iter(kinds))
        if kind is int and any(v is not None and not _INT_MIN <= v <= _INT_MAX for v in value):
            return tuple(None if v is None else str(v) for v in value), False
        if kind in _PRIMITIVES:
            return (value if type(value) is tuple else tuple(value)), False
    return dumps_json(value), True
