"""What a pattern requires of a text (`_required`): characters, literals, anchors and secret-named
separators read from the parsed pattern — each a necessary condition of a match, checked against every
rule of the table on texts glued from samples and look-alikes (a property test)."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mastrace.scrubbing._finder import _in_long_run, _tried, compiled_rules
from mastrace.scrubbing._python_matcher import secret_separators
from mastrace.scrubbing._required import UNBOUNDED, named_separator, requirements, starts_with_literal
from mastrace.scrubbing._table import ASSIGNMENT_WORDS, RULES, expand, long_runs, run_map

PATTERNED = [rule for rule in compiled_rules() if rule.regex is not None and rule.gate in ("text", "shape")]
SAMPLES = [expand(s) for rule in RULES for s in rule.samples]
NEGATIVES = [expand(s) for rule in RULES for s in rule.negatives]
PIECES = [
    *SAMPLES,
    *NEGATIVES,
    *sorted({key for rule in RULES for key in rule.keys} | set(ASSIGNMENT_WORDS)),
    " ", "\n", "\t", "=", ": ", '"', "'", "-", "--", "/", "~", "AC", "ZXlK", "Q~", "-us", "_mmk", ".",
]  # fmt: skip


def _holds(need_clauses: tuple[frozenset[str], ...], text: str, low: str) -> bool:
    """A clause holds when the text has one of its characters (capitals in the text, the rest in its
    lower-cased twin, as the first pass looks them up)."""
    return all(any(c in (text if c.isupper() else low) for c in clause) for clause in need_clauses)


def _satisfied(pattern: re.Pattern[str], text: str, low: str) -> bool:
    return any(
        _holds(need.clauses, text, low)
        and all(lit in (text if exact else low) for lit, exact in need.literals)
        for need in requirements(pattern.pattern, pattern.flags)
    )


def test_clauses_literals_and_alternatives() -> None:
    """A class gives a clause, literals run across groups and look-arounds, an alternation splits."""
    (need,) = requirements(r"(?P<p>https?://)(?<!x)[a-z]{2}@[:=]")
    assert {frozenset(":"), frozenset("/"), frozenset("@"), frozenset(":=")} <= set(need.clauses)
    assert ("http", True) in need.literals and ("://", True) in need.literals
    first, second = requirements(r"(?:ABSK|bedrock-)[0-9]+")
    assert ("ABSK", True) in first.literals and ("bedrock-", True) in second.literals
    assert frozenset("K") in first.clauses and frozenset("-") in second.clauses
    assert requirements(r"ab(?<![0-9]ab)cd")[0].literals == (("abcd", True),)


def test_a_case_insensitive_part_is_lower_cased_and_gives_no_letter() -> None:
    """Letters under `(?i)` match either case: the literal is lower-cased and no letter is required."""
    (need,) = requirements(r"(?i:AB)Cd")
    assert need.literals == (("abcd", False),)
    assert frozenset("C") in need.clauses and frozenset("A") not in need.clauses
    assert requirements("X9", re.IGNORECASE)[0].clauses == (frozenset("9"),)


def test_anchors_say_how_far_from_the_start() -> None:
    """An anchor is the literal needing the fewest tries, with its nearest and farthest distance."""
    assert requirements(r"(?<![0-9a-f])[0-9a-f]{32}-us[0-9]")[0].anchor == ("-us", True, 32, 32)
    assert requirements(r"[0-9]{8,10}:AA[a-z]")[0].anchor == (":AA", True, 8, 10)
    assert requirements(r"[a-z]+-us")[0].anchor is None  # unbounded: no anchor
    assert starts_with_literal(r"(?P<p>bearer )x") and not starts_with_literal(r"\bmysql")


def test_literals_and_the_separator_say_how_far_from_the_start() -> None:
    """Each literal's distance from the match's start, and a secret-named separator's, are bounded
    where the items before them are (the pure-Python pass looks for literals around separators)."""
    (need,) = requirements(r"ibm[_-]?(?:cloud)?[_-]?key[\"']?[ \t]{0,3}[:=][a-z]{4}")
    assert dict(zip(need.literals, need.places, strict=True))[("ibm", True)] == (0, 0)
    assert need.separator == (6, 17)
    assert requirements(r"[a-z]+[:=]x")[0].separator is None  # no literal secret word before it
    (need,) = requirements(r"[a-z]+ token:x")
    assert need.separator is not None and need.separator[1] >= UNBOUNDED


def test_unreadable_patterns_require_nothing() -> None:
    """A pattern the reader cannot parse gives no requirement (the rule is simply tried)."""
    assert requirements("(unclosed") == ()
    assert not named_separator("(unclosed")


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"ibm[_-]?key[\"']?[ \t]{0,3}[:=]x", True),
        (r"gitter[_-]?(?:token|key)[\"']?[ \t]{0,3}[:=]", True),
        (r"authorization[ \t]{0,3}=", True),
        (r"asana[a-z0-9_.-]{0,30}[:=]", False),  # the name need not hold a secret word
        (r"(?:sig|key)[:=]", False),
        (r"key(?:_id)?:", False),
        (r"key[ \t]{0,9}:", False),  # too many blanks between name and separator
        (r"key", False),
    ],
)
def test_named_separator(pattern: str, expected: bool) -> None:
    """A separator right after a name ending in a literal secret word is recognised, nothing looser."""
    assert named_separator(pattern) is expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=10))
def test_every_match_meets_its_requirements(pieces: list[str]) -> None:
    """Wherever a rule of the table matches, one alternative's clauses and literals hold, the
    anchored tries find exactly what `finditer` finds, and a rule needing a secret-named separator
    has one among `secret_separators`."""
    text = "".join(pieces).encode("ascii", "replace").decode("ascii")
    low = text.lower()
    for rule in PATTERNED:
        assert rule.regex is not None
        target = low if rule.on_low else text
        matches = [m.span() for m in rule.regex.finditer(target)]
        if not matches:
            continue
        assert _satisfied(rule.regex, target, low), (rule.kind, text)
        if rule.anchors is not None and rule.gate == "text":
            assert [m.span() for m in _tried(rule, target, low, None)] == matches, rule.kind
        if rule.anchors is not None and rule.gate == "shape":  # tried only in runs holding a key
            spans = [(a, b) for a, b in long_runs(low) if any(k in low[a:b] for k in rule.keys)]
            kept = [m.span() for m in rule.regex.finditer(target) if _in_long_run(low, m, rule.keys)]
            tried = [m.span() for m in _tried(rule, target, low, spans) if _in_long_run(low, m, rule.keys)]
            assert tried == kept, rule.kind
        if named_separator(rule.regex.pattern, rule.regex.flags):
            assert secret_separators(low, run_map(low)), (rule.kind, text)


def test_every_sample_meets_its_rules_requirements() -> None:
    """Each positive sample of a patterned rule satisfies what its pattern requires."""
    for rule in PATTERNED:
        assert rule.regex is not None
        for spec in RULES:
            if spec.id != rule.kind:
                continue
            for sample in spec.samples:
                text = expand(sample).encode("ascii", "replace").decode("ascii")
                low = text.lower()
                target = low if rule.on_low else text
                if rule.regex.search(target):
                    assert _satisfied(rule.regex, target, low), (rule.kind, text)
