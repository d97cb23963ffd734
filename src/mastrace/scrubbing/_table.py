"""The secret rule table, read from `rules.json`: every credential shape with the samples that prove it.

The table is data. Each rule says what it detects (`id`, `provider`, `description`), how the engine
finds it, and samples it must scrub and look-alikes it must keep. Gates, in lower-cased ASCII text:

- ``"word"``: a token with a literal prefix (``ghp_``, ``sk-ant-``). It is looked for only at the start
  of a *run*: `MIN_TOKEN_LEN` or more run characters (letters, digits, ``_ . + ~ -``) with none just
  before. `body` is the rest of the token and `end` the characters that may not follow it.
- ``"shape"``: a token without a prefix (a Discord bot token); `pattern` is tried when a long run
  holds one of `hints`, and a match must lie inside such a run.
- ``"text"``: `pattern` is tried when one of `hints` occurs anywhere, and a match must contain it.
  Two patterns name engine functions instead (`assignment`, `k8s_secret`).
- ``"keyword"``: a provider's credential that is only a random string (`value`): scrubbed where it
  is the literal value of a secret-named assignment whose name holds one of `hints` as a segment.

A group named `p` in a pattern is a prefix that is kept (`Bearer ` in `Bearer <token>`). Samples are
templates: ``{{a:36}}`` stands for 36 characters drawn from the alphabet `a` (see `ALPHABETS`).
"""

from __future__ import annotations

import functools
import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "ALPHABETS",
    "ASSIGNMENT_WORDS",
    "MIN_TOKEN_LEN",
    "RULES",
    "RUN",
    "RUN_BYTES",
    "SecretRule",
    "expand",
    "long_runs",
    "mentions_secret_word",
    "python_pattern",
    "run_map",
]

Gate = Literal["word", "shape", "text", "keyword"]
MIN_TOKEN_LEN = 20
"""Runs of token characters shorter than this are not looked at by the ``word`` and ``shape`` gates."""
RUN = "A-Za-z0-9_.+~-"
"""The characters of a run (the body of a character class)."""
RUN_BYTES = bytes(ord("a") if re.fullmatch(f"[{RUN}]", chr(c)) else ord(" ") for c in range(256))
"""A `bytes.translate` table: run characters become `a`, the others a blank (then a run of
`MIN_TOKEN_LEN` or more is a substring search, C-speed)."""
_LONG_RUN = b"a" * MIN_TOKEN_LEN
FINDERS = frozenset({"assignment", "k8s_secret"})

ASSIGNMENT_WORDS = ("pass", "pwd", "secret", "token", "key", "auth", "cred", "cookie", "jwt", "sas", "dsn")
"""Lower-case fragments one of which every secret-named key contains: the gate for assignments
(`NAME=value`, `"name": "value"`, `name: value`) in free text."""


def mentions_secret_word(text: str) -> bool:
    """Whether lower-cased `text` holds one of `ASSIGNMENT_WORDS` (spelled out: this runs per separator)."""
    return (
        "key" in text
        or "token" in text
        or "pass" in text
        or "secret" in text
        or "auth" in text
        or "pwd" in text
        or "cred" in text
        or "cookie" in text
        or "jwt" in text
        or "sas" in text
        or "dsn" in text
    )


def run_map(low: str) -> bytes:
    """ASCII `low` with each run character as `a` and every other character as a blank."""
    return low.encode("ascii", "replace").translate(RUN_BYTES)


def long_runs(low: str) -> list[tuple[int, int]]:
    """Where the runs of `MIN_TOKEN_LEN` token characters or more of ASCII `low` start and end."""
    runs = run_map(low)
    found = []
    at = runs.find(_LONG_RUN)
    while at != -1:
        end = runs.find(b" ", at)
        end = len(runs) if end == -1 else end
        found.append((at, end))
        at = runs.find(_LONG_RUN, end)
    return found


@dataclass(frozen=True)
class SecretRule:
    """One credential format of the table (see the module docstring for the fields' meaning)."""

    id: str
    provider: str
    description: str
    gate: Gate
    samples: tuple[str, ...]
    negatives: tuple[str, ...]
    prefixes: tuple[str, ...] = ()
    body: str = ""
    end: str = ""
    hints: tuple[str, ...] = ()
    pattern: str = ""
    value: str = ""
    ignore_case: bool = False
    check: str | None = None

    @property
    def finder(self) -> str | None:
        """The engine function that finds this rule's secrets, when it is not one regular expression."""
        return self.pattern if self.pattern in FINDERS else None

    @property
    def keys(self) -> tuple[str, ...]:
        """The gate strings, lower case: prefixes of a word rule, hints of the others."""
        return tuple(p.lower() for p in self.prefixes) if self.gate == "word" else self.hints


def python_pattern(rule: SecretRule, prefix: str = "") -> str:
    """The regular expression for `rule` (for a word rule, for one of its prefixes).

    A word rule's literal comes first, so that the engine can skip ahead to it; the look-behind after
    it checks that a run starts there, and the look-ahead that the run is long enough.
    """
    if rule.gate != "word":
        return rule.pattern
    lit = re.escape(prefix.lower() if rule.ignore_case else prefix)
    need = max(0, MIN_TOKEN_LEN - len(prefix))
    tail = f"(?![{rule.end}])" if rule.end else ""
    return f"{lit}(?<![{RUN}]{lit})(?=[{RUN}]{{{need}}})(?:{rule.body}){tail}"


ALPHABETS = {
    "a": "aB3dE5fG7hJ9kL2mN4pQ6rS8tU1vW0xYzCiKoZb",
    "h": "0123456789abcdef",
    "H": "0123456789ABCDEF",
    "d": "0123456789",
    "u": "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567",
    "l": "abcdefghijklmnopqrstuvwxyz",
    "L": "aBcDeFgHiJkLmNoPqRsTuVwXyZAbCdEfGhIjKlMnOpQrStUvWxYz",
    "n": "abcdefghijklmnopqrstuvwxyz0123456789",
    "b": "aB3dE5fG7hJ9kL2mN4pQ6rS8tU1vW0xYz+/",
    "w": "aB3dE5fG7hJ9kL2mN4pQ6rS8tU1vW0xYz_-",
    "B": "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",
}
"""The alphabets of sample templates: `{{a:36}}` is 36 characters drawn from `ALPHABETS["a"]`."""
_TEMPLATE = re.compile(r"\{\{([A-Za-z]):(\d+)\}\}")


def expand(template: str) -> str:
    """A sample with its ``{{x:n}}`` fields filled in: deterministic, different for each template."""
    state = zlib.crc32(template.encode())

    def fill(m: re.Match[str]) -> str:
        nonlocal state
        alphabet = ALPHABETS[m.group(1)]
        out = []
        for _ in range(int(m.group(2))):
            state = (state * 1103515245 + 12345) % 2147483648
            out.append(alphabet[(state >> 16) % len(alphabet)])
        return "".join(out)

    return _TEMPLATE.sub(fill, template)


def _rule(raw: dict[str, Any]) -> SecretRule:
    fields = dict(raw)
    for name in ("samples", "negatives", "prefixes", "hints"):
        if name in fields:
            fields[name] = tuple(fields[name])
    return SecretRule(**fields)


@functools.cache
def load() -> tuple[SecretRule, ...]:
    """The rules of `rules.json`, in order: where two rules match the same text, the earlier names it."""
    data = json.loads(Path(__file__).with_name("rules.json").read_text(encoding="utf-8"))
    return tuple(_rule(raw) for raw in data["rules"])


RULES = load()
"""Every rule of the table."""
