"""Configuration snapshots for spans: canonical JSON, a stable hash, and a cache.

A snapshot is the output of `Registry.collect_all_configs()` without the fields that change on
every collection (`metadata`, `gathered_at`, `timestamp`), so equal configurations give equal
text and equal hashes. The text is canonical JSON (sorted keys, compact separators).

The hash identifies a *configuration*, so runs of one configuration share it: it is the first 16 hex
digits of the SHA-256 of the canonical JSON of the snapshot *without* what varies per task or
repetition, which stays in the text: the `benchmark` section (git state, Python, packages: the
environment, not the configuration), keys named in `PER_RUN_KEYS` at any depth (task ids, repetition
indices, derived per-repetition seeds, collection timestamps), and text values that are timestamps or
paths in the temporary folder.

Serialising is the expensive part, so it is done per component and cached: a component whose
configuration compares equal to the last one seen under the same key reuses its JSON fragment,
and a document made of the same fragments reuses its text and hash. An unchanged snapshot is
therefore serialised once per process.
"""

from __future__ import annotations

import copy
import hashlib
import os
import re
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..tracing._snapshot import dumps_json

__all__ = ["PER_RUN_KEYS", "VOLATILE_KEYS", "ConfigSnapshot", "SnapshotCache", "config_hash", "hashed_value"]

VOLATILE_KEYS = frozenset({"gathered_at", "timestamp"})
PER_RUN_KEYS = frozenset(
    {
        "gathered_at",
        "timestamp",
        "started_at",
        "created_at",
        "task_id",
        "task_ids",
        "repeat_idx",
        "rep_index",
        "repetition",
        "repetition_index",
        "seed",  # a model's seed derived per repetition (MASEval); `global_seed` stays in the hash
        "seeds",
        "derived_seed",
        "derived_seeds",
        "seed_log",
    }
)
"""Keys left out of the configuration hash at any depth (they stay in the snapshot's text)."""
_HASH_EXCLUDED_SECTIONS = frozenset({"benchmark"})
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
_TEMP_DIRS = tuple({tempfile.gettempdir() + os.sep, "/tmp/", "/var/tmp/"})
_PER_RUN_VALUE = "<per-run>"
_SKIPPED_SECTIONS = frozenset({"metadata"})
_DIRECT_SECTIONS = frozenset({"environment", "user", "benchmark"})
_MAX_ENTRIES = 1_024


@dataclass(frozen=True)
class ConfigSnapshot:
    """A configuration snapshot ready to put on a span.

    Attributes:
        text: Canonical JSON of the configuration.
        hash: First 16 hex digits of the SHA-256 of the canonical JSON of the snapshot without its
            per-run values (see the module's docstring).
    """

    text: str
    hash: str


def config_hash(text: str) -> str:
    """The stable hash of a canonical JSON text: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _per_run_text(value: str) -> bool:
    return bool(_TIMESTAMP.match(value)) or value.startswith(_TEMP_DIRS)


def hashed_value(value: Any) -> Any:
    """`value` as the configuration hash sees it: per-run keys removed, per-run texts replaced."""
    if isinstance(value, Mapping):
        return {k: hashed_value(v) for k, v in value.items() if k not in PER_RUN_KEYS}
    if isinstance(value, (list, tuple)):
        return [hashed_value(v) for v in value]
    if isinstance(value, str) and _per_run_text(value):
        return _PER_RUN_VALUE
    return value


def _has_per_run(value: Any) -> bool:
    if isinstance(value, Mapping):
        return any(k in PER_RUN_KEYS or _has_per_run(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_per_run(v) for v in value)
    return isinstance(value, str) and _per_run_text(value)


def _serialise(value: Any) -> str:
    """Canonical JSON of any value (the one place snapshots are serialised): sorted keys, and
    `dumps_json`'s rules for what plain JSON cannot hold."""
    return dumps_json(value, sort_keys=True)


def _stable(config: Any) -> Any:
    """`config` without its volatile top-level keys."""
    if isinstance(config, Mapping) and VOLATILE_KEYS.intersection(config):
        return {k: v for k, v in config.items() if k not in VOLATILE_KEYS}
    return config


