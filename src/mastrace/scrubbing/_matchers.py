"""The first pass of the engine: one scan of a text that says which rules of the table can match it.

Three interchangeable matchers make the same decision; only the speed differs:

- `PythonMatcher` (always there): substring tests and one character translation in C, plus a look at
  each long run of token characters;
- `HyperscanMatcher` (`pip install 'mastrace[speed]'` on x86-64): every gate compiled into one
  Hyperscan database, scanned once in linear time;
- `Re2Matcher` (`google-re2`): the same patterns as one `re2.Set`.

Every matcher selects the same rules: a word rule where its prefix starts a run of `MIN_TOKEN_LEN`
token characters (the compiled matchers report the prefix, the run's length is checked after), a text
rule when one of its hints occurs, assignments where a secret word precedes a separator. A shape rule,
or a text rule whose hints are common (`=`, `ac`), is selected by `PythonMatcher` by its hints, by the
compiled matchers when a relaxed form of its whole pattern matches (look-arounds dropped, so it matches
wherever the pattern does); the engine keeps a match only where the hint is (a shape match inside a long
run holding it), so all find the same secrets.
"""

from __future__ import annotations

import importlib.util
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
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
    @property
    def regex(self) -> re.Pattern[str] | None: ...
    @property
    def on_low(self) -> bool: ...


@dataclass
class Selection:
    """What the first pass found in a text.

    Attributes:
        rules: Text and shape rules to search the whole text for.
        starts: Where a word rule's prefix starts a long run: (position, rule), for an anchored match.
        assignments: Whether the text mentions a secret word (look for secret-named assignments).
        low: The lower-cased text, when the matcher made it.
        separators: Where an `=` or `:` follows a name holding a secret word, when the matcher knows
            (otherwise every separator of a text that mentions one is looked at).
    """

    rules: list[Any]
    starts: list[tuple[int, Any]]
    assignments: bool
    low: str | None = None
    separators: list[int] | None = None


NOTHING = Selection([], [], False)
"""The selection of a text no gate matched (shared: never modified)."""


class Matcher(Protocol):
    """One pass over an ASCII text that picks the rules it needs and where word rules may start."""

    name: str

    def select(self, text: str) -> Selection: ...


# Run characters become "a", others a space: a run of MIN_TOKEN_LEN or more is then a substring test.
_RUNS = str.maketrans({chr(c): ("a" if re.fullmatch(f"[{RUN}]", chr(c)) else " ") for c in range(128)})
_LONG_RUN = "a" * MIN_TOKEN_LEN
_RUN_END = re.compile("[^a]")


def long_runs(low: str) -> Iterator[tuple[int, str]]:
    """Each run of at least `MIN_TOKEN_LEN` token characters in ASCII `low` and where it starts,
    found with C-level searches."""
    runs = low.translate(_RUNS)
    i = runs.find(_LONG_RUN)
    while i != -1:
        stop = _RUN_END.search(runs, i)
        end = len(runs) if stop is None else stop.start()
        yield i, low[i:end]
        i = runs.find(_LONG_RUN, end)


_RUN_SET = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+~-")


def word_starts(low: str, prefix: str) -> Iterator[int]:
    """Where `prefix` starts a run of `MIN_TOKEN_LEN` token characters in ASCII `low` (the word gate)."""
    i = low.find(prefix)
    while i != -1:
        if (not i or low[i - 1] not in _RUN_SET) and starts_run(low, i, prefix):
            yield i
        i = low.find(prefix, i + 1)


def _ordered(chosen: list[Any]) -> list[Any]:
    return sorted(dict.fromkeys(chosen), key=_index) if len(chosen) > 1 else chosen


def _index(rule: Gated) -> int:
    return rule.index


