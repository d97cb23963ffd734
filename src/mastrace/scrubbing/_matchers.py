"""The first pass of the engine: one scan of a text that says which rules of the table can match it.

Three interchangeable matchers make the same decision; only the speed differs:

- `PythonMatcher` (always there): substring tests and one character translation in C, plus a look at
  each long run of token characters;
- `HyperscanMatcher` (`pip install 'mastrace[speed]'` on x86-64): every gate compiled into one
  Hyperscan database, scanned once in linear time;
- `Re2Matcher` (`google-re2`): the same patterns as one `re2.Set`.

Each gate is exactly a pattern: a word rule's prefix at the start of a run of `MIN_TOKEN_LEN` token
characters, a text rule's hint anywhere, the assignment words anywhere. A shape rule's hint is looked
for anywhere by the compiled matchers and only inside long runs by `PythonMatcher`: the engine accepts a
shape match only inside such a run, so both find the same secrets.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from ._table import ASSIGNMENT_WORDS, MIN_TOKEN_LEN, RUN, mentions_secret_word

__all__ = ["Gated", "HyperscanMatcher", "Matcher", "PythonMatcher", "Re2Matcher", "available", "make"]


class Gated(Protocol):
    """What a matcher needs to know of a compiled rule."""

    @property
    def gate(self) -> str: ...
    @property
    def keys(self) -> tuple[str, ...]: ...
    @property
    def index(self) -> int: ...


class Matcher(Protocol):
    """Picks the rules a text needs; `assignments` says whether to look for secret-named assignments."""

    name: str

    def select(self, text: str, low: str) -> tuple[list[Any], bool]: ...


# Run characters become "a", others a space: a run of MIN_TOKEN_LEN or more is then a substring test.
_RUNS = str.maketrans({chr(c): ("a" if re.fullmatch(f"[{RUN}]", chr(c)) else " ") for c in range(128)})
_LONG_RUN = "a" * MIN_TOKEN_LEN
_RUN_END = re.compile("[^a]")


def long_runs(low: str) -> Iterator[str]:
    """Each run of at least `MIN_TOKEN_LEN` token characters in ASCII `low`, found with C-level searches."""
    runs = low.translate(_RUNS)
    i = runs.find(_LONG_RUN)
    while i != -1:
        stop = _RUN_END.search(runs, i)
        end = len(runs) if stop is None else stop.start()
        yield low[i:end]
        i = runs.find(_LONG_RUN, end)


def _ordered(chosen: list[Any]) -> list[Any]:
    return sorted(set(chosen), key=lambda rule: rule.index) if len(chosen) > 1 else chosen


class PythonMatcher:
    """The gates in plain Python: no dependency, a few microseconds per KB."""

    name = "python"

    def __init__(self, rules: Sequence[Gated]) -> None:
        self.by_prefix: dict[str, list[Gated]] = {}
        self.shapes: list[tuple[tuple[str, ...], Gated]] = []
        text: dict[str, list[Gated]] = {}
        for rule in rules:
            if rule.gate == "word":
                for key in rule.keys:
                    self.by_prefix.setdefault(key, []).append(rule)
            elif rule.gate == "shape":
                self.shapes.append((rule.keys, rule))
            else:
                for key in rule.keys:
                    text.setdefault(key, []).append(rule)
        self.prefixes = tuple(self.by_prefix)
        self.text = list(text.items())

    def select(self, text: str, low: str) -> tuple[list[Any], bool]:
        chosen: list[Gated] = []
        if len(low) >= MIN_TOKEN_LEN:
            for run in long_runs(low):
                if run.startswith(self.prefixes):
                    for prefix, rules in self.by_prefix.items():
                        if run.startswith(prefix):
                            chosen.extend(rules)
                chosen.extend(rule for keys, rule in self.shapes if any(k in run for k in keys))
        for key, rules in self.text:
            if key in low:
                chosen.extend(rules)
        return _ordered(chosen), mentions_secret_word(low)


def gate_patterns(rules: Sequence[Gated]) -> tuple[list[str], list[list[Gated] | None]]:
    """Every gate as one case-insensitive pattern, and the rules each one selects (None: assignments)."""
    patterns: dict[str, list[Gated] | None] = {re.escape(w): None for w in ASSIGNMENT_WORDS}
    for rule in rules:
        for key in rule.keys:
            if rule.gate == "word":
                need = max(0, MIN_TOKEN_LEN - len(key))
                tail = f"[{RUN}]{{{need}}}" if need else ""
                pattern = f"(?:^|[^{RUN}]){re.escape(key)}{tail}"
            else:
                pattern = re.escape(key)
            selected = patterns.setdefault(pattern, [])
            if selected is None:  # a hint that is also an assignment word
                patterns[pattern] = selected = []
            selected.append(rule)
    return list(patterns), list(patterns.values())


def _select(ids: Sequence[int], selects: list[list[Gated] | None]) -> tuple[list[Any], bool]:
    chosen: list[Gated] = []
    for i in ids:
        rules = selects[i]
        if rules is not None:
            chosen.extend(rules)
    return _ordered(chosen), any(i < len(ASSIGNMENT_WORDS) for i in ids)


class HyperscanMatcher:
    """Every gate in one Hyperscan database: one linear scan, at several GB/s, whatever the table's size."""

    name = "hyperscan"

    def __init__(self, rules: Sequence[Gated]) -> None:
        import hyperscan

        patterns, self.selects = gate_patterns(rules)
        flag = hyperscan.HS_FLAG_CASELESS | hyperscan.HS_FLAG_SINGLEMATCH
        self.db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self.db.compile(
            expressions=[p.encode() for p in patterns],
            ids=list(range(len(patterns))),
            elements=len(patterns),
            flags=[flag] * len(patterns),
        )
        self._scratch = hyperscan.Scratch(self.db)
        self._local = threading.local()

    def select(self, text: str, low: str) -> tuple[list[Any], bool]:
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:  # a scratch space serves one thread at a time
            scratch = self._local.scratch = self._scratch.clone()
        ids: list[int] = []
        self.db.scan(text.encode("ascii"), match_event_handler=_on_match, context=ids, scratch=scratch)
        return _select(ids, self.selects)


