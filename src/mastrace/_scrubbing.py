"""Secret scrubbing: by key name and by value shape, leaving a trail of what was scrubbed.

Two kinds of match:

- a *key* that names a secret (`password`, `api_key`, `authorization`, …) blanks its whole value
  as `[Scrubbed due to 'api_key']`, unless the key is a known-safe one such as `input_tokens`,
  `max_tokens` or `massgen.usage.*`;
- a *value shape* (`sk-…`, `AKIA…`, a JWT, `Bearer …`, a password in a URL, the value of a
  secret-named environment variable, …) anywhere inside a string is replaced by
  `[Scrubbed: <kind>]`, and the rest of the text is kept.

Strings holding JSON objects or arrays are parsed, scrubbed by key and by value, and re-encoded.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._errors import warn_once
from ._snapshot import dumps_json
from .exceptions import ConfigError

__all__ = [
    "DEFAULT_KEY_PATTERNS",
    "DEFAULT_VALUE_PATTERNS",
    "SAFE_KEYS",
    "SAFE_KEY_PATTERNS",
    "ScrubCallback",
    "ScrubMatch",
    "ScrubTrail",
    "Scrubber",
    "ScrubbingOptions",
    "format_path",
]

JsonPath = tuple["str | int", ...]

DEFAULT_KEY_PATTERNS: tuple[str, ...] = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    r"api[-_. ]?key",
    r"auth(?!or(?!iz))",  # auth, authorization, oauth, x-auth-token; not author, authority
    "credential",
    r"private[-_. ]?key",
    r"session[-_. ]?(?:token|key|secret)",
    "cookie",
    r"(?:\b|_)(?:csrf|xsrf|jwt|ssn)(?:\b|_)",
    r"access[-_. ]?token",
    r"refresh[-_. ]?token",
    "bearer",
    r"client[-_. ]?secret",
    r"social[-_. ]?security",
    r"credit[-_. ]?card",
    r"card[-_. ]?number",
    r"conn(?:ection)?[-_. ]?string",
    "token",  # github_token, hf_token…; counts such as input_tokens are in SAFE_KEY_PATTERNS
)
"""Regexes (case-insensitive, searched anywhere in a key) for keys whose values are secrets."""

SAFE_KEY_PATTERNS: tuple[str, ...] = (
    r"^(?:massgen|gen_ai|mastrace)\.usage\.",
    r"tokens(?:_details|_used|_count)?$",
    r"token_?counts?$",
    r"^(?:n|num|max)_?token$",
    r"tokeni[sz]",
)
"""Regexes for keys that look secret-named but hold token counts or usage: never blanked."""

SAFE_KEYS: frozenset[str] = frozenset(
    {
        "mastrace.scrubbed",
        "mastrace.truncated",
        "mastrace.config.hash",
        "exception.type",
        "error.type",
        "code.function",
        "code.namespace",
    }
)
"""Keys left untouched entirely, like every `logfire.*` key."""

DEFAULT_VALUE_PATTERNS: dict[str, tuple[str, ...]] = {
    "pem_private_key": (
        r"-----BEGIN[A-Z ]*PRIVATE KEY-----"
        r"(?:[\s\S]*?-----END[A-Z ]*PRIVATE KEY-----|[A-Za-z0-9+/=\s\\]*)",
    ),
    "anthropic_key": (r"sk-ant-(?<![\w-]sk-ant-)[A-Za-z0-9_-]{20,}",),
    "openai_key": (r"sk-(?<![\w-]sk-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",),
    "stripe_key": (
        r"sk_(?<![\w-]sk_)(?:live|test)_[A-Za-z0-9]{16,}",
        r"rk_(?<![\w-]rk_)(?:live|test)_[A-Za-z0-9]{16,}",
    ),
    "google_api_key": (r"AIza(?<![\w-]AIza)[0-9A-Za-z_-]{35}",),
    "github_token": (
        r"gh[pousr]_(?<![\w-]gh[pousr]_)[A-Za-z0-9]{36,}",
        r"github_pat_(?<![\w-]github_pat_)[A-Za-z0-9_]{22,}",
    ),
    "slack_token": (r"xox[abposr]-(?<![\w-]xox[abposr]-)[A-Za-z0-9-]{10,}",),
    "huggingface_token": (r"hf_(?<![\w-]hf_)[A-Za-z0-9]{30,}",),
    "aws_access_key_id": (
        r"AKIA(?<![A-Za-z0-9]AKIA)[A-Z0-9]{16}(?![A-Za-z0-9])",
        r"ASIA(?<![A-Za-z0-9]ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])",
    ),
    "aws_secret_access_key": (
        r"(?P<p>aws_secret_access_key[\"']?\s*[=:]\s*[\"']?)"
        r"[a-z0-9/+=]{40}(?![a-z0-9/+=])",
    ),
    "jwt": (r"eyJ(?<![\w-]eyJ)[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",),
    "bearer_token": (r"(?P<p>bearer(?<![a-z0-9_]bearer)\s+)[a-z0-9._~+/=-]{8,}",),
    "basic_auth": (r"(?P<p>basic(?<![a-z0-9_]basic)\s+)[a-z0-9+/]{8,}={0,2}(?![a-z0-9+/=])",),
    "url_password": (r"(?P<p>://[^\s:/?#@\[\]\"']+:)[^\s/?#@\"']+(?=@)",),
    "secret_assignment": tuple(
        rf"(?P<p>{name}[\"']?\s*[=:]\s*[\"']?)(?![\[{{])[^\s\"'&,;<>]{{4,}}"
        for name in (r"passw(?:or)?d", "secret", r"api[-_.]?key", r"private[-_.]?key", "token")
    ),
}
"""Regexes for secret shapes inside any string, by kind. Group `p` is a prefix that is kept.

