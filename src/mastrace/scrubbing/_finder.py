"""The second pass: the secrets of a text, found where the first pass said to look.

The first pass (`_matchers`) says which rules a text needs and where word rules may start; here
each is matched, checked, and the hits merged:

- a word rule is matched once at each place its prefix starts a long run;
- a text or shape rule whose pattern has no literal prefix (so that the regular-expression engine
  would try it at every character) is tried only near its *anchors*: the places of a literal every
  match holds at a known distance from its start (`-us`, 32 characters in, for a Mailchimp key).
  Trying candidate starts in order, each once past the previous match, finds what `finditer` finds;
  a shape rule is tried only inside the long runs holding one of its keys, where its matches must be;
- secret-named assignments are read at the separators the first pass found.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from . import _matchers
from ._context import CHECKS, KeywordIndex, find_assignments, find_k8s_secret_values
from ._contextual import find_in_context
from ._lazy_re import LazyPattern
from ._required import requirements, starts_with_literal
from ._selection import NOTHING
from ._table import MIN_TOKEN_LEN, RULES, SecretRule, long_runs, python_pattern

__all__ = ["Finder", "Hit", "Rule", "ascii_copy", "compiled_rules"]

Anchor = tuple[str, bool, int, int]


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: sets of rules stay cheap
class Rule:
    """A compiled rule: from the table (one per word-rule prefix), an environment variable, or a custom
    pattern. `on_low` rules are matched against the lower-cased text (case-insensitive rules: the
    engine's fast search for a leading literal works only without the IGNORECASE flag). `anchors`:
    where to try a pattern without a literal prefix (one per alternative; None: search it all), read
    when first needed for an `anchored` rule."""

    kind: str
    regex: re.Pattern[str] | LazyPattern | None
    label: str
    gate: str = "custom"
    keys: tuple[str, ...] = ()
    index: int = 0
    on_low: bool = False
    check: Callable[[str, re.Match[str]], bool] | None = None
    finder: str | None = None
    anchored: bool = False  # tried near its anchors, when its pattern has some (`anchors`)
    keeps_prefix: bool = field(init=False)  # a group `p` holds a prefix that is not secret
    replacement: str = field(init=False)

    @property
    def anchors(self) -> tuple[Anchor, ...] | None:
        """Where to try the pattern (see `_anchors`); None: search the whole text."""
        regex = self.regex
        return _anchors(regex.pattern, regex.flags) if self.anchored and regex is not None else None

    def __post_init__(self) -> None:
        regex = self.regex
        if isinstance(regex, LazyPattern):  # read from the text: the group is `(?P<p>...)`
            keeps = "(?P<p>" in regex.pattern
        else:
            keeps = regex is not None and "p" in regex.groupindex
        object.__setattr__(self, "keeps_prefix", keeps)
        object.__setattr__(self, "replacement", f"[Scrubbed: {self.label}]")


class Hit(NamedTuple):
    """A secret found: its span in the text (after any kept prefix), the rule, and the match."""

    start: int
    end: int
    rule: Rule
    match: re.Match[str]


_MAX_ANCHORS = 4  # each anchor is one search of the whole text: past a few, one search of the pattern wins


@functools.cache
def _anchors(pattern: str, flags: int) -> tuple[Anchor, ...] | None:
    """Where to try a pattern the regular-expression engine would try at every character: the anchor
    of each alternative, less those another covers (None when the engine has a literal prefix, an
    alternative has no anchor, or there are too many). Read when a text first selects the rule."""
    if starts_with_literal(pattern, flags):
        return None
    found = [need.anchor for need in requirements(pattern, flags)]
    if not found or None in found:
        return None
    kept: list[Anchor] = []
    for anchor in sorted({a for a in found if a is not None}, key=lambda a: len(a[0])):
        if not any(_covers(other, anchor) for other in kept):
            kept.append(anchor)
    return tuple(kept) if len({(a[0], a[1]) for a in kept}) <= _MAX_ANCHORS else None


def _covers(a: Anchor, b: Anchor) -> bool:
    """Whether every start `b` allows is one `a` allows: `a`'s literal is inside `b`'s, at distances
    that take in `b`'s."""
    at = b[0].find(a[0])
    return a[1] == b[1] and at != -1 and a[2] <= b[2] + at and b[3] + at <= a[3]


def _compile(index: int, spec: SecretRule) -> list[Rule]:
    """The compiled forms of one rule. `index` orders hits that start at the same place: a longer
    prefix first (`sk-ant-` before `sk-`), then the table's order."""
    check = CHECKS[spec.check] if spec.check else None
    flags = re.ASCII | (re.MULTILINE if spec.finder else 0)
    if spec.gate == "word":
        return [
            Rule(spec.id, LazyPattern(python_pattern(spec, prefix), flags), spec.id, "word",
                 (prefix.lower(),), index - 1000 * len(prefix), spec.ignore_case, check)
            for prefix in spec.prefixes
        ]  # fmt: skip
    regex = None if spec.finder else LazyPattern(spec.pattern, flags)
    return [
        Rule(
            spec.id,
            regex,
            spec.id,
            spec.gate,
            spec.keys,
            index,
            spec.ignore_case,
            check,
            spec.finder,
            regex is not None,
        )
    ]


@functools.cache
def compiled_rules() -> tuple[Rule, ...]:
    """The rule table compiled, once per process (keyword rules are read by the assignment finder)."""
    return tuple(rule for i, spec in enumerate(RULES) if spec.gate != "keyword" for rule in _compile(i, spec))


@functools.cache
def matcher(name: str | None) -> _matchers.Matcher:
    """The first-pass matcher over the whole table, built once per process and kind."""
    return _matchers.make([rule for rule in compiled_rules() if rule.finder != "assignment"], name)


@functools.cache
def _keywords() -> KeywordIndex:
    return KeywordIndex()


# Hits of the assignment finder: a provider's keyword rule names the secret before any other rule that
# starts at the same place; the generic `secret_assignment` only when no other rule does.
_ASSIGNMENT = Rule("secret_assignment", None, "secret_assignment", "assignment", index=1 << 30)
_KEYWORD_LABELS = {
    spec.id: Rule(spec.id, None, spec.id, "keyword", index=-(1 << 30))
    for spec in RULES
    if spec.gate == "keyword"
}
# Hits of the context finder (`_contextual`): a credential that no rule of the table names, found by a
# secret word near a random-looking value; any other rule that starts at the same place names it first.
_CONTEXT = Rule("secret_in_context", None, "secret_in_context", "context", index=(1 << 30) + 1)
_IN_RUN = re.compile(r"[A-Za-z0-9_.+~-]+")
_RUN_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+~-")


def ascii_copy(s: str) -> str:
    """`s` with every non-ASCII character as `?`: the same positions, and C-speed searches."""
    return s if s.isascii() else s.encode("ascii", "replace").decode("ascii")


class Finder:
    """Finds the secret-shaped substrings of a text: the table's rules, the values of secret-named
    environment variables, and custom patterns."""

    def __init__(
        self,
        matcher_name: str | None,
        env: list[tuple[str, Rule]],
        custom: list[Rule],
        is_secret_name: Callable[[str], bool],
    ) -> None:
        self.matcher = matcher(matcher_name)
        self.env = env
        self.custom = custom
        self.is_secret_name = is_secret_name
        self.keywords = _keywords()

    def find(self, s: str) -> list[Hit]:
        """Every secret-shaped substring of `s`, leftmost first, without overlaps."""
        text = ascii_copy(s)
        found = self.matcher.select(text)
        if found is NOTHING and not self.env and not self.custom:  # most texts
            return []
        low = found.low
        hits = [
            Hit(m.start(), m.end(), rule, m)
            for value, rule in self.env
            if value in s
            for m in rule.regex.finditer(s)  # type: ignore[union-attr]
        ]
        if found.starts:
            low = text.lower() if low is None else low
            self._anchored(found.starts, s, text, low, hits)
        if found.rules:
            low = text.lower() if low is None else low
            runs: list[tuple[int, int]] | None = None
            for rule in found.rules:
                if rule.finder == "k8s_secret":
                    hits.extend(Hit(m.start(2), m.end(2), rule, m) for m in find_k8s_secret_values(text, low))
                elif rule.finder is None:
                    if rule.gate == "shape" and runs is None:
                        runs = long_runs(low)
                    self._matches(rule, s, text, low, runs, hits)
        if found.assignments and ("=" in text or ":" in text):
            low = text.lower() if low is None else low
            for assigned in find_assignments(text, low, self.is_secret_name, self.keywords, found.separators):
                rule = _KEYWORD_LABELS.get(assigned.rule_id, _ASSIGNMENT)
                hits.append(Hit(assigned.start, assigned.end, rule, assigned.match))
        for rule in self.custom:
            hits.extend(_hit(rule, m) for m in rule.regex.finditer(s))  # type: ignore[union-attr]
        if found.context:
            # Last: a value inside a secret found above is not judged again (its hit, ranked after every
            # other rule's, would only be merged into that one).
            low = text.lower() if low is None else low
            hits = merge(hits) if len(hits) > 1 else hits
            covered = [(hit.start, hit.end) for hit in hits]
            hits += [Hit(c.start, c.end, _CONTEXT, c.match) for c in find_in_context(text, low, covered)]
        return merge(hits) if len(hits) > 1 else hits

    def _anchored(self, starts: list[tuple[int, Rule]], s: str, text: str, low: str, hits: list[Hit]) -> None:
        """Word rules matched where their prefix starts a long run, in order and without overlaps per
        rule: what `finditer` over the whole text would find, without the search."""
        starts.sort(key=_by_rule)
        last_rule, last_end = None, 0
        for at, rule in starts:
            if rule is not last_rule:
                last_rule, last_end = rule, 0
            if at < last_end:
                continue
            m = rule.regex.match(low if rule.on_low else text, at)  # type: ignore[union-attr]
            if m is None or s.startswith("[Scrubbed", at):
                continue
            if rule.check is None or rule.check(text[at : m.end()], m):
                hits.append(Hit(at, m.end(), rule, m))
                last_end = m.end()

    def _matches(
        self, rule: Rule, s: str, text: str, low: str, runs: list[tuple[int, int]] | None, hits: list[Hit]
    ) -> None:
        if rule.gate == "text" and not any(k in low for k in rule.keys):  # as `PythonMatcher` asks
            return  # (asked once per text: per match, it made a text of many matches quadratic)
        target = low if rule.on_low else text
        shape = rule.gate == "shape"
        if rule.anchors is not None:
            # A shape match lies in a long run holding a key: only those runs are tried.
            spans = (
                [(a, b) for a, b in runs or () if any(k in low[a:b] for k in rule.keys)] if shape else None
            )
            found: Iterator[re.Match[str]] = _tried(rule, target, low, spans)
        else:
            found = rule.regex.finditer(target)  # type: ignore[union-attr]
        for m in found:
            start = _start(rule, m)
            if m.end() <= start or s.startswith("[Scrubbed", start):  # already scrubbed
                continue
            if shape and not _in_long_run(low, m, rule.keys):
                continue
            if rule.check is None or rule.check(text[start : m.end()], m):
                hits.append(Hit(start, m.end(), rule, m))


def _by_rule(pair: tuple[int, Rule]) -> tuple[int, int]:
    return pair[1].index, pair[0]


def _tried(rule: Rule, target: str, low: str, spans: list[tuple[int, int]] | None) -> Iterator[re.Match[str]]:
    """The matches `rule.regex.finditer(target)` gives (within `spans`, when given), found by trying
    only the starts that its anchors allow."""
    regex, size = rule.regex, len(target)
    anchors = rule.anchors
    assert regex is not None and anchors is not None
    starts: set[int] = set()
    for literal, exact, nearest, farthest in anchors:
        where = target if exact else low
        for a, b in spans if spans is not None else [(0, size)]:
            i = where.find(literal, a, b)
            while i != -1:
                starts.update(range(max(0, i - farthest), i - nearest + 1))
                i = where.find(literal, i + 1, b)
    pos = 0
    for start in sorted(starts):
        if start < pos:
            continue
        m = regex.match(target, start)
        if m is not None:
            yield m
            pos = max(m.end(), start + 1)


def _start(rule: Rule, m: re.Match[str]) -> int:
    """Where the secret of a match starts: after its kept prefix, if any."""
    if rule.keeps_prefix:
        end = m.end("p")
        if end != -1:
            return end
    return m.start()


def _hit(rule: Rule, m: re.Match[str]) -> Hit:
    return Hit(_start(rule, m), m.end(), rule, m)


def _in_long_run(low: str, m: re.Match[str], keys: tuple[str, ...]) -> bool:
    """A shape match must lie inside one run of `MIN_TOKEN_LEN` token characters holding a gate key."""
    run = _IN_RUN.fullmatch(low, m.start(), m.end())
    if run is None:
        return False
    start, end = m.start(), m.end()
    while start and low[start - 1] in _RUN_CHARS:
        start -= 1
    while end < len(low) and low[end] in _RUN_CHARS:
        end += 1
    word = low[start:end]
    return len(word) >= MIN_TOKEN_LEN and any(k in word for k in keys)


def merge(hits: list[Hit]) -> list[Hit]:
    """Hits sorted by start (the table's order breaks ties); overlapping hits become one."""
    hits.sort(key=_by_start)
    kept: list[Hit] = []
    for hit in hits:
        if not kept or hit.start >= kept[-1].end:
            kept.append(hit)
        elif hit.end > kept[-1].end:  # overlapping: one replacement covers both
            kept[-1] = kept[-1]._replace(end=hit.end)
    return kept


def _by_start(hit: Hit) -> tuple[int, int]:
    return hit.start, hit.rule.index