def _on_match(id: int, start: int, end: int, flags: int, ids: object) -> None:
    ids.append(id)  # type: ignore[attr-defined]


class Re2Matcher:
    """Every gate in one `re2.Set`: one linear scan by RE2's automaton."""

    name = "re2"

    def __init__(self, rules: Sequence[Gated]) -> None:
        import re2

        patterns, self.selects = gate_patterns(rules)
        options = re2.Options()
        options.max_mem = 64 << 20
        self.set = re2.Set.SearchSet(options)
        for pattern in patterns:
            self.set.Add("(?i)" + pattern)
        self.set.Compile()

    def select(self, text: str, low: str) -> tuple[list[Any], bool]:
        return _select(self.set.Match(text.encode("ascii")), self.selects)


_KINDS: dict[str, type[PythonMatcher] | type[HyperscanMatcher] | type[Re2Matcher]] = {
    "hyperscan": HyperscanMatcher,
    "re2": Re2Matcher,
    "python": PythonMatcher,
}


def available() -> list[str]:
    """The matchers this interpreter can build, fastest first."""
    names = []
    for name, module in (("hyperscan", "hyperscan"), ("re2", "re2")):
        try:
            __import__(module)
        except Exception:
            continue
        names.append(name)
    return [*names, "python"]


def make(rules: Sequence[Gated], name: str | None = None) -> Matcher:
    """The matcher called `name`, or the fastest one available (falling back to `PythonMatcher`)."""
    for candidate in [name] if name else available():
        try:
            return _KINDS[candidate](rules)
        except Exception:
            if name:
                raise
    return PythonMatcher(rules)
