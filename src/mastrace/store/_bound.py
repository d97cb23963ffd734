"""The per-row byte bound of the local store: a line too long for any reader is shrunk before it is written.

DuckDB's JSON reader refuses an object over 16 MB, and one such line used to make the whole store
unreadable. The writer therefore keeps every line under `DEFAULT_MAX_ROW_BYTES` (configurable, at
most `MAX_ROW_BYTES_LIMIT`): a line over the bound is decoded, its largest values are cut (strings
get the visible `…[truncated N chars]` marker, long lists and objects lose their last items) until
it fits, and `mastrace.truncated` is set on the span. Ids, times, kind, level and status are never
touched. This runs only for the rare line over the bound, so it favours being exact over being fast.
"""

from __future__ import annotations

import json
from typing import Any, Final

from .. import semconv
from ..tracing._snapshot import dumps_json, loads_json, truncation_marker

__all__ = [
    "DEFAULT_MAX_ROW_BYTES",
    "MAX_ROW_BYTES_LIMIT",
    "MIN_ROW_BYTES",
    "bound_line",
    "check_max_row_bytes",
]

DEFAULT_MAX_ROW_BYTES: Final = 1_000_000
"""The default bound of one store line, in bytes of UTF-8 (newline included)."""
MAX_ROW_BYTES_LIMIT: Final = 8 * 1024 * 1024
"""The largest bound a writer accepts: half of what DuckDB's JSON reader reads (16 MiB)."""
MIN_ROW_BYTES: Final = 4_096
"""The smallest bound a writer accepts: room for a span's identity and a few short values."""

# Fields a line keeps as they are: what makes it a span, and the fixed-size columns.
_KEPT: Final = frozenset(
    {
        "trace_id",
        "span_id",
        "parent_span_id",
        "start_ns",
        "end_ns",
        "created_ns",
        "level",
        "span_type",
        "otel_kind",
        "otel_status_code",
        "is_exception",
        "process_pid",
    }
)
_FLOOR: Final = 48  # the least a cut string or container is given: its marker fits in it
_ROOM: Final = len(f',"{semconv.MASTRACE_TRUNCATED}":true') + 2  # added to `attributes` afterwards