_SENTINELS = "$~/=:_.-"


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
        # Hints grouped by a rare character they hold: a group is skipped when its character is absent.
        grouped: dict[str, list[tuple[str, list[Gated]]]] = {}
        for key, selected in text.items():
            sentinel = next((c for c in _SENTINELS if c in key), key)
            grouped.setdefault(sentinel, []).append((key, selected))
        self.text = list(grouped.items())

    def select(self, text: str) -> Selection:
        low = text.lower()
        chosen: list[Gated] = []
        starts: list[tuple[int, Gated]] = []
        if len(low) >= MIN_TOKEN_LEN:
            for at, run in long_runs(low):
                if run.startswith(self.prefixes):
                    for prefix, rules in self.by_prefix.items():
                        if run.startswith(prefix):
                            starts.extend((at, rule) for rule in rules)
                chosen.extend(rule for keys, rule in self.shapes if any(k in run for k in keys))
        for sentinel, groups in self.text:
            if sentinel in low:
                for key, rules in groups:
                    if key in low:
                        chosen.extend(rules)
        # An assignment needs a separator: most prose without one is spared the secret words' search.
        assignments = ("=" in low or ":" in low) and mentions_secret_word(low)
        return Selection(_ordered(chosen), starts, assignments, low)


ASSIGNMENT_GATE = "(?:" + "|".join(ASSIGNMENT_WORDS) + r")[A-Za-z0-9_.-]*[\"']?[ \t]{0,3}[=:]"
"""A secret word, then the rest of a name, then a separator: where a secret-named assignment can be."""


@dataclass
class _Gate:
    pattern: str
    caseless: bool
    rules: list[Any]
    prefix: str = ""  # a word gate's prefix: reported where it follows no run character


def gate_patterns(rules: Sequence[Gated]) -> list[_Gate | None]:
    """Every gate as a pattern, with the rules it selects; the first one (None) is `ASSIGNMENT_GATE`.

    Cheap to compile (milliseconds for the whole table): a word rule's prefix (that it starts a long
    run is checked afterwards, as `word_starts` does), a text rule's hints, and the whole pattern,
    relaxed, of a shape rule and of a text rule whose hints are too common to select it by (`.`, `=`,
    `ac`).
    """
    gates: dict[tuple[str, bool], _Gate] = {}
    for rule in rules:
        if rule.gate == "word":
            for key in rule.keys:
                pattern = re.escape(key)
                gates.setdefault((pattern, True), _Gate(pattern, True, [], key)).rules.append(rule)
            continue
        weak = rule.gate == "shape" or all(len(key) <= _WEAK_HINT for key in rule.keys)
        if weak and rule.regex is not None:
            keyed = [(relax(rule.regex.pattern), rule.on_low)]
        else:
            keyed = [(re.escape(key), True) for key in rule.keys]
        for pattern, caseless in keyed:
            gates.setdefault((pattern, caseless), _Gate(pattern, caseless, [])).rules.append(rule)
    return [None, *gates.values()]


_WEAK_HINT = 3  # hints this short (`=`, `://`, `ac`) occur in most texts
_RUN_ONLY = re.compile(f"[{RUN}]+")


def starts_run(text: str, at: int, prefix: str) -> bool:
    """Whether `MIN_TOKEN_LEN` run characters (or the prefix's length, if longer) follow `at`."""
    end = at + max(len(prefix), MIN_TOKEN_LEN)
    return end <= len(text) and _RUN_ONLY.fullmatch(text, at, end) is not None


_LOOKAROUND = re.compile(r"\(\?<?[=!]")
_REPEAT = re.compile(r"(?<!\\)\{(\d+)(?:(,)(\d*))?\}")
_MAX_REPEAT = 24


def relax(pattern: str) -> str:
    """`pattern` without its look-arounds and with long counted repeats opened (`{64}` becomes
    `{24,}`): it matches wherever `pattern` does, and perhaps more, with a far smaller automaton."""
    out = []
    i = 0
    while i < len(pattern):
        found = _LOOKAROUND.match(pattern, i)
        if found is None:
            step = 2 if pattern[i] == "\\" else 1
            out.append(pattern[i : i + step])
            i += step
            continue
        depth, i = 1, found.end()
        while depth:  # skip to the closing parenthesis, minding escapes and classes
            c = pattern[i]
            if c == "\\":
                i += 1
            elif c == "[":
                i = _class_end(pattern, i)
            depth += c == "("
            depth -= c == ")"
            i += 1
    return _REPEAT.sub(_cap, "".join(out))


def _class_end(pattern: str, i: int) -> int:
    i += 2 if pattern[i + 1 : i + 2] in ("^", "]") else 1
    while pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i


def _cap(m: re.Match[str]) -> str:
    low = int(m.group(1))
    high = low if m.group(2) is None else int(m.group(3) or 1 << 30)
    return m.group(0) if high <= _MAX_REPEAT else f"{{{min(low, _MAX_REPEAT)},}}"


