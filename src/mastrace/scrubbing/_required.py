"""What a text must hold for a pattern to match it, read from the parsed pattern: the first pass's
cheap tests that spare most texts the search for a rule.

- `requirements` gives, for each alternative of the pattern (each branch of its first top-level
  alternation, with what comes before and after it; or the whole pattern), *clauses* and *literals*
  that every match through it satisfies. A clause is a set of characters, at least one of which the
  text must hold: `[:=]` gives `{":", "="}`; `https?://` gives `{":"}` and `{"/"}`; a nested
  alternation gives one clause made of one clause of each branch; optional parts and negative
  look-arounds give none; a letter counts only where the pattern matches it in one case. A literal
  is a run of literal characters of the sequence (groups opened in place, look-arounds skipped), with
  whether its case is exact. The *anchor* is the literal at the most nearly fixed distance from the
  match's start: the second pass tries the pattern only that far before each place the anchor is.
- `starts_with_literal` says whether the regular-expression engine finds the pattern's candidates by
  a fast search for a literal prefix (then anchors are not needed).
- `named_separator` says whether every match holds an `=` or `:` right after a name ending in a
  secret word (`ibm_api_key: …`), as a secret-named assignment does.

A pattern these functions cannot read gives nothing: the rule is then simply tried.
"""

from __future__ import annotations

import functools
import importlib
import re
import string
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ._table import ASSIGNMENT_WORDS, RUN

__all__ = [
    "RARITY",
    "UNBOUNDED",
    "Requirement",
    "commonness",
    "named_separator",
    "requirements",
    "starts_with_literal",
]

try:  # Python 3.11+ (the modules of 3.10 are deprecated aliases there)
    _p: Any = importlib.import_module("re._parser")
    _c: Any = importlib.import_module("re._constants")
except ImportError:  # pragma: no cover - Python 3.10
    _p = importlib.import_module("sre_parse")
    _c = importlib.import_module("sre_constants")

_CASELESS = frozenset(string.digits + string.punctuation + " \t\n\r\f\v")
RARITY = "~!$@|\\^`<>%&?;#+*{}[]()QJZXVKWYFBGHMPUDCLSNOTIREAqjzx'=\"/0123456789_-:\n\t.,"
"""Characters from the rarest in prose and agent content to the most common (a clause counts by its
commonest character)."""
_RANK = {c: i for i, c in enumerate(RARITY)}
_REPEATS = tuple(
    getattr(_c, op) for op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") if hasattr(_c, op)
)
_ATOMIC = getattr(_c, "ATOMIC_GROUP", None)
_ZERO_WIDTH = (_c.AT, _c.ASSERT, _c.ASSERT_NOT)
_IGNORECASE = int(re.IGNORECASE)
_NAME = frozenset(c for c in string.ascii_letters + string.digits + "_.-")
_QUOTES_AND_BLANKS = frozenset("\"' \t")
_RUN_CHARS = frozenset(c for c in map(chr, range(128)) if re.fullmatch(f"[{RUN}]", c))


def commonness(clause: Iterable[str]) -> tuple[int, int]:
    """How likely a text satisfies `clause`: by its commonest character, then its size."""
    chars = list(clause)
    return max(_RANK.get(c, len(RARITY)) for c in chars), len(chars)


def _parse(pattern: str, flags: int) -> tuple[Any, bool] | None:
    try:
        parsed = _p.parse(pattern, flags)
    except Exception:  # a pattern this reader does not know: nothing is required of the text
        return None
    return parsed, not parsed.state.flags & _IGNORECASE


@dataclass(frozen=True)
class Requirement:
    """What every match through one alternative of a pattern holds (see the module docstring).

    Attributes:
        clauses: Sets of characters the text holds one of each.
        literals: Strings the match holds, with whether their case is exact.
        places: For each literal, how far from the match's start it starts, at least and at most
            (at most `UNBOUNDED` when no bound is known).
        anchor: The literal that starts the closest to the match's start, and how far from it at
            least and at most: (literal, exact, nearest, farthest); None when no literal is at a
            bounded distance.
        separator: Where the match's secret-named separator is (`named_separator`), at least and
            at most this far from its start; None when it has none.
    """

    clauses: tuple[frozenset[str], ...]
    literals: tuple[tuple[str, bool], ...]
    places: tuple[tuple[int, int], ...] = ()
    anchor: tuple[str, bool, int, int] | None = None
    separator: tuple[int, int] | None = None


_MAX_ALTERNATIVES = 32  # an alternation of more branches is read as one
UNBOUNDED = 1 << 30
_MAX_SPREAD = 8  # an anchor this far from a fixed place costs as many tries per place it is found
Item = tuple[Any, Any, bool]


