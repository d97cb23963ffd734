"""The pure-Python first pass (`_python_matcher`): whatever it leaves out could not have matched. Its
output is compared with a reference that selects every rule, every run start and every separator (no
extra needed, so it runs on a default install), on texts built to reach each of its shortcuts: windows
around rare characters and their fall-back to the whole text, many separators, capitals, newlines."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mastrace.scrubbing._context import find_assignments
from mastrace.scrubbing._engine import Scrubber
from mastrace.scrubbing._finder import compiled_rules
from mastrace.scrubbing._matchers import word_starts
from mastrace.scrubbing._python_matcher import PythonMatcher, _windows, secret_separators
from mastrace.scrubbing._selection import Selection, ordered
from mastrace.scrubbing._table import ASSIGNMENT_WORDS, MIN_TOKEN_LEN, RULES, expand, run_map

SAMPLES = [expand(s) for rule in RULES for s in rule.samples]
NEGATIVES = [expand(s) for rule in RULES for s in rule.negatives]
KEYS = sorted({key for rule in RULES for key in rule.keys} | set(ASSIGNMENT_WORDS))
FILLER = [
    "the agent weighed each answer ", "Step 3: compare ", "trade-off ", "a-b-c-d-e-f-g-h ", "x=1 ",
    "k: v, ", '{"id": "a0", "max_tokens": 4096}, ', "gpt-4o-mini-2024-07-18 ", "\n", "  ", "\t",
    "550e8400-e29b-41d4-a716-446655440000 ", "def get_api_key(self):\n", "https://example.com/a?b=c&d=e ",
]  # fmt: skip
PIECES = [*SAMPLES, *NEGATIVES, *KEYS, *(key.upper() for key in KEYS), *FILLER]


class EverythingMatcher:
    """Selects every rule, every place a word prefix starts a long run, and every separator."""

    name = "everything"

    def __init__(self, rules: list[Any]) -> None:
        self.rules = [rule for rule in rules if rule.gate != "word"]
        self.words = [rule for rule in rules if rule.gate == "word"]

    def select(self, text: str) -> Selection:
        low = text.lower()
        starts = [(at, rule) for rule in self.words for at in word_starts(low, rule.keys[0])]
        return Selection(ordered(list(self.rules)), starts, True, low, None, context=True)


@pytest.fixture(scope="module")
def pair() -> tuple[Scrubber, Scrubber]:
    python, reference = Scrubber(matcher="python"), Scrubber(matcher="python")
    reference._finder.matcher = EverythingMatcher(
        [rule for rule in compiled_rules() if rule.finder != "assignment"]
    )  # type: ignore[assignment]
    return python, reference


def _same(pair: tuple[Scrubber, Scrubber], text: str) -> None:
    python, reference = pair
    assert python.scrub_text(text) == reference.scrub_text(text), text


def test_every_sample_and_look_alike_comes_out_as_when_every_rule_is_tried(pair: Any) -> None:
    """Each sample and look-alike, alone, in prose and glued to filler, gives the reference's output."""
    for text in [*SAMPLES, *NEGATIVES]:
        _same(pair, text)
        _same(pair, f"Step 3: the agent said {text} — and then --verbose a-b-c-d")
        _same(pair, f"{text}\n{text}")


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=8)), max_size=16))
def test_any_text_comes_out_as_when_every_rule_is_tried(pair: Any, pieces: list[str]) -> None:
    """Texts glued from samples, gate strings in both cases, separators, dashes and filler give the
    reference's output, byte for byte."""
    _same(pair, "".join(pieces))


def test_long_texts_past_every_shortcut_come_out_the_same(pair: Any) -> None:
    """Texts of a few KB with many dashes and separators (windows fall back to the whole text;
    separators are read at each secret word) and secrets among them give the reference's output."""
    rnd = random.Random(5)
    for _ in range(60):
        parts = [rnd.choice(FILLER) for _ in range(rnd.randrange(20, 200))]
        for _ in range(rnd.randrange(0, 6)):
            parts.insert(rnd.randrange(len(parts) + 1), rnd.choice(SAMPLES) + " ")
        _same(pair, "".join(parts))