def check_max_row_bytes(value: int) -> int:
    """`value` when it is a valid row bound, else ValueError saying what is accepted."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(value)
    if not MIN_ROW_BYTES <= value <= MAX_ROW_BYTES_LIMIT:
        raise ValueError(f"expected a whole number of bytes from {MIN_ROW_BYTES} to {MAX_ROW_BYTES_LIMIT}")
    return value


def _size(value: Any) -> int:
    """Bytes `value` takes in a store line (compact JSON, UTF-8)."""
    if type(value) is str:
        if value.isprintable() and '"' not in value and "\\" not in value:  # nothing to escape
            return (len(value) if value.isascii() else len(value.encode("utf-8", "replace"))) + 2
        return len(_string(value).encode("utf-8", "replace"))
    return len(dumps_json(value).encode("utf-8", "replace"))


def _string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _cut_string(text: str, budget: int, size: int | None = None) -> str:
    """`text` shortened, marker included, to take at most `budget` bytes as a JSON string."""
    size = _size(text) if size is None else size
    if size <= budget:
        return text
    if size == len(text) + 2:  # plain ASCII: one byte a character, no escape
        keep = max(0, budget - 2 - len(truncation_marker(len(text))))
        return text[:keep] + truncation_marker(len(text) - keep)
    keep = len(text)
    while True:
        # Shrink in proportion to the bytes each character takes (escapes take up to 6).
        keep = max(
            0, min(keep - 1, int(keep * (budget - 2) / max(size, 1)) - len(truncation_marker(len(text))))
        )
        cut = text[:keep] + truncation_marker(len(text) - keep)
        size = _size(cut)
        if size <= budget or keep == 0:
            return cut


def _fit(value: Any, budget: int, size: int | None = None) -> Any:
    """`value` (taking `size` bytes, when known) made to take about `budget` bytes or fewer; numbers,
    booleans and null stay as they are."""
    if (_size(value) if size is None else size) <= budget:
        return value
    if type(value) is str:
        return _cut_string(value, budget, size)
    if isinstance(value, list):
        return _fit_list(value, budget)
    if isinstance(value, dict):
        return _fit_dict(value, budget)
    return value


def _cap(sizes: list[int], floors: list[int], room: int) -> int | None:
    """The largest per-item size cap for which the capped sizes add up to `room`, or None if even
    the floors do not fit (water-filling: small items stay whole, the largest share what is left)."""
    if sum(floors) > room:
        return None
    low, high = 0, max(sizes, default=0)
    while low < high:  # the largest cap that fits
        mid = (low + high + 1) // 2
        if sum(max(f, min(s, mid)) for s, f in zip(sizes, floors, strict=True)) <= room:
            low = mid
        else:
            high = mid - 1
    return low


def _floor(value: Any, size: int) -> int:
    if type(value) is str or isinstance(value, (list, dict)):
        return min(size, _FLOOR)
    return size  # a number cannot be cut


def _fit_list(items: list[Any], budget: int) -> list[Any]:
    sizes = [_size(item) for item in items]
    floors = [_floor(item, size) for item, size in zip(items, sizes, strict=True)]
    cap = _cap(sizes, floors, budget - 1 - len(items))  # brackets and commas
    if cap is not None:
        return [
            _fit(item, cap, size) if size > cap else item for item, size in zip(items, sizes, strict=True)
        ]
    # Too many items even at their floors: keep the first ones, and a list of text says where it was cut.
    marker = _string(f"…[truncated {len(items)} items]") if all(type(i) is str for i in items) else ""
    room = budget - 1 - (len(marker) + 1 if marker else 0)
    keep = used = 0
    for floor in floors:
        if used + floor + 1 > room:
            break
        used += floor + 1
        keep += 1
    cap = _cap(sizes[:keep], floors[:keep], room - keep) or 0
    out = [
        _fit(item, cap, size) if size > cap else item for item, size in zip(items[:keep], sizes, strict=False)
    ]
    if marker:
        out.append(f"…[truncated {len(items) - keep} items]")
    return out


def _fit_dict(mapping: dict[str, Any], budget: int) -> dict[str, Any]:
    keys = [_cut_string(str(key), max(_FLOOR, budget // 4)) for key in mapping]
    values = list(mapping.values())
    key_sizes = [_size(key) + 1 for key in keys]  # the key and its colon
    sizes = [_size(value) for value in values]
    floors = [_floor(value, size) for value, size in zip(values, sizes, strict=True)]
    keep = len(values)
    while keep:
        room = budget - 2 - (keep - 1) - sum(key_sizes[:keep])
        cap = _cap(sizes[:keep], floors[:keep], room) if room > 0 else None
        if cap is not None:
            return {
                key: (_fit(value, cap, size) if size > cap else value)
                for key, value, size in zip(keys[:keep], values[:keep], sizes[:keep], strict=True)
            }
        keep -= 1
    return {}


def _minimal(row: dict[str, Any]) -> dict[str, Any]:
    """What is left of `row` when nothing else fits: its identity, a short name and the flag."""
    out = {key: value for key, value in row.items() if key in _KEPT}
    out["span_name"] = _cut_string(str(row.get("span_name") or ""), 256)
    out["attributes"] = {semconv.MASTRACE_TRUNCATED: True}
    return out


def _encode(row: dict[str, Any]) -> str:
    return dumps_json(row) + "\n"


def bound_line(line: str, limit: int) -> str:
    """`line` (one store line, newline included) shrunk to at most `limit` bytes of UTF-8.

    The largest values are cut first; every cut value says so (a string ends with the truncation
    marker, a list of strings ends with an item saying how many were dropped) and the span gets
    `mastrace.truncated = true`. Ids, times, kind, level and status stay as they are.
    """
    try:
        row = loads_json(line)
    except (ValueError, RecursionError):
        row = None
    if not isinstance(row, dict):  # not a line the row builder wrote: nothing of it can be trusted
        return ""
    fixed = {key: value for key, value in row.items() if key in _KEPT}
    loose = {key: value for key, value in row.items() if key not in _KEPT}
    budget = limit - _size(fixed) - 1 - _ROOM  # the newline, and the flag added below
    for _ in range(4):
        fitted = _fit(loose, max(budget, 2))
        attributes = fitted.get("attributes")
        fitted["attributes"] = {
            **(attributes if isinstance(attributes, dict) else {}),
            semconv.MASTRACE_TRUNCATED: True,
        }
        text = _encode({**fixed, **fitted})
        excess = len(text.encode("utf-8", "replace")) - limit
        if excess <= 0:
            return text
        budget -= excess + 64  # the estimate fell short (escapes, separators): try again with less
    return _encode(_minimal(row))