@functools.cache
def requirements(pattern: str, flags: int = 0) -> tuple[Requirement, ...]:
    """One `Requirement` per alternative of `pattern` (compiled with `flags`): every match satisfies
    at least one. Nothing when the pattern cannot be read."""
    parsed = _parse(pattern, flags)
    if parsed is None:
        return ()
    items = _flat(*parsed)
    branch = next((i for i, (op, _, _) in enumerate(items) if op is _c.BRANCH), None)
    if branch is None or len(items[branch][1][1]) > _MAX_ALTERNATIVES:
        alternatives = [items]
    else:
        _, (_, branches), cased = items[branch]
        alternatives = [items[:branch] + _flat(b, cased) + items[branch + 1 :] for b in branches]
    return tuple(_requirement(alt) for alt in alternatives)


def _requirement(items: list[Item]) -> Requirement:
    clauses: list[frozenset[str]] = []
    for op, av, cased in items:
        clauses.extend(_clauses([(op, av)], cased))
    runs = _literal_runs(items)
    spans: dict[tuple[str, bool], tuple[int, int]] = {}
    for literal, exact, low, high in runs:  # a literal met twice: the span of both places
        if len(literal) >= 2:
            key = (literal, True) if exact else (literal.lower(), False)
            known = spans.get(key, (low, high))
            spans[key] = (min(known[0], low), max(known[1], high))
    separator = _separator_at(items)
    return Requirement(
        tuple(dict.fromkeys(clauses)),
        tuple(spans),
        tuple(spans.values()),
        _anchor(runs),
        None if separator is None else _offsets(items, separator),
    )


def _literal_runs(items: list[Item]) -> list[tuple[str, bool, int, int]]:
    """The runs of literal characters (look-arounds skipped: they consume nothing), each with whether
    its case is exact and how far from the match's start it starts, at least and at most."""
    runs: list[tuple[str, bool, int, int]] = []
    nearest = farthest = 0
    run: list[str] = []
    run_at = (0, 0, True)
    for op, av, cased in [*items, (None, None, True)]:
        if op is _c.LITERAL:
            if not run:
                run_at = (nearest, farthest, cased)
            run.append(chr(av))
            run_at = (run_at[0], run_at[1], run_at[2] and cased)
        elif op not in _ZERO_WIDTH and run:
            runs.append(("".join(run), run_at[2], run_at[0], run_at[1]))
            run = []
        if op is not None:
            least, most = _width(op, av)
            nearest, farthest = nearest + least, min(UNBOUNDED, farthest + most)
    return runs


def _offsets(items: list[Item], index: int) -> tuple[int, int]:
    """How far from the match's start `items[index]` starts, at least and at most."""
    least, most = _sequence_width([(op, av) for op, av, _ in items[:index]])
    return least, most


def _anchor(runs: list[tuple[str, bool, int, int]]) -> tuple[str, bool, int, int] | None:
    """The literal run at a bounded distance from the match's start that costs the fewest tries: each
    place it is found costs one try per possible distance, and a longer literal is found in fewer
    places (a quarter as many per character, roughly)."""
    best: tuple[float, str, bool, int, int] | None = None
    for literal, exact, low, high in runs:
        cost = (high - low + 1) / 4 ** len(literal)
        if high < UNBOUNDED and high - low <= _MAX_SPREAD and (best is None or cost < best[0]):
            best = (cost, literal, exact, low, high)
    if best is None:
        return None
    _, literal, exact, low, high = best
    return (literal, True, low, high) if exact else (literal.lower(), False, low, high)


def _width(op: Any, av: Any) -> tuple[int, int]:
    """The fewest and most characters an item matches (`UNBOUNDED` for no limit)."""
    if op in (_c.LITERAL, _c.NOT_LITERAL, _c.IN, _c.ANY):
        return 1, 1
    if op in _ZERO_WIDTH:
        return 0, 0
    if op in _REPEATS:
        least, most = _sequence_width(av[2])
        high = UNBOUNDED if av[1] >= _c.MAXREPEAT else min(UNBOUNDED, av[1] * most)
        return av[0] * least, high
    if op is _c.SUBPATTERN:
        return _sequence_width(av[-1])
    if op is _ATOMIC:
        return _sequence_width(av)
    if op is _c.BRANCH:
        widths = [_sequence_width(branch) for branch in av[1]]
        return min(w[0] for w in widths), max(w[1] for w in widths)
    return 0, UNBOUNDED  # a back-reference or anything else: no bound


def _sequence_width(items: Any) -> tuple[int, int]:
    least = most = 0
    for op, av in items:
        a, b = _width(op, av)
        least, most = least + a, min(UNBOUNDED, most + b)
    return least, most


def starts_with_literal(pattern: str, flags: int = 0) -> bool:
    """Whether the pattern's first item is a literal character (in a group or not): the regular
    expression engine then finds its candidates by a fast search for that literal prefix."""
    parsed = _parse(pattern, flags)
    return parsed is not None and bool(_flat(*parsed)) and _flat(*parsed)[0][0] is _c.LITERAL