def _selection(found: Sequence[tuple[int, int]], gates: list[_Gate | None], text: str) -> Selection:
    """A selection from (gate index, end offset) pairs."""
    chosen: list[Gated] = []
    starts: list[tuple[int, Gated]] = []
    assignments = False
    for i, end in found:
        gate = gates[i]
        if gate is None:
            assignments = True
        elif gate.prefix:
            at = end - len(gate.prefix)
            if (not at or text[at - 1] not in _RUN_SET) and starts_run(text, at, gate.prefix):
                for rule in gate.rules:
                    starts.append((at, rule))
        else:
            chosen.extend(gate.rules)
    return Selection(_ordered(chosen), starts, assignments)


class HyperscanMatcher:
    """Every gate in one Hyperscan database: one linear scan, at several GB/s, whatever the table's size."""

    name = "hyperscan"

    def __init__(self, rules: Sequence[Gated]) -> None:
        import hyperscan

        self.gates = gate_patterns(rules)
        patterns = [(ASSIGNMENT_GATE, True, True)]
        patterns += [(g.pattern, g.caseless, bool(g.prefix)) for g in self.gates if g is not None]
        # A word gate reports every place; the others once. Prefilter mode: what Hyperscan cannot match
        # exactly (look-arounds) it matches more loosely.
        once = hyperscan.HS_FLAG_SINGLEMATCH | hyperscan.HS_FLAG_PREFILTER | hyperscan.HS_FLAG_DOTALL
        self.db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self.db.compile(
            expressions=[p.encode() for p, _, _ in patterns],
            ids=list(range(len(patterns))),
            elements=len(patterns),
            flags=[
                (0 if every else once) | (hyperscan.HS_FLAG_CASELESS if caseless else 0)
                for _, caseless, every in patterns
            ],
        )
        self._scratch = hyperscan.Scratch(self.db)
        self._local = threading.local()

    def select(self, text: str) -> Selection:
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:  # a scratch space serves one thread at a time
            scratch = self._local.scratch = self._scratch.clone()
        found: list[tuple[int, int]] = []
        self.db.scan(text.encode("ascii"), match_event_handler=_on_match, context=found, scratch=scratch)
        if not found:
            return NOTHING
        selection = _selection(found, self.gates, text)
        if selection.assignments:
            selection.separators = [end - 1 for i, end in found if i == 0]
        return selection


def _on_match(id: int, start: int, end: int, flags: int, found: object) -> None:
    found.append((id, end))  # type: ignore[attr-defined]


class Re2Matcher:
    """Every gate in one `re2.Set`: one linear scan by RE2's automaton."""

    name = "re2"

    def __init__(self, rules: Sequence[Gated]) -> None:
        import re2

        self.gates = gate_patterns(rules)
        options = re2.Options()
        options.max_mem = 64 << 20
        options.encoding = re2.Options.Encoding.LATIN1  # the text is ASCII; UTF-8 automata are far slower
        self.set = re2.Set.SearchSet(options)
        self.set.Add("(?i)" + ASSIGNMENT_GATE)
        for gate in self.gates[1:]:
            assert gate is not None
            self.set.Add(("(?is)" if gate.caseless else "(?s)") + gate.pattern)
        self.set.Compile()

    def select(self, text: str) -> Selection:
        chosen: list[Gated] = []
        starts: list[tuple[int, Gated]] = []
        assignments = False
        low = None
        for i in self.set.Match(text.encode("ascii")) or ():
            gate = self.gates[i]
            if gate is None:
                assignments = True
            elif gate.prefix:  # RE2's sets say which, not where: find where, as the gate says
                low = text.lower() if low is None else low
                starts.extend((at, rule) for at in word_starts(low, gate.prefix) for rule in gate.rules)
            else:
                chosen.extend(gate.rules)
        return Selection(_ordered(chosen), starts, assignments, low)


_KINDS: dict[str, type[PythonMatcher] | type[HyperscanMatcher] | type[Re2Matcher]] = {
    "hyperscan": HyperscanMatcher,
    "re2": Re2Matcher,
    "python": PythonMatcher,
}


def available() -> list[str]:
    """The matchers installed, fastest first (found without importing them)."""
    names = [name for name in ("hyperscan", "re2") if importlib.util.find_spec(name) is not None]
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