class _Uncopied:
    """Stands for a value that could not be copied: equal to nothing, so a document holding one is
    never taken for the last one."""

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]


_UNCOPIED = _Uncopied()


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # a value whose __eq__ raises counts as changed
        return False


class SnapshotCache:
    """Turns collected configurations into `ConfigSnapshot`s, serialising only what changed.

    Thread-safe. Holds at most about a thousand fragments and documents (oldest dropped first).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fragments: OrderedDict[str, tuple[Any, str, str]] = OrderedDict()
        self._documents: OrderedDict[tuple[tuple[str, str], ...], ConfigSnapshot] = OrderedDict()
        self._last: tuple[dict[str, Any], ConfigSnapshot] | None = None

    def snapshot(self, configs: Mapping[str, Any]) -> ConfigSnapshot:
        """Build the snapshot of `configs` (the shape `Registry.collect_all_configs()` returns)."""
        last = self._last
        if last is not None and _equal(last[0], configs):
            return last[1]  # the same configuration as the last one (one run after another)
        parts: list[tuple[str, str]] = []
        hashed: list[tuple[str, str]] = []
        # The kept copies of the fragments, assembled like `configs`: equal to the next `configs`
        # when nothing changed (none is when a section is skipped, volatile or not copyable).
        kept: dict[str, Any] | None = {}
        for section in sorted(configs):
            if section in _SKIPPED_SECTIONS:
                kept = None
                continue
            value = configs[section]
            if section in _DIRECT_SECTIONS or not isinstance(value, Mapping):
                part, part_hashed, part_kept = self._fragment(section, _stable(value))
                parts.append((section, part))
                if section not in _HASH_EXCLUDED_SECTIONS and section not in PER_RUN_KEYS:
                    hashed.append((section, part_hashed))
                if kept is not None:
                    kept[section] = part_kept
                continue
            inner, inner_hashed, inner_kept = [], [], {}
            for name in sorted(value):
                part, part_hashed, inner_kept[name] = self._fragment(
                    f"{section}:{name}", _stable(value[name])
                )
                inner.append((name, part))
                if name not in PER_RUN_KEYS:
                    inner_hashed.append((name, part_hashed))
            parts.append((section, _join(inner)))
            if section not in PER_RUN_KEYS:
                hashed.append((section, _join(inner_hashed)))
            if kept is not None:
                kept[section] = inner_kept
        key = tuple(parts)
        with self._lock:
            found = self._documents.get(key)
            if found is not None:
                self._documents.move_to_end(key)
        if found is None:
            found = ConfigSnapshot(_join(parts), config_hash(_join(hashed)))
            with self._lock:
                self._documents[key] = found
                _trim(self._documents)
        if kept is not None and _equal(kept, configs):
            self._last = (kept, found)
        return found

    def _fragment(self, key: str, value: Any) -> tuple[str, str, Any]:
        """`value`'s JSON text, the text the hash sees (the same unless `value` holds per-run
        values) and our own copy of `value` (`_UNCOPIED` when it cannot be copied), all reused while
        `value` compares equal to the last one seen under `key`."""
        if value is None:  # an absent environment or user
            return "null", "null", None
        with self._lock:
            cached = self._fragments.get(key)
        if cached is not None and _equal(cached[0], value):
            return cached[1], cached[2], cached[0]
        text = _serialise(value)
        text_hashed = _serialise(hashed_value(value)) if _has_per_run(value) else text
        try:
            # Keep our own copy to compare against: the caller may mutate what it returned.
            kept = copy.deepcopy(value)
        except Exception:
            return text, text_hashed, _UNCOPIED  # not copyable: serialise it every time
        with self._lock:
            self._fragments[key] = (kept, text, text_hashed)
            self._fragments.move_to_end(key)
            _trim(self._fragments)
        return text, text_hashed, kept


def _join(items: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f"{dumps_json(k)}:{text}" for k, text in items) + "}"


def _trim(cache: OrderedDict[Any, Any]) -> None:
    while len(cache) > _MAX_ENTRIES:
        cache.popitem(last=False)
