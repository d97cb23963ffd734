"""The secret rule table: every sample scrubbed by its own rule, every look-alike kept, key names
judged by whole segments, and no pattern that backtracks catastrophically."""

from __future__ import annotations

import re
import time

import pytest

from mastrace._scrubbing import Scrubber
from mastrace._secret_rules import RULES, SecretRule, secret_key_word

SAMPLES = [(rule, sample) for rule in RULES for sample in rule.samples]
NEGATIVES = [(rule, negative) for rule in RULES for negative in rule.negatives]

ORDINARY_KEYS = [
    # The keys that an earlier key-name rule blanked, and their relatives.
    "token_budget",
    "token_limit",
    "tokens_per_second",
    "token_type",
    "auth_method",
    "oauth_provider",
    "authentication_required",
    "credential_type",
    "secretary",
    "secret_santa_count",
    "cookie_policy",
    "session_keyword",
    "input_tokens",
    "max_tokens",
    "max_token",
    "eos_token",
    "pad_token",
    "tokenizer",
    "author",
    "authority",
    "keyword",
    "monkey",
    "passage",
    "session_id",
    "secret_name",
    "massgen.usage.input",
    "gen_ai.usage.output_tokens",
    "tokenCount",
    "maxTokens",
]

SECRET_KEYS = [
    "api_key",
    "x-api-key",
    "auth_token",
    "client_secret",
    "password",
    "passwd",
    "cookie",
    "set-cookie",
    "session_token",
    "private_key",
    "OPENAI_API_KEY",
    "apiKey",
    "ApiKey",
    "APIKey",
    "accessToken",
    "authorization",
    "http.request.header.authorization",
    "github_token",
    "hf_token",
    "token",
    "AWS_SECRET_ACCESS_KEY",
    "db.password",
    "AccountKey",
    "SharedAccessKey",
    "connection_string",
    "credentials",
    "x-auth-token",
    "refresh.token",
]


def _secret_parts(rule: SecretRule, text: str) -> list[str]:
    """What the rule's own pattern says is secret in `text` (its match minus the kept prefix)."""
    flags = re.IGNORECASE if rule.ignore_case else 0
    parts = []
    for m in re.finditer(rule.pattern, text, flags):
        start = m.end("p") if "p" in m.re.groupindex and m.group("p") is not None else m.start()
        parts.append(text[start : m.end()])
    return parts


@pytest.fixture(scope="module")
def scrubber() -> Scrubber:
    return Scrubber()


def test_the_table_is_complete() -> None:
    """Unique ids; every rule has a description, a gate, a positive and a negative sample."""
    ids = [rule.id for rule in RULES]
    assert len(ids) == len(set(ids))
    assert len(RULES) >= 60
    for rule in RULES:
        assert rule.description and rule.samples and rule.negatives, rule.id
        assert rule.keys and all(key == key.lower() for key in rule.keys), rule.id
        re.compile(rule.pattern)


@pytest.mark.parametrize(("rule", "sample"), SAMPLES, ids=[f"{r.id}-{i}" for i, (r, _) in enumerate(SAMPLES)])
def test_every_sample_is_scrubbed_by_its_rule(scrubber: Scrubber, rule: SecretRule, sample: str) -> None:
    out = scrubber.scrub_text(sample)
    assert f"[Scrubbed: {rule.id}]" in out
    if rule.gate != "assignment":
        parts = _secret_parts(rule, sample)
        assert parts, f"the rule's own pattern does not match its sample {sample!r}"
        for part in parts:
            assert part not in out


@pytest.mark.parametrize(
    ("rule", "negative"), NEGATIVES, ids=[f"{r.id}-{i}" for i, (r, _) in enumerate(NEGATIVES)]
)
def test_every_look_alike_is_kept(scrubber: Scrubber, rule: SecretRule, negative: str) -> None:
    assert scrubber.scrub_text(negative) == negative


def test_a_secret_glued_to_punctuation_is_found(scrubber: Scrubber) -> None:
    """Tokens are found after `=`, `:`, quotes and brackets, and at the very start and end."""
    token = RULES[[r.id for r in RULES].index("github_token")].samples[1]
    for text in (token, f"x={token}", f'"{token}"', f"({token})", f"key:{token}", f"[{token}]", f"<{token}>"):
        assert token not in scrubber.scrub_text(text), text


@pytest.mark.parametrize("key", ORDINARY_KEYS)
def test_ordinary_keys_are_kept(scrubber: Scrubber, key: str) -> None:
    assert secret_key_word(key) is None
    attrs, paths = scrubber.scrub_attributes({key: "some ordinary value"})
    assert attrs[key] == "some ordinary value" and paths == []


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_secret_keys_are_blanked(scrubber: Scrubber, key: str) -> None:
    attrs, _ = scrubber.scrub_attributes({key: "hunter22-plain"})
    assert attrs[key].startswith("[Scrubbed due to ")


def test_the_blanking_note_names_the_secret_word(scrubber: Scrubber) -> None:
    attrs, _ = scrubber.scrub_attributes({"x-api-key": "v", "AWS_SECRET_ACCESS_KEY": "v", "apiKey": "v"})
    assert attrs == {
        "x-api-key": "[Scrubbed due to 'api-key']",
        "AWS_SECRET_ACCESS_KEY": "[Scrubbed due to 'SECRET']",
        "apiKey": "[Scrubbed due to 'apiKey']",
    }


def _adversarial(rule: SecretRule) -> list[str]:
    """100 KB strings built to make a careless pattern backtrack: its gate strings and near misses."""
    size = 100_000
    out = ["a" * size, "-" * size, "=" * size, ": " * (size // 2), "A1" * (size // 2)]
    for key in rule.keys:
        unit = key + "a" * 19 + "!"
        out.append((unit * (size // len(unit) + 1))[:size])
        out.append((key * (size // len(key) + 1))[:size])
        out.append(key + "a" * size)
        out.append(key + "=" + " " * 3 + "a1" * (size // 2))
    for sample in rule.samples[:1]:
        out.append((sample[:-1] + " ") * (size // len(sample) + 1))
    return out


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_no_pattern_backtracks_on_100kb(scrubber: Scrubber, rule: SecretRule) -> None:
    """Each pattern, and the whole scrubber, get through 100 KB adversarial strings in linear time.

    A catastrophic pattern takes minutes on such input; the bound is loose on purpose.
    """
    flags = re.IGNORECASE if rule.ignore_case else 0
    regex = re.compile(rule.pattern, flags)
    for text in _adversarial(rule):
        start = time.perf_counter()
        for _ in regex.finditer(text):
            pass
        scrubber.scrub_text(text)
        elapsed = time.perf_counter() - start
        assert elapsed < 5.0, f"{rule.id}: {elapsed:.1f} s on {text[:40]!r}…"


def test_the_spelled_out_word_check_matches_the_word_list() -> None:
    from mastrace._secret_rules import ASSIGNMENT_WORDS, mentions_secret_word

    for word in ASSIGNMENT_WORDS:
        assert mentions_secret_word(f"x_{word}_y")
    assert not mentions_secret_word("the agent wrote a summary")