Each regex starts with a literal, which lets the regex engine skip ahead quickly. The kinds in
`CASE_INSENSITIVE_KINDS` are written in lower case and match regardless of case.
"""

CASE_INSENSITIVE_KINDS = frozenset(
    {
        "aws_secret_access_key",
        "bearer_token",
        "basic_auth",
        "secret_assignment",
    }
)

_MIN_SECRET_LEN = 8  # no default shape is shorter, so shorter strings are not searched
_PLACEHOLDERS = frozenset({"none", "null", "true", "false", "undefined", "redacted", "******", "xxxxxxxx"})
_ENV_NAME_SKIP = re.compile(
    r"_(?:FILE|PATH|DIR|SOCK|URL|URI|HOST|ENDPOINT|MODE|TYPE|ENABLED|DISABLED)$", re.IGNORECASE
)
_MAX_DEPTH = 64
_PREFILTER_MAX = 1_024  # past this length the literal-led rules are faster than the screen
_SPECIAL = frozenset("[(?*+{\\.|^$")
_MAX_CACHED_KEYS = 8_192
_MAX_CACHED_TEXTS = 16_384
_CACHED_TEXT_MAX = 256


@dataclass(frozen=True)
class ScrubMatch:
    """What a `ScrubbingOptions.callback` receives for each candidate secret.

    Attributes:
        path: Where the value sits, e.g. `("attributes", "mastrace.config", "llm", "api_key")`.
        value: The value about to be redacted: the whole value for a key match, the matched
            substring for a value-shape match. Return it from the callback to keep it.
        pattern_match: The regex match that flagged it (on the key, or on the text).
        kind: `"key"` for a key-name match, else the value pattern's kind (`"openai_key"`, …).
    """

    path: JsonPath
    value: Any
    pattern_match: re.Match[str]
    kind: str


ScrubCallback = Callable[[ScrubMatch], Any]
"""Returns a replacement for the matched value, or None to scrub it."""


@dataclass(frozen=True)
class ScrubbingOptions:
    """How mastrace scrubs secrets before any exporter sees a span.

    Attributes:
        extra_patterns: More regexes (case-insensitive). A key matching one is blanked like a
            default secret key; a substring matching one is replaced by `[Scrubbed: custom]`.
        allow_keys: Key names (case-insensitive, exact) never blanked because of their name.
            Their values are still searched for secret shapes.
        callback: Called with a `ScrubMatch` for each candidate; return a replacement to keep
            instead, or None to scrub.

    Example:
        >>> import mastrace
        >>> mastrace.configure(scrubbing=mastrace.ScrubbingOptions(extra_patterns=[r"internal-\\d+"]))
        ... # doctest: +SKIP
    """

    extra_patterns: Sequence[str] = ()
    allow_keys: Sequence[str] = ()
    callback: ScrubCallback | None = None

    def __post_init__(self) -> None:
        if isinstance(self.extra_patterns, str) or isinstance(self.allow_keys, str):
            raise ConfigError("extra_patterns and allow_keys take a sequence of strings, not one string")
        object.__setattr__(self, "extra_patterns", tuple(self.extra_patterns))
        object.__setattr__(self, "allow_keys", tuple(self.allow_keys))
        for pattern in self.extra_patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(f"invalid scrubbing pattern {pattern!r}: {exc}") from exc
        if self.callback is not None and not callable(self.callback):
            raise ConfigError(f"scrubbing callback must be callable, not {self.callback!r}")


def format_path(path: JsonPath) -> str:
    """Spell a path for `mastrace.scrubbed`: `attributes['mastrace.config'].llm.api_key`."""
    parts: list[str] = []
    for i, part in enumerate(path):
        if isinstance(part, int):
            parts.append(f"[{part}]")
        elif i == 0:
            parts.append(part)
        elif part.isidentifier():
            parts.append(f".{part}")
        else:
            parts.append(f"[{part!r}]")
    return "".join(parts)


class ScrubTrail:
    """The trail of one scrubbing pass: the paths scrubbed, in order, and whether anything changed."""

    __slots__ = ("changed", "paths")

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.changed = False

    def record(self, path: JsonPath) -> None:
        self.changed = True
        text = format_path(path)
        if text not in self.paths:
            self.paths.append(text)


@dataclass(frozen=True)
class _Rule:
    """One value pattern. Folded rules search the lower-cased text, then re-match the original."""

    kind: str
    regex: re.Pattern[str]
    folded: bool
    full: re.Pattern[str]  # the case-insensitive form, matched against the original text
    label: str
    prefix: str  # literal text every match starts with (for the screening regex)


@dataclass(frozen=True)
class _Hit:
    start: int  # where the secret starts (after any kept prefix)
    end: int
    rule: _Rule
    match: re.Match[str]


def _rules(env: Mapping[str, str], extra: Sequence[str]) -> list[_Rule]:
    rules = [
        _Rule("env", re.compile(re.escape(v)), False, re.compile(re.escape(v)), f"env {name}", v)
        for v, name in sorted(env.items(), key=lambda kv: -len(kv[0]))
    ]
    for kind, patterns in DEFAULT_VALUE_PATTERNS.items():
        folded = kind in CASE_INSENSITIVE_KINDS
        for pattern in patterns:
            regex = re.compile(pattern)
            full = re.compile(pattern, re.IGNORECASE) if folded else regex
            rules.append(_Rule(kind, regex, folded, full, kind, _literal_prefix(pattern)))
    for pattern in extra:
        regex = re.compile(pattern, re.IGNORECASE)
        rules.append(_Rule("custom", regex, False, regex, "custom", ""))
    return rules


def _literal_prefix(pattern: str) -> str:
    """The literal text every match of `pattern` starts with (up to the first special character)."""
    pattern = pattern.removeprefix("(?P<p>")
    end = 0
    while end < len(pattern) and pattern[end] not in _SPECIAL:
        end += 1
    return pattern[:end]


def _prefilter(rules: Sequence[_Rule]) -> re.Pattern[str] | None:
    """One case-insensitive regex that every default or environment match must contain.

    Trying twenty regexes costs microseconds per string even when each fails at once; short
    strings are screened with this single search first. Custom patterns are not screened.
    """
    if any(rule.kind == "custom" for rule in rules):
        return None
    prefixes = {rule.prefix for rule in rules}
    return re.compile("|".join(map(re.escape, sorted(prefixes, key=len, reverse=True))), re.IGNORECASE)


def _secret_env_values(key_re: re.Pattern[str], safe_re: re.Pattern[str]) -> dict[str, str]:
    """Values of secret-named environment variables, mapped to the variable name."""
    found: dict[str, str] = {}
    for name, value in os.environ.items():
        if len(value) < _MIN_SECRET_LEN or not key_re.search(name) or safe_re.search(name):
            continue
        if _ENV_NAME_SKIP.search(name) or os.path.isabs(value) or value.isdigit():
            continue
        if (value.isalpha() and value.islower()) or ("://" in value and "@" not in value):
            continue  # a plain word or a URL without credentials: not worth blanking everywhere
        found.setdefault(value, name)
    return found


class Scrubber:
    """Scrubs secrets out of attribute values, strings and JSON documents. Never raises.

    Attributes:
        plain_keys: Keys that `key_match` has already found ordinary. A bounded cache that callers
            on a hot path may test membership in before calling `key_match`; do not modify it.
        plain_texts: Strings that `is_plain_text` has already found plain, likewise.

    Example:
        >>> scrubber = Scrubber(ScrubbingOptions())
        >>> scrubber.scrub_text("curl -H 'Authorization: Bearer abcdefgh12345678'")
        "curl -H 'Authorization: Bearer [Scrubbed: bearer_token]'"
    """

    def __init__(self, options: ScrubbingOptions | None = None) -> None:
        options = options or ScrubbingOptions()
        self._callback = options.callback
        self._allow = frozenset(k.lower() for k in options.allow_keys)
        self._extra = [re.compile(p, re.IGNORECASE) for p in options.extra_patterns]
        self._key_re = re.compile("|".join(DEFAULT_KEY_PATTERNS), re.IGNORECASE)
        self._safe_re = re.compile("|".join(SAFE_KEY_PATTERNS), re.IGNORECASE)
        self._rules = _rules(_secret_env_values(self._key_re, self._safe_re), options.extra_patterns)
        self._prefilter = _prefilter(self._rules)
        self._key_cache: dict[str, re.Match[str] | None] = {}
        self._plain_cache: dict[str, bool] = {}
        # Sets rather than the dicts above: a membership test is the cheapest check a caller can
        # make inline, once per attribute of every span.
        self.plain_keys: set[str] = set()
        self.plain_texts: set[str] = set()

    # -- public API -------------------------------------------------------------------------------
    def scrub_text(self, s: str, path: JsonPath = ()) -> str:
        """Replace every secret-shaped substring of `s` by `[Scrubbed: <kind>]`."""
        return self._scrub_text(s, path, ScrubTrail())

    def scrub_value(self, value: Any, path: JsonPath = ()) -> Any:
        """Scrub a JSON-like value by key and by value; returns a copy (tuples become lists)."""
        if isinstance(value, str):
            return self._scrub_string(value, path, ScrubTrail(), 0)
        tree = _thaw(value, 0)
        return self._scrub_tree(tree, path, ScrubTrail(), 0, scan_leaves=True)

    def scrub_attributes(
        self, attrs: Mapping[str, Any], root: JsonPath = ("attributes",)
    ) -> tuple[dict[str, Any], list[str]]:
        """Scrub OpenTelemetry attributes.

        Returns:
            The new attributes (unchanged values are the same objects) and the scrubbed paths.
        """
        trail = ScrubTrail()
        out = {key: self.scrub_attribute(key, value, root, trail) for key, value in attrs.items()}
        return out, trail.paths

    def scrub_attribute(self, key: str, value: Any, root: JsonPath, trail: ScrubTrail) -> Any:
        """Scrub one attribute value; returns `value` itself when nothing was scrubbed."""
        if key in SAFE_KEYS or key.startswith("logfire."):
            return value
        match = self.key_match(key)
        if match is not None and not (value is None or isinstance(value, bool)):
            return self._redact_key((*root, key), value, match, trail)
        if isinstance(value, str):
            return (
                value if len(value) < _MIN_SECRET_LEN else self._scrub_string(value, (*root, key), trail, 0)
            )
        if isinstance(value, (tuple, list)) and value and isinstance(value[0], str):
            new = [
                self._scrub_string(v, (*root, key, i), trail, 0) if isinstance(v, str) else v
                for i, v in enumerate(value)
            ]
            if any(a is not b for a, b in zip(new, value, strict=True)):
                return tuple(new)
        return value

    def key_match(self, key: str) -> re.Match[str] | None:
        """The match that makes `key` a secret key, or None when its value may be kept."""
        cache = self._key_cache
        if key in cache:
            return cache[key]
        match = self._match_key(key)
        if len(cache) >= _MAX_CACHED_KEYS:
            cache.clear()
            self.plain_keys.clear()
        cache[key] = match
        if match is None:
            self.plain_keys.add(key)
        return match

    def is_plain_text(self, s: str) -> bool:
        """A quick test: True when `s` is neither JSON nor holds anything secret-shaped."""
        if len(s) < _MIN_SECRET_LEN:
            return True
        if s[0] in "{[" or len(s) > _PREFILTER_MAX or self._prefilter is None:
            return False
        # Attribute values repeat (agent ids, model names, round types): remember the short ones, as
        # one screening search costs microseconds and a dict look-up a few dozen nanoseconds.
        cache = self._plain_cache
        known = cache.get(s)
        if known is not None:
            return known
        plain = self._prefilter.search(s) is None
        if len(s) <= _CACHED_TEXT_MAX:
            if len(cache) >= _MAX_CACHED_TEXTS:
                cache.clear()
                self.plain_texts.clear()
            cache[s] = plain
            if plain:
                self.plain_texts.add(s)
        return plain

    # -- finding value shapes ---------------------------------------------------------------------
    def _find(self, s: str) -> list[_Hit]:
        """Every secret-shaped substring of `s`, leftmost first, without overlaps."""
        if len(s) <= _PREFILTER_MAX and self._prefilter is not None and self._prefilter.search(s) is None:
            return []
        hits: list[_Hit] = []
        low: str | None = None
        for rule in self._rules:
            if rule.folded:
                low = s.lower() if low is None else low
                if len(low) == len(s):  # one char per char: positions line up with `s`
                    hits.extend(
                        _hit(rule, rule.full.match(s, m.start()) or m) for m in rule.regex.finditer(low)
                    )
                    continue
            hits.extend(_hit(rule, m) for m in rule.full.finditer(s))
        hits = [hit for hit in hits if _is_secret(hit.rule.kind, s[hit.start : hit.end])]
        if len(hits) > 1:
            order = {id(rule): i for i, rule in enumerate(self._rules)}
            hits.sort(key=lambda h: (h.start, order[id(h.rule)]))
            kept: list[_Hit] = []
            for hit in hits:
                if not kept or hit.start >= kept[-1].end:
                    kept.append(hit)
            hits = kept
        return hits

    def _scrub_text(self, s: str, path: JsonPath, trail: ScrubTrail, hits: list[_Hit] | None = None) -> str:
        if len(s) < _MIN_SECRET_LEN:
            return s
        hits = self._find(s) if hits is None else hits
        if not hits:
            return s
        parts: list[str] = []
        pos = 0
        for hit in hits:
            secret = s[hit.start : hit.end]
            replacement = self._replacement(hit, secret, path, trail)
            if replacement is None:
                continue
            parts.append(s[pos : hit.start])
            parts.append(replacement)
            pos = hit.end
        if not parts:
            return s
        parts.append(s[pos:])
        return "".join(parts)

    def _replacement(self, hit: _Hit, secret: str, path: JsonPath, trail: ScrubTrail) -> str | None:
        if self._callback is not None:
            kept = self._call(ScrubMatch(path, secret, hit.match, hit.rule.kind))
            if kept is not None:
                kept = str(kept)
                if kept == secret:
                    return None
                trail.changed = True
                return kept
        trail.record(path)
        return f"[Scrubbed: {hit.rule.label}]"

    # -- keys and JSON ----------------------------------------------------------------------------
    def _match_key(self, key: str) -> re.Match[str] | None:
        if key in SAFE_KEYS or key.lower() in self._allow or self._safe_re.search(key):
            return None
        match = self._key_re.search(key)
        if match is None:
            match = next((m for p in self._extra if (m := p.search(key))), None)
        return match

    def _scrub_string(self, s: str, path: JsonPath, trail: ScrubTrail, depth: int) -> str:
        if len(s) < _MIN_SECRET_LEN:
            return s
        hits = self._find(s)
        if s[0] in "{[" and depth < _MAX_DEPTH:
            try:
                parsed = json.loads(s)
            except Exception:
                parsed = None
            if isinstance(parsed, (dict, list)):
                changed, trail.changed = trail.changed, False
                # Escapes can hide a shape from the raw text ("Bearer\\tabc"): then look at every leaf.
                tree = self._scrub_tree(parsed, path, trail, depth, scan_leaves=bool(hits) or "\\" in s)
                changed, trail.changed = trail.changed, changed or trail.changed
                return dumps_json(tree) if changed else s
        return self._scrub_text(s, path, trail, hits)

    def _scrub_tree(
        self, tree: Any, path: JsonPath, trail: ScrubTrail, depth: int, *, scan_leaves: bool
    ) -> Any:
        """Scrub a parsed JSON tree in place by key; then its string leaves by value shape."""
        leaves: list[tuple[Any, Any, JsonPath]] = []
        if isinstance(tree, (dict, list)):
            self._walk_keys(tree, path, trail, leaves, depth)
        else:
            return tree
        if not leaves:
            return tree
        if scan_leaves:
            texts = [node[k] for node, k, _ in leaves]
            hit_leaves = _leaves_hit(texts, self._find("\x00".join(texts)))
        else:  # nested JSON strings can still hold secret keys
            hit_leaves = set()
        for i, (node, k, leaf_path) in enumerate(leaves):
            text = node[k]
            if i in hit_leaves or (text[:1] in "{[" and len(text) >= _MIN_SECRET_LEN):
                node[k] = self._scrub_string(text, leaf_path, trail, depth + 1)
        return tree

    def _walk_keys(
        self,
        node: Any,
        path: JsonPath,
        trail: ScrubTrail,
        leaves: list[tuple[Any, Any, JsonPath]],
        depth: int,
    ) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node)
        # The keys of a `packages` mapping are distribution names (`google-auth`, `tiktoken`), not
        # secret names: only their values are checked, by shape.
        names_are_packages = bool(path) and path[-1] == "packages"
        for k, v in items:
            child = (*path, k)
            if isinstance(k, str) and not names_are_packages and not (v is None or isinstance(v, bool)):
                match = self.key_match(k)
                if match is not None:
                    node[k] = self._redact_key(child, v, match, trail)
                    continue
            if isinstance(v, str):
                if len(v) >= _MIN_SECRET_LEN:
                    leaves.append((node, k, child))
            elif isinstance(v, (dict, list)):
                if depth + 1 >= _MAX_DEPTH:
                    node[k] = self._too_deep(v, child, trail)
                else:
                    self._walk_keys(v, child, trail, leaves, depth + 1)

    def _too_deep(self, value: Any, path: JsonPath, trail: ScrubTrail) -> Any:
        text = dumps_json(value)
        if not self._find(text) and not self._key_re.search(text):
            return value
        trail.record(path)
        return "[Scrubbed: nested too deep]"

    def _redact_key(self, path: JsonPath, value: Any, match: re.Match[str], trail: ScrubTrail) -> Any:
        if self._callback is not None:
            kept = self._call(ScrubMatch(path, value, match, "key"))
            if kept is not None:
                trail.changed = trail.changed or kept is not value
                return kept
        trail.record(path)
        redacted = f"[Scrubbed due to {match.group(0)!r}]"
        return (redacted,) if isinstance(value, (tuple, list)) else redacted

    def _call(self, match: ScrubMatch) -> Any:
        try:
            return self._callback(match) if self._callback is not None else None
        except Exception:
            warn_once("scrubbing callback", "mastrace: the scrubbing callback raised; the value was scrubbed")
            return None


def _hit(rule: _Rule, m: re.Match[str]) -> _Hit:
    start = m.end("p") if "p" in m.re.groupindex and m.group("p") is not None else m.start()
    return _Hit(start, m.end(), rule, m)


def _leaves_hit(texts: list[str], hits: list[_Hit]) -> set[int]:
    """Indexes of the leaves, joined by one separator character, that the hits fall in."""
    if not hits:
        return set()
    starts: list[int] = []
    pos = 0
    for text in texts:
        starts.append(pos)
        pos += len(text) + 1
    found: set[int] = set()
    for hit in hits:
        first = bisect_right(starts, hit.start) - 1
        last = bisect_right(starts, max(hit.end - 1, hit.start)) - 1
        found.update(range(first, last + 1))
    return found


def _thaw(value: Any, depth: int) -> Any:
    """A mutable copy of a JSON-like value: mappings become dicts, sequences lists."""
    if depth > _MAX_DEPTH:
        return value
    if isinstance(value, Mapping):
        return {k if isinstance(k, str) else str(k): _thaw(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_thaw(v, depth + 1) for v in value]
    return value


def _is_secret(kind: str, secret: str) -> bool:
    """Second look at matches whose shape alone is ambiguous."""
    if kind == "secret_assignment":
        return secret.lower() not in _PLACEHOLDERS and not secret.startswith("[Scrubbed")
    if kind == "basic_auth":  # "Basic understanding" is prose; credentials decode to user:pass
        try:
            return b":" in base64.b64decode(secret + "=" * (-len(secret) % 4), validate=True)
        except (binascii.Error, ValueError):
            return False
    return True