def test_secret_separators_hold_every_assignment_found() -> None:
    """Each separator where the assignment finder finds a value is among `secret_separators`, read
    one by one (few separators) or from the secret words (many)."""
    scrubber = Scrubber(matcher="python")
    rnd = random.Random(9)
    names = ["api_key", "password", '"auth_token"', "X_SECRET", "pgpassword", "id", "max_tokens", "data"]
    for few in (True, False):
        for _ in range(200):
            count = rnd.randrange(1, 8) if few else rnd.randrange(17, 40)
            parts = [
                f"{rnd.choice(names)}{rnd.choice(['', ' ', '  ', chr(34)])}{rnd.choice('=:')}"
                f"{rnd.choice(['', ' '])}{expand('{{a:16}}')} "
                for _ in range(count)
            ]
            low = "".join(parts).lower()
            found = {
                a.start
                for a in find_assignments(low, low, scrubber._is_secret_name, scrubber._finder.keywords)
            }
            allowed = set(secret_separators(low, run_map(low)))
            for start in found:  # the separator is before the value, at most 4 + 3 characters before
                assert any(start - 8 <= sep < start for sep in allowed), (low, start, allowed)


@given(st.text(alphabet="ab-:x \n", max_size=300), st.integers(min_value=1, max_value=20))
def test_windows_hold_every_test_string_the_text_holds(text: str, reach: int) -> None:
    """A string holding `-`, at most `reach` long, is in the windows around `-` exactly when it is in
    the text (windows are joined by NULs, which no such string holds)."""
    windows = _windows(text, "-", reach)
    for length in range(1, reach + 1):
        for start in range(len(text) - length + 1):
            piece = text[start : start + length]
            if "-" in piece:
                assert piece in windows
    for piece in ("--", "-a", "b-", "a-b", "x-:"):
        if len(piece) <= reach:
            assert (piece in windows) == (piece in text)


def test_a_rule_needing_capitals_is_left_out_of_text_without_them() -> None:
    """A Twilio pair needs `AC` in its exact case: lower-case text gives no such rule to try."""
    matcher = PythonMatcher([rule for rule in compiled_rules() if rule.finder != "assignment"])
    pair_text = "AC" + expand("{{h:32}}") + ":" + expand("{{h:32}}")
    kinds = [rule.kind for rule in matcher.select(pair_text).rules]
    assert "twilio_account_pair" in kinds
    assert "twilio_account_pair" not in [rule.kind for rule in matcher.select(pair_text.lower()).rules]


def test_kubernetes_secret_data_needs_a_newline() -> None:
    """The Secret finder is tried only on text with a newline; on such text it scrubs the data."""
    scrubber = Scrubber(matcher="python")
    matcher = scrubber._finder.matcher
    one_line = "kind: Secret data: username: " + expand("{{b:24}}")
    assert "k8s_secret_data" not in [rule.kind for rule in matcher.select(one_line).rules]
    assert scrubber.scrub_text(one_line) == one_line
    yaml = "kind: Secret\ndata:\n  username: " + expand("{{b:24}}") + "\n"
    assert "k8s_secret_data" in [rule.kind for rule in matcher.select(yaml).rules]
    assert "[Scrubbed: k8s_secret_data]" in scrubber.scrub_text(yaml)


def test_a_run_start_at_the_very_end_and_start_of_text_is_found() -> None:
    """A word prefix starting the text, or a long run ending it, is selected (no off-by-one)."""
    matcher = PythonMatcher([rule for rule in compiled_rules() if rule.finder != "assignment"])
    token = expand("ghp_{{a:36}}")
    for text in (token, f"x {token}", f"{token}.", "a" * (MIN_TOKEN_LEN - 1)):
        starts = matcher.select(text).starts
        assert bool(starts) == text.startswith(("ghp_", "x ghp_")), text
