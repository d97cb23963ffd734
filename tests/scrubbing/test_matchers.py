"""The first-pass matchers: Hyperscan, RE2 and pure Python pick rules differently but the scrubber's
output is the same with each, byte for byte (a property test), and `relax` only ever widens a pattern."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mastrace.scrubbing._engine import Scrubber
from mastrace.scrubbing._matchers import available, relax
from mastrace.scrubbing._table import ASSIGNMENT_WORDS, RULES, expand

COMPILED = [name for name in ("hyperscan", "re2") if name in available()]
SAMPLES = [expand(s) for rule in RULES for s in rule.samples]
NEGATIVES = [expand(s) for rule in RULES for s in rule.negatives]
KEYS = sorted({key for rule in RULES for key in rule.keys} | set(ASSIGNMENT_WORDS))
PIECES = [
    *SAMPLES,
    *NEGATIVES,
    *KEYS,
    *(key.upper() for key in KEYS),
    " ", "\n", "=", ": ", ":", "\"", "'", "@", "://", "/", "-", "_", ".", "é", "日本", "🙂", "\u00a0",
    "the agent said ", "Authorization: ", "password=", "api_key: ", "--token ", "kind: Secret\ndata:\n  k: ",
]  # fmt: skip


@pytest.fixture(scope="module")
def scrubbers() -> dict[str, Scrubber]:
    return {name: Scrubber(matcher=name) for name in ["python", *COMPILED]}


def _same(scrubbers: dict[str, Scrubber], text: str) -> None:
    outputs = {name: scrubber.scrub_text(text) for name, scrubber in scrubbers.items()}
    assert len(set(outputs.values())) == 1, outputs


@pytest.mark.skipif(not COMPILED, reason="neither hyperscan nor google-re2 is installed")
def test_every_sample_and_look_alike_gives_the_same_output(scrubbers: dict[str, Scrubber]) -> None:
    """Each sample and negative of the table, alone and in prose, comes out the same with every matcher."""
    for text in [*SAMPLES, *NEGATIVES]:
        _same(scrubbers, text)
        _same(scrubbers, f"Réponse: voir {text} — fin")


@pytest.mark.skipif(not COMPILED, reason="neither hyperscan nor google-re2 is installed")
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=12)), max_size=14))
def test_any_text_gives_the_same_output(scrubbers: dict[str, Scrubber], pieces: list[str]) -> None:
    """Texts glued from samples, gate strings, separators and arbitrary characters come out the same
    with every matcher."""
    _same(scrubbers, "".join(pieces))


def test_the_fastest_installed_matcher_is_the_default() -> None:
    """`Scrubber()` picks the first of `available()`; pure Python is always there, last."""
    assert available()[-1] == "python"
    assert Scrubber().matcher == available()[0]


def test_an_unknown_matcher_is_refused() -> None:
    """Asking for a matcher by a wrong name raises rather than silently scrubbing otherwise."""
    with pytest.raises(KeyError):
        Scrubber(matcher="nonesuch")


@pytest.mark.parametrize(
    ("pattern", "relaxed"),
    [
        (r"ab(?<![a-z]ab)c", "abc"),
        (r"(?P<p>x)(?=[)(])y(?![a-z(])", "(?P<p>x)y"),
        (r"a\(b(?<=\()", r"a\(b"),
        (r"[\s\S]{0,65536}?z", r"[\s\S]{0,}?z"),
        (r"[a-f0-9]{64}-[a-z]{3,5}x{8,}", r"[a-f0-9]{24,}-[a-z]{3,5}x{8,}"),
    ],
)
def test_relax_drops_look_arounds_and_caps_repeats(pattern: str, relaxed: str) -> None:
    """`relax` removes look-arounds (minding escapes and classes) and opens long counted repeats."""
    assert relax(pattern) == relaxed


@pytest.mark.parametrize(
    "rule", [r for r in RULES if r.gate in ("text", "shape") and r.finder is None], ids=str
)
def test_relaxed_patterns_match_every_sample(rule: object) -> None:
    """A relaxed pattern still matches each sample its rule matches (it only widens)."""
    assert hasattr(rule, "pattern")
    flags = re.ASCII | (re.IGNORECASE if rule.ignore_case else 0)  # type: ignore[attr-defined]
    for sample in rule.samples:  # type: ignore[attr-defined]
        text = expand(sample)
        if re.search(rule.pattern, text.lower() if rule.ignore_case else text, flags):  # type: ignore[attr-defined]
            assert re.search(relax(rule.pattern), text, flags)  # type: ignore[attr-defined]
