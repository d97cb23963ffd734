"""Secrets recognisable only from their context: assignments, Kubernetes `Secret` data, and the second
looks that some rules of the table ask for (`check`).

Everything here reads the ASCII copy of a text (`text`, one character per character of the original)
and its lower-case twin (`low`), and returns matches whose spans are those of the original text.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from ._contextual import looks_random
from ._lazy_re import LazyPattern
from ._names import literal_value_is_secret, looks_like_identifier, secret_key_word
from ._required import requirements
from ._table import RULES, mentions_secret_word

__all__ = [
    "CHECKS",
    "FINDER_NEEDS",
    "Assignment",
    "KeywordIndex",
    "find_assignments",
    "find_k8s_secret_values",
]

_WORD = re.compile(r"[a-z0-9]+")
_MAX_NAMES = 4096
_NAME_BACKWARDS = re.compile(r"[ \t]{0,3}[\"']?(?P<name>[A-Za-z0-9_.-]{1,80})")
_VALUE_START = re.compile(r"[ \t]{0,3}(?:(?<=:)=|(?<==)>)?[ \t]{0,3}")
_QUOTED_VALUE = re.compile(r"([\"'`])([^\"'`\\\n]{1,1000})\1")
_BARE_VALUE = re.compile(r"[^\s\"'`&,;<>)\]}]{1,1000}")


@dataclass(frozen=True)
class Assignment:
    """A secret-named assignment found in free text: the value's span, its match, and the rule naming it."""

    start: int
    end: int
    match: re.Match[str]
    rule_id: str


class KeywordIndex:
    """The ``keyword`` rules, by the name segment that announces them (`datadog`, `asana`, …)."""

    def __init__(self) -> None:
        self.by_word: dict[str, list[tuple[str, LazyPattern]]] = {}
        for rule in RULES:
            if rule.gate == "keyword":  # compiled when a name first announces it
                value = LazyPattern(rule.value, re.IGNORECASE | re.ASCII)
                for hint in rule.hints:
                    self.by_word.setdefault(hint, []).append((rule.id, value))
        self._by_name: dict[str, list[tuple[str, LazyPattern]]] = {}  # names repeat: kept

    def rule_for(self, name_low: str, value: str) -> str | None:
        """The id of the keyword rule announced by a segment (or two joined) of `name_low` whose value
        format `value` has, or None."""
        announced = self._by_name.get(name_low)
        if announced is None:
            announced = self._announced(name_low)
        for rule_id, pattern in announced:
            if pattern.fullmatch(value):
                return rule_id
        return None

    def _announced(self, name_low: str) -> list[tuple[str, LazyPattern]]:
        """The keyword rules a name announces, in the order `rule_for` tries them."""
        words = _WORD.findall(name_low)
        found = [
            candidate
            for i, word in enumerate(words)
            for joined in (word, word + words[i + 1] if i + 1 < len(words) else "")
            for candidate in self.by_word.get(joined, ())
        ]
        if len(self._by_name) >= _MAX_NAMES:
            self._by_name.clear()
        self._by_name[name_low] = found
        return found


def find_assignments(
    text: str,
    low: str,
    is_secret_name: Callable[[str], bool],
    keywords: KeywordIndex,
    separators: Sequence[int] | None = None,
) -> Iterator[Assignment]:
    """`name = "…"`, `name := "…"`, `"name" => "…"`, `name: …`, `NAME=…` with a secret-named name.

    Driven by the separators, which prose has few of (or only those in `separators`, where a first
    pass saw a secret word before one): for each `=` or `:`, the name before it is read backwards
    from the reversed text by one anchored match (no loop per character).
    """
    backwards = low[::-1]
    size = len(text)
    judged: dict[tuple[str, str, bool], bool] = {}  # secret-dense text repeats its names and values
    for i in _separators(text) if separators is None else separators:
        found = _assignment_at(text, low, backwards, size, i, is_secret_name, keywords, judged)
        if found is not None:
            yield found


_MAX_JUDGED = 1024  # values judged per text, remembered for its later occurrences


def _separators(text: str) -> Iterator[int]:
    for sep in "=:":
        i = text.find(sep)
        while i != -1:
            yield i
            i = text.find(sep, i + 1)