def _clauses(items: Any, cased: bool) -> list[frozenset[str]]:
    out: list[frozenset[str]] = []
    for op, av in items:
        if op is _c.LITERAL:
            if chr(av) in _CASELESS or (cased and chr(av).isalpha()):
                out.append(frozenset(chr(av)))
        elif op is _c.IN:
            out.extend(_class(av))
        elif op is _c.SUBPATTERN:
            out.extend(_clauses(av[-1], _cased(cased, av)))
        elif op in _REPEATS:
            if av[0] >= 1:
                out.extend(_clauses(av[2], cased))
        elif op is _c.BRANCH:
            out.extend(_branch(av[1], cased))
        elif op is _c.ASSERT:  # a positive look-around: its characters are in the text too
            out.extend(_clauses(av[1], cased))
        elif op is _ATOMIC:
            out.extend(_clauses(av, cased))
        # Anything else (optional parts, negative look-arounds, anchors, any character, categories,
        # back-references) requires nothing that can be told by a character.
    return out


def _cased(cased: bool, group: Any) -> bool:
    """Whether letters inside a group (`(?i:…)`, `(?-i:…)`) match in one case only."""
    _, add, remove, _ = group
    return (cased or bool(remove & _IGNORECASE)) and not add & _IGNORECASE


def _class(items: Any) -> list[frozenset[str]]:
    chars: set[str] = set()
    for op, av in items:
        if op is _c.LITERAL:
            chars.add(chr(av))
        elif op is _c.RANGE:
            chars.update(map(chr, range(av[0], av[1] + 1)))
        else:  # a negated class or a category (`\s`, `\w`)
            return []
    return [frozenset(chars)] if chars and chars <= _CASELESS else []


def _branch(branches: Any, cased: bool) -> list[frozenset[str]]:
    """One clause for an alternation: the union of the rarest clause of each branch."""
    union: set[str] = set()
    for branch in branches:
        found = _clauses(branch, cased)
        if not found:
            return []
        union.update(min(found, key=commonness))
    return [frozenset(union)]


def _flat(items: Any, cased: bool) -> list[tuple[Any, Any, bool]]:
    """The items of a sequence with its groups opened in place (a group matches its contents there),
    each with whether its letters match in one case only."""
    out: list[tuple[Any, Any, bool]] = []
    for op, av in items:
        if op is _c.SUBPATTERN:
            out.extend(_flat(av[-1], _cased(cased, av)))
        else:
            out.append((op, av, cased))
    return out


def named_separator(pattern: str, flags: int = 0) -> bool:
    """Whether every match of `pattern` holds an `=` or `:` that follows, after at most four quotes
    and blanks, a run of name characters ending in a literal secret word (`…key"\t:`)."""
    needs = requirements(pattern, flags)
    return bool(needs) and all(need.separator is not None for need in needs)


def _separator_at(items: list[Item]) -> int | None:
    """The index of the first item that is a secret-named separator (see `named_separator`)."""
    for i, (op, av, _) in enumerate(items):
        if _chars_of(op, av, 1) <= {":", "="}:
            j, width = i - 1, 0
            while j >= 0 and _chars_of(items[j][0], items[j][1], 4 - width) <= _QUOTES_AND_BLANKS:
                width += _max_width(items[j][0], items[j][1])
                j -= 1
            if j >= 0 and width <= 4 and _ends_in_secret_word(items, j):
                return i
    return None


def _chars_of(op: Any, av: Any, most: int) -> frozenset[str] | set[str]:
    """The characters an item (a literal, a class, or a repeat of one, at most `most` long) matches;
    the set of every character when it is anything else."""
    if op in _REPEATS and av[1] <= most and len(av[2]) == 1:
        inner_op, inner_av = av[2][0]
        return _chars_of(inner_op, inner_av, 1)
    if op is _c.LITERAL:
        return {chr(av)}
    if op is _c.IN and (found := _class(av)):
        return found[0]
    return _ANY


_ANY = frozenset(map(chr, range(256)))


def _max_width(op: Any, av: Any) -> int:
    return int(av[1]) if op in _REPEATS else 1


def _ends_in_secret_word(items: list[tuple[Any, Any, bool]], j: int) -> bool:
    """Whether the items up to `j` end in literal name characters holding a secret word, or in an
    alternation each of whose branches does."""
    op, av, cased = items[j]
    if op is _c.BRANCH:
        return all(b and _ends_in_secret_word(_flat(b, cased), len(_flat(b, cased)) - 1) for b in av[1])
    tail: list[str] = []
    while j >= 0 and items[j][0] is _c.LITERAL and chr(items[j][1]) in _NAME:
        tail.append(chr(items[j][1]).lower())
        j -= 1
    word = "".join(reversed(tail))
    return bool(tail) and set(word) <= _RUN_CHARS and any(w in word[-80:] for w in ASSIGNMENT_WORDS)
