"""The first pass in plain Python: the matcher of a default install, without `mastrace[speed]`.

It makes the compiled matchers' decision with the cheapest operations CPython has, each a C loop over
the text: `memchr` (`c in text`, `text.find(c)`), substring search, and one `bytes.translate`. What
to look for comes from each rule's pattern (`_required.requirements`), read once:

1. *Probes*: the few characters some gate string or pattern needs (`[:=]`, `-`, `~`, capitals a
   pattern matches in exact case) are looked up; so are the separators with a secret-named name
   before them. What the text holds picks a *plan* (kept, one per combination met): the tests worth
   making.
2. *Tests*: for each alternative of a rule's pattern, its gate string and the literals every match
   through it holds must be in the text. A test string holding a rare character (`--`, `-p`,
   `value=`) is looked for only in *windows* around that character's places when that costs less
   than searching the whole text; a literal with capitals is looked for in exact case.
3. *Runs*: one translation finds the runs of `MIN_TOKEN_LEN` token characters; a run's first two
   characters say which word prefixes it may start with; shape keys are looked for in the runs.
4. *Separators*: each `=` or `:` whose name before it holds a secret word.

Every test is a necessary condition of a match, so the rules left out could not have matched: the
output is that of trying every rule (a property test) and of the compiled matchers (another).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._context import FINDER_NEEDS
from ._contextual import has_candidate, service_candidate
from ._required import RARITY, UNBOUNDED, Requirement, commonness, requirements
from ._selection import NOTHING, Gated, Selection, ordered
from ._table import ASSIGNMENT_WORDS, MIN_TOKEN_LEN, mentions_secret_word, run_map

__all__ = ["PythonMatcher", "secret_separators"]

_LONG_RUN = b"a" * MIN_TOKEN_LEN
_RUN_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.+~-")
_FEW = 16  # text with more separators than this (and one per 120 characters) is read at each secret word
_CLAUSES_PER_KEY = 2
_CLAUSE_CHARS = 4
_RARE = frozenset(RARITY)
_WINDOW_CHARS = frozenset(c for c in RARITY if not c.isalnum())
_MAX_PLANS = 4096
_SEARCH_NS = 3.4  # a substring search costs about this many ns a character over (its length + 2)
_GATE_NS = 0.6  # a gate (a regular expression led by one literal character) costs about this a character
_LOW = ""  # where a test string is looked for: the whole lower-cased text,
_TEXT = "T"  # the whole text (a literal in exact case), windows around a character of `_WINDOW_CHARS`,
_NEAR = "N"  # or windows around the secret-named separators
_NEAR_REACH = 120
_SEPARATOR_AFTER = re.compile("[\"' \t]{0,4}[=:]")
_SEPARATOR = "separator"  # a probe passed when a secret-named separator was found


@dataclass
class _Entry:
    """A text or shape rule's gate string: the probes a text must pass for it to matter (`clauses`)
    and the strings it must hold (`tests`: (string, where), the gate string and its rule's literals).
    `near`: how far before and after a secret-named separator its `_NEAR` tests are."""

    key: str
    rule: Any
    clauses: tuple[frozenset[str], ...]
    tests: tuple[tuple[str, str], ...]
    shape: bool
    near: tuple[int, int] | None = None


def _entries(rule: Gated) -> list[_Entry]:
    """The entries of a text or shape rule: for each alternative of its pattern, one whose tests hold
    a key of the rule, or else one per key."""
    if rule.finder is not None:
        needs = FINDER_NEEDS.get(rule.finder, ())
    else:
        assert rule.regex is not None
        needs = requirements(rule.regex.pattern, rule.regex.flags)
    # A shape key holding a character no run holds never selects.
    keys = [key for key in rule.keys if rule.gate != "shape" or set(key) <= _RUN_CHARS]
    out = []
    for need in needs or [Requirement((), ())]:
        literals = [_test(lit, exact) for lit, exact in need.literals]
        near = dict(zip(literals, _near(need), strict=True))
        held = next((key for key in keys if any(key in lit.lower() for lit, _ in literals)), None)
        for key in [held] if held else keys:
            # A literal holding the key says more than the key; one inside it, nothing more; the
            # others are tested when cheap (around a rare character or the separator, or in exact case).
            holding = [t for t in literals if key in t[0].lower()]
            tests = [(t[0], _NEAR) if near.get(t) else t for t in holding] or [(key, _where(key))]
            tests += [
                (t[0], _NEAR) if near.get(t) else t
                for t in literals
                if t[0].lower() not in key and t not in holding and (t[1] != _LOW or near.get(t))
            ]
            tests.sort(key=lambda t: (t[1] == _LOW, t[1] == _TEXT))  # windows first: the cheapest
            reach = [r for t in literals if (t[0], _NEAR) in tests and (r := near.get(t)) is not None]
            own = [frozenset(c) for c in dict.fromkeys(key)]
            # Small clauses of characters that many texts lack: each costs one look per text.
            useful = [c for c in dict.fromkeys(own + list(need.clauses)) if len(c) <= _CLAUSE_CHARS]
            clauses = sorted((c for c in useful if c <= _RARE), key=commonness)[:_CLAUSES_PER_KEY]
            if need.separator is not None:
                clauses.append(frozenset([_SEPARATOR]))
            entry = _Entry(key, rule, tuple(clauses), tuple(dict.fromkeys(tests)), rule.gate == "shape")
            entry.near = (max(r[0] for r in reach), max(r[1] for r in reach)) if reach else None
            out.append(entry)
    return out


def _near(need: Requirement) -> list[tuple[int, int] | None]:
    """For each literal of `need`, how far before and after a secret-named separator the window it
    must be in reaches, when the separator and the literal are at bounded distances from the match's
    start (and the literal is one looked for in the whole lower-cased text)."""
    if need.separator is None or need.separator[1] >= UNBOUNDED:
        return [None] * len(need.literals)
    nearest, farthest = need.separator
    out: list[tuple[int, int] | None] = []
    for (literal, exact), (low, high) in zip(need.literals, need.places, strict=True):
        bounded = high < UNBOUNDED and farthest - low <= _NEAR_REACH and high - nearest <= _NEAR_REACH
        plain = not (exact and any(c.isupper() for c in literal))
        out.append((farthest - low, high - nearest + len(literal)) if bounded and plain else None)
    return out


def _test(literal: str, exact: bool) -> tuple[str, str]:
    """Where to look for a literal: in exact case in the text when it has capitals, else lower-cased."""
    if exact and any(c.isupper() for c in literal):
        return literal, _TEXT
    return literal.lower(), _where(literal.lower())


def _where(test: str) -> str:
    """The rarest character of `test` worth windows around, or `_LOW` (the whole text)."""
    chars = [c for c in test if c in _WINDOW_CHARS]
    return min(chars, key=RARITY.index) if chars else _LOW


@dataclass
class _Plan:
    """What to look for in a text, given the probes it passed."""

    single: list[tuple[str, str, list[Any]]]  # (string, where, rules): one test selects the rules
    tests: list[tuple[tuple[tuple[str, str], ...], list[Any]]]  # ((string, where), …): all must hold
    shapes: list[tuple[str, Any]]
    reach: dict[str, tuple[int, float]]  # window characters: how far windows reach, and what they save
    near: tuple[int, int] | None  # how far before and after a secret-named separator its windows reach
    gates: dict[str, re.Pattern[str]]  # window characters: one search that says whether any test can hold


def secret_separators(low: str, runs: bytes) -> list[int]:
    """Where an `=` or `:` of lower-case `low` follows (after at most four quotes and blanks) a run
    of token characters holding a secret word: where a secret-named assignment can be (a superset).
    `runs` is `run_map(low)`.

    Text with few separators is read at each (is there a secret word in the run before it?); text
    with many, such as JSON, at each secret word (is there a separator after its run?).
    """
    # A look at a separator costs about as much as searching 120 characters for each secret word:
    # past that many separators, reading at each secret word costs less.
    most = _FEW + len(low) // 120
    places: list[int] = []
    for sep in "=:":
        i = low.find(sep)
        while i != -1:
            if len(places) == most:
                return _after_secret_words(low, runs)
            places.append(i)
            i = low.find(sep, i + 1)
    # Text short for its separators is first searched whole: most holds no secret word.
    if len(low) < 120 * len(places) and not mentions_secret_word(low):
        return []
    found = []
    for i in sorted(places) if len(places) > 1 else places:
        # The name's last character: at most a quote and three blanks (no run characters) follow it;
        # a name holding a secret word has three characters or more.
        end = runs.rfind(b"a", i - 5 if i > 5 else 0, i) + 1
        if end > 2 and runs.endswith(b"aaa", 0, end):
            reach = end - 80 if end > 80 else 0
            start = max(runs.rfind(b" ", reach, end) + 1, reach)
            if mentions_secret_word(low[start:end]):
                found.append(i)
    return found


def _after_secret_words(low: str, runs: bytes) -> list[int]:
    """The separators that follow, after at most four quotes and blanks, a run holding a secret word."""
    found: set[int] = set()
    for word in ASSIGNMENT_WORDS:
        i = low.find(word)
        while i != -1:
            end = runs.find(b" ", i)
            if end == -1:
                break
            after = _SEPARATOR_AFTER.match(low, end)
            if after is not None:
                found.add(after.end() - 1)
            i = low.find(word, end)
    return sorted(found)


@functools.lru_cache(maxsize=256)
def _gate(char: str, tails: frozenset[str]) -> re.Pattern[str]:
    """`char` followed by one of `tails`: every test holding `char` holds one such place (a search
    for a literal character runs in C, and fails at most places at once)."""
    alternatives = "|".join(re.escape(tail) for tail in sorted(tails, key=lambda t: (-len(t), t)))
    return re.compile(f"{re.escape(char)}(?:{alternatives})")


def _windows(low: str, char: str, reach: int) -> str:
    """The text around each place of `char` (`reach` characters on each side), joined by NULs (which
    no test string holds)."""
    places = []
    i = low.find(char)
    while i != -1:
        places.append(i - reach if i > reach else 0)
        i = low.find(char, i + 1)
    width = 2 * reach + 1
    return "\0".join([low[start : start + width] for start in places])


class PythonMatcher:
    """The gates in plain Python (see the module docstring): no dependency, a few µs per KB."""

    name = "python"

    def __init__(self, rules: Sequence[Gated]) -> None:
        by_prefix: dict[str, list[Gated]] = {}
        self.entries: list[_Entry] = []
        for rule in rules:
            if rule.gate == "word":
                for key in rule.keys:
                    by_prefix.setdefault(key, []).append(rule)
                continue
            self.entries.extend(_entries(rule))
        self.head = min((len(prefix) for prefix in by_prefix), default=1)
        self.heads: dict[str, list[tuple[str, list[Gated]]]] = {}
        for prefix, selected in by_prefix.items():
            self.heads.setdefault(prefix[: self.head], []).append((prefix, selected))
        symbols = {"=", ":"} | {c for e in self.entries for clause in e.clauses for c in clause}
        symbols |= {where for e in self.entries for _, where in e.tests} - {_LOW, _TEXT, _NEAR}
        symbols.discard(_SEPARATOR)
        self.bits = {c: 1 << i for i, c in enumerate(sorted(symbols, key=RARITY.index))}
        self.bits[_SEPARATOR] = 1 << len(self.bits)
        # Capitals are looked for in the text (a pattern matched in exact case needs them there);
        # the rest in its lower-cased twin, where letters of the gate strings are.
        self.probes = [(c, bit) for c, bit in self.bits.items() if c != _SEPARATOR and not c.isupper()]
        self.capitals = [(c, bit) for c, bit in self.bits.items() if c.isupper()]
        self.separators = self.bits["="] | self.bits[":"]
        # Each entry's clauses, and the characters of its windowed tests, as masks a text must meet.
        self.needs = [
            (entry, [sum(self.bits[c] for c in clause) for clause in entry.clauses]
             + [self.bits[where] for _, where in entry.tests if where not in (_LOW, _TEXT, _NEAR)])
            for entry in self.entries
        ]  # fmt: skip
        self.plans: dict[int, _Plan] = {}

    def _plan(self, mask: int) -> _Plan:
        """The plan for texts that passed the probes of `mask`."""
        grouped: dict[tuple[tuple[str, str], ...], list[Any]] = {}
        shapes: list[tuple[str, Any]] = []
        near: tuple[int, int] | None = None
        reach: dict[str, tuple[int, float]] = {}  # window character: (widest test, search cost)
        for entry, needs in self.needs:
            for need in needs:
                if not mask & need:
                    break
            else:
                if entry.shape:
                    shapes.append((entry.key, entry.rule))
                    continue
                if entry.near is not None:
                    near = (
                        entry.near
                        if near is None
                        else (max(near[0], entry.near[0]), max(near[1], entry.near[1]))
                    )
                for test, where in entry.tests:
                    if where not in (_LOW, _TEXT, _NEAR):
                        widest, cost = reach.get(where, (0, 0.0))
                        reach[where] = (max(widest, len(test)), cost + _SEARCH_NS / (len(test) + 2))
                grouped.setdefault(entry.tests, []).append(entry.rule)
        if len(self.plans) >= _MAX_PLANS:
            self.plans.clear()
        single = [(tests[0][0], tests[0][1], rules) for tests, rules in grouped.items() if len(tests) == 1]
        several = [(tests, rules) for tests, rules in grouped.items() if len(tests) > 1]
        gates = {}
        for char, (_, cost) in reach.items():
            if cost > _GATE_NS:  # cheaper than the searches it may spare
                tails = {t[t.index(char) + 1 :] for tests in grouped for t, where in tests if where == char}
                if "" not in tails:
                    gates[char] = _gate(char, frozenset(tails))
        plan = self.plans[mask] = _Plan(single, several, shapes, reach, near, gates)
        return plan

    def _where(self, low: str, text: str, plan: _Plan) -> dict[str, str]:
        """Where each test string is looked for: nowhere when the character's gate finds none of what
        follows it in the tests; windows around the character when they cost less than searching the
        whole text for each test that uses them; else the whole text. Measured: a search costs about
        `_SEARCH_NS / (len(test) + 2)` ns a character searched; windows 330 ns, and 270 ns a place,
        whose window is then searched."""
        where = {_LOW: low, _TEXT: text}
        for char, (widest, cost) in plan.reach.items():
            gate = plan.gates.get(char)
            if gate is not None and gate.search(low) is None:
                where[char] = ""
                continue
            most = (len(low) * cost - 330) / (270 + (2 * widest + 1) * cost)
            # Counting the places costs 0.3 ns a character: not worth it for searches that cost little.
            worth = most >= 1 and cost > 0.6 and low.count(char) <= most
            where[char] = _windows(low, char, widest) if worth else low
        return where

    def select(self, text: str) -> Selection:
        low = text.lower()
        mask = 0
        for char, bit in self.probes:
            if char in low:
                mask |= bit
        for char, bit in self.capitals:
            if char in text:
                mask |= bit
        runs = run_map(low)
        separators = secret_separators(low, runs) if mask & self.separators else None
        if separators:
            mask |= self.bits[_SEPARATOR]
        plan = self.plans.get(mask)
        if plan is None:
            plan = self._plan(mask)
        where = self._where(low, text, plan) if plan.reach else {_LOW: low, _TEXT: text}
        if plan.near is not None:  # its entries need a secret-named separator: there is one
            before, after = plan.near
            where[_NEAR] = "\0".join([low[max(0, i - before) : max(0, i + after)] for i in separators or ()])
        chosen: list[Gated] = []
        for test, place, rules in plan.single:
            if test in where[place]:
                chosen.extend(rules)
        for tests, rules in plan.tests:
            for test, place in tests:
                if test not in where[place]:
                    break
            else:
                chosen.extend(rules)
        starts: list[tuple[int, Gated]] = []
        at = runs.find(_LONG_RUN)
        if at != -1:
            self._runs(low, runs, at, starts, plan.shapes, chosen)
        context = has_candidate(low) or (at != -1 and service_candidate(low, runs, at))
        if not (chosen or starts or separators or context):
            return NOTHING
        return Selection(ordered(chosen), starts, bool(separators), low, separators, context)

    def _runs(
        self,
        low: str,
        runs: bytes,
        at: int,
        starts: list[tuple[int, Gated]],
        shapes: list[tuple[str, Any]],
        chosen: list[Gated],
    ) -> None:
        """Word rules whose prefix starts a long run, and shape rules whose key is in one."""
        heads, head, size = self.heads, self.head, len(runs)
        found: list[str] = []
        while at != -1:
            end = runs.find(b" ", at)
            end = size if end == -1 else end
            for prefix, rules in heads.get(low[at : at + head], ()):
                if low.startswith(prefix, at) and at + len(prefix) <= end:
                    starts.extend((at, rule) for rule in rules)
            if shapes:
                found.append(low[at:end])
            at = runs.find(_LONG_RUN, end)
        if shapes:
            joined = " ".join(found)  # no shape key holds a blank: each is found inside one run
            chosen.extend(rule for key, rule in shapes if key in joined)