def _assignment_at(
    text: str,
    low: str,
    backwards: str,
    size: int,
    sep_at: int,
    is_secret_name: Callable[[str], bool],
    keywords: KeywordIndex,
    judged: dict[tuple[str, str, bool], bool],
) -> Assignment | None:
    named = _NAME_BACKWARDS.match(backwards, size - sep_at)
    if named is None:
        return None
    start, name_end = size - named.end("name"), size - named.start("name")
    name_low = low[start:name_end]
    if not mentions_secret_word(name_low):
        return None
    name = text[start:name_end]
    if not is_secret_name(name):
        return None
    if text[sep_at] == ":" and (text[sep_at + 1 : sep_at + 2] == ":" or text[sep_at - 1 : sep_at] == ":"):
        return None  # `Auth::Unauthenticated`: a scope in code, not an assignment
    value_at = _VALUE_START.match(text, sep_at + 1).end()  # type: ignore[union-attr]
    if value_at >= size:
        return None
    quoted = text[value_at] in "\"'`"
    value = _QUOTED_VALUE.match(text, value_at) if quoted else _BARE_VALUE.match(text, value_at)
    if value is None:
        return None
    begin, end = value.span(2) if quoted else value.span()
    literal = text[begin:end]
    if literal.startswith(("=", ">")):  # `a == b`, `a => b` read from the wrong side
        return None
    rule_id = keywords.rule_for(name_low, literal)
    if rule_id is None:
        key = (name, literal, quoted)
        secret = judged.get(key)
        if secret is None:
            if len(judged) >= _MAX_JUDGED:
                judged.clear()
            secret = judged[key] = literal_value_is_secret(name, literal, quoted)
        if not secret:
            return None
        rule_id = "secret_assignment"
    return Assignment(begin, end, value, rule_id)


_K8S_KIND = re.compile(r"kind[\"']?[ \t]*:[ \t]*[\"']?secret[\"']?(?![a-z0-9_-])")
_K8S_DATA = re.compile(r"^([ \t]*)(?:data|stringdata)[ \t]*:[ \t]*$", re.MULTILINE)
_K8S_ITEM = re.compile(r"([ \t]+)[a-z0-9_.-]{1,253}[ \t]*:[ \t]*[\"']?([^\s\"'#]{1,65536})")


FINDER_NEEDS = {
    "k8s_secret": tuple(
        replace(need, clauses=(*need.clauses, frozenset("\n"))) for need in requirements(_K8S_KIND.pattern)
    )
}
"""What a text must hold for a finder to find anything, read by the first pass: `kind: secret`, and
a newline (the values are on the lines after a `data:` line)."""


def find_k8s_secret_values(text: str, low: str) -> Iterator[re.Match[str]]:
    """The values under `data:` and `stringData:` of a text that declares `kind: Secret` (YAML)."""
    if _K8S_KIND.search(low) is None:
        return
    for block in _K8S_DATA.finditer(low):
        indent = len(block.group(1))
        pos = block.end() + 1
        while pos < len(low):
            item = _K8S_ITEM.match(low, pos)
            if item is None or len(item.group(1)) <= indent:
                break
            value = text[item.start(2) : item.end(2)]
            if not value.startswith(("{{", "|", ">", "$")):
                yield item
            line_end = low.find("\n", item.end())
            pos = len(low) if line_end == -1 else line_end + 1


def _decodes_to_credentials(secret: str, _m: re.Match[str]) -> bool:
    """`Basic` credentials are base64 of `user:password`; "Basic understanding" is prose."""
    try:
        return b":" in base64.b64decode(secret + "=" * (-len(secret) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False


def _literal(secret: str, _m: re.Match[str]) -> bool:
    """Not a reference (`$X`, `${X}`, `{{x}}`, `%X%`, `<placeholder>`)."""
    return not (secret.startswith(("$", "<", "{", "%")) or "${" in secret or "{{" in secret)


def _entropy(secret: str, m: re.Match[str]) -> bool:
    """A literal that looks random, as the value of a secret-named key must (`literal_value_is_secret`)."""
    return literal_value_is_secret("token", secret, quoted=True)


def _not_identifier(secret: str, _m: re.Match[str]) -> bool:
    """Not an identifier in code that happens to start like a token (`hf_requiredCharacteristic…`)."""
    return not looks_like_identifier(secret.split("_", 1)[-1])


def _secret_name(m: re.Match[str]) -> bool:
    name = m.group("name")
    return secret_key_word(name) is not None


def _flag(secret: str, m: re.Match[str]) -> bool:
    """`--password …`: the flag names a secret (not `--password-file`), and the value is a literal."""
    return _literal(secret, m) and _secret_name(m)


def _xml(secret: str, m: re.Match[str]) -> bool:
    """`<add key="…Password" value="…">`: the key names a secret, and the value is a literal."""
    return _literal(secret, m) and _secret_name(m)


def _random(secret: str, _m: re.Match[str]) -> bool:
    """The part after a short prefix (`s.` of a Vault token) looks random, not like a member access."""
    return looks_random(secret.partition(".")[2] or secret, min_len=8)


CHECKS: dict[str, Callable[[str, re.Match[str]], bool]] = {
    "basic_credentials": _decodes_to_credentials,
    "literal": _literal,
    "entropy": _entropy,
    "not_identifier": _not_identifier,
    "flag": _flag,
    "xml": _xml,
    "random": _random,
}
"""Second looks at a match, by the name a rule gives in its `check` field; False keeps the text."""
