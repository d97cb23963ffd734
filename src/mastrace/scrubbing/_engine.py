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

import json
import os
import re
from bisect import bisect_right
from collections.abc import Mapping
from itertools import pairwise
from typing import Any

from opentelemetry.sdk.resources import Resource

from .. import semconv
from ..tracing._errors import warn_once
from ..tracing._snapshot import dumps_json
from ._finder import Finder, Hit, Rule
from ._names import secret_key_word
from ._options import JsonPath, ScrubbingOptions, ScrubCallback, ScrubMatch
from ._table import ASSIGNMENT_WORDS

__all__ = [
    "SAFE_KEYS",
    "ScrubCallback",
    "ScrubMatch",
    "ScrubTrail",
    "Scrubber",
    "ScrubbingOptions",
    "format_path",
]


SAFE_KEYS: frozenset[str] = frozenset(
    {
        semconv.MASTRACE_SCRUBBED,
        semconv.MASTRACE_TRUNCATED,
        semconv.MASTRACE_CONFIG_HASH,
        semconv.EXCEPTION_TYPE,
        semconv.ERROR_TYPE,
        semconv.MASTRACE_CODE_FUNCTION,
        semconv.MASTRACE_CODE_NAMESPACE,
    }
)
"""Keys left untouched entirely, like every `logfire.*` key."""

_WHOLE = re.compile(r".+", re.DOTALL)
_MIN_SECRET_LEN = 8  # no default shape is shorter, so shorter strings are not searched
_ENV_NAME_SKIP = re.compile(
    r"_(?:FILE|PATH|DIR|SOCK|URL|URI|HOST|ENDPOINT|MODE|TYPE|ENABLED|DISABLED)$", re.IGNORECASE
)
_MAX_DEPTH = 64
_MAX_CACHED_KEYS = 8_192
_MAX_CACHED_TEXTS = 16_384
_CACHED_TEXT_MAX = 256
_MAX_CACHED_JSON_CHARS = 4_000_000


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


def _secret_env_values() -> dict[str, str]:
    """Values of secret-named environment variables, mapped to the variable name."""
    found: dict[str, str] = {}
    for name, value in os.environ.items():
        if len(value) < _MIN_SECRET_LEN or secret_key_word(name) is None:
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

    def __init__(self, options: ScrubbingOptions | None = None, *, matcher: str | None = None) -> None:
        """Build a scrubber.

        Args:
            options: What to scrub beyond the defaults, and a callback.
            matcher: The first-pass matcher: `"hyperscan"`, `"re2"` or `"python"`; by default the
                fastest one installed. All three give the same output.
        """
        options = options or ScrubbingOptions()
        self._callback = options.callback
        self._allow = frozenset(k.lower() for k in options.allow_keys)
        self._extra = [re.compile(p, re.IGNORECASE) for p in options.extra_patterns]
        self._custom = [Rule("custom", regex, "custom") for regex in self._extra]
        env = [
            (value, Rule("env", re.compile(re.escape(value)), f"env {name}", index=-1))
            for value, name in sorted(_secret_env_values().items(), key=lambda kv: -len(kv[0]))
        ]
        self._finder = Finder(matcher, env, self._custom, self._is_secret_name)
        self._key_cache: dict[str, re.Match[str] | None] = {}
        self._plain_cache: dict[str, bool] = {}
        self._plain_json: set[str] = set()  # long JSON texts found plain
        self._plain_json_chars = 0
        # Sets rather than the dicts above: a membership test is the cheapest check a caller can
        # make inline, once per attribute of every span.
        self.plain_keys: set[str] = set()
        self.plain_texts: set[str] = set()
        # Resources scrubbed by `_transform.clean_resource`, by id: (the resource, its clean copy).
        self.resources: dict[int, tuple[Resource, Resource]] = {}

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
        if match is not None and not _nothing_to_hide(value):
            return self._redact_key((*root, key), value, match, trail)
        if isinstance(value, str):
            return (
                value if len(value) < _MIN_SECRET_LEN else self._scrub_string(value, (*root, key), trail, 0)
            )
        # Any text in a sequence, not only a first one: OpenTelemetry sequences may hold None first.
        if isinstance(value, (tuple, list)) and any(isinstance(v, str) for v in value):
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
        if self._custom:
            return False
        if s[0] in "{[":  # JSON: plain when scrubbing it changes nothing (short ones remembered)
            if len(s) > _CACHED_TEXT_MAX:
                return False
            known = self._plain_cache.get(s)
            if known is None:
                known = self._scrub_string(s, (), ScrubTrail(), 0) is s
                self._remember(s, known)
            return known
        # Attribute values repeat (agent ids, model names, round types): remember the short ones, as
        # the gate costs a microsecond or more and a dict look-up a few dozen nanoseconds.
        cache = self._plain_cache
        known = cache.get(s)
        if known is not None:
            return known
        plain = not self._finder.find(s)
        if len(s) <= _CACHED_TEXT_MAX:
            self._remember(s, plain)
        return plain

    def is_plain_json(self, s: str) -> bool:
        """Whether a JSON text too long for `is_plain_text` to remember scrubs to itself.

        It costs a scrub (what the caller would do next anyway), and a plain one is remembered (see
        `_scrub_string`). False with a callback or custom patterns, as `is_plain_text` says then.
        """
        if self._custom or self._callback is not None or len(s) <= _CACHED_TEXT_MAX or s[0] not in "{[":
            return False
        return self._scrub_string(s, (), ScrubTrail(), 0) is s

    def _remember(self, s: str, plain: bool) -> None:
        cache = self._plain_cache
        if len(cache) >= _MAX_CACHED_TEXTS:
            cache.clear()
            self.plain_texts.clear()
        cache[s] = plain
        if plain:
            self.plain_texts.add(s)

    # -- finding value shapes ---------------------------------------------------------------------
    @property
    def matcher(self) -> str:
        """The name of the first-pass matcher in use (`hyperscan`, `re2` or `python`)."""
        return self._finder.matcher.name

    def _find(self, s: str) -> list[Hit]:
        """Every secret-shaped substring of `s`, leftmost first, without overlaps."""
        return self._finder.find(s)

    def _is_secret_name(self, name: str) -> bool:
        return self.key_match(name) is not None

    def _scrub_text(self, s: str, path: JsonPath, trail: ScrubTrail, hits: list[Hit] | None = None) -> str:
        if len(s) < _MIN_SECRET_LEN:
            return s
        hits = self._finder.find(s) if hits is None else hits
        if not hits:
            return s
        if self._callback is None:  # every hit is replaced by its rule's label
            trail.record(path)
            parts = [s[: hits[0].start]]
            for hit, after in pairwise(hits):
                parts += (hit.rule.replacement, s[hit.end : after.start])
            parts += (hits[-1].rule.replacement, s[hits[-1].end :])
            return "".join(parts)
        parts = []
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

    def _replacement(self, hit: Hit, secret: str, path: JsonPath, trail: ScrubTrail) -> str | None:
        kept = self._call(ScrubMatch(path, secret, hit.match, hit.rule.kind))
        if kept is not None:
            kept = str(kept)
            if kept == secret:
                return None
            trail.changed = True
            return kept
        trail.record(path)
        return hit.rule.replacement

    # -- keys and JSON ----------------------------------------------------------------------------
    def _match_key(self, key: str) -> re.Match[str] | None:
        if key in SAFE_KEYS or key.lower() in self._allow:
            return None
        where = secret_key_word(key)
        if where is not None:
            return _WHOLE.match(key, *where)
        return next((m for p in self._extra if (m := p.search(key))), None)

    def _scrub_string(self, s: str, path: JsonPath, trail: ScrubTrail, depth: int) -> str:
        if len(s) < _MIN_SECRET_LEN:
            return s
        long_json = len(s) > _CACHED_TEXT_MAX and s[0] in "{["
        if long_json and s in self._plain_json:  # a config snapshot, re-sent with every session
            return s
        out = self._scrub_string_uncached(s, path, trail, depth)
        if long_json and out is s and not self._custom and self._callback is None:
            self._remember_json(s)
        return out

    def _remember_json(self, s: str) -> None:
        if self._plain_json_chars + len(s) > _MAX_CACHED_JSON_CHARS:
            self._plain_json.clear()
            self._plain_json_chars = 0
        self._plain_json.add(s)
        self._plain_json_chars += len(s)

    def _scrub_string_uncached(self, s: str, path: JsonPath, trail: ScrubTrail, depth: int) -> str:
        hits = self._finder.find(s)
        if s[0] in "{[" and depth < _MAX_DEPTH:
            try:
                parsed = json.loads(s)
            except Exception:
                parsed = None
            if isinstance(parsed, (dict, list)):
                changed, trail.changed = trail.changed, False
                edits: list[tuple[Any, Any, Any]] = []
                # Escapes can hide a shape from the raw text ("Bearer\\tabc"): then look at every leaf.
                # A credential the context finder saw across a key and its value (`"mailgun": "…"`,
                # `"stream_key": "…"`) is not in any leaf alone: carried to the leaves that hold it.
                carried = {s[h.start : h.end]: h for h in hits if h.rule.gate == "context"}
                tree = self._scrub_tree(
                    parsed,
                    path,
                    trail,
                    depth,
                    scan_leaves=bool(hits) or "\\" in s,
                    edits=edits,
                    carried=carried,
                )
                changed, trail.changed = trail.changed, changed or trail.changed
                if not changed:
                    return s
                spliced = _splice(s, edits)  # the rest of the text as it was: indentation, key order
                return dumps_json(tree) if spliced is None else spliced
        return self._scrub_text(s, path, trail, hits)

    def _scrub_tree(
        self,
        tree: Any,
        path: JsonPath,
        trail: ScrubTrail,
        depth: int,
        *,
        scan_leaves: bool,
        edits: list[tuple[Any, Any, Any]] | None = None,
        carried: dict[str, Hit] | None = None,
    ) -> Any:
        """Scrub a parsed JSON tree in place by key; then its string leaves by value shape. Each value
        replaced is added to `edits` as (its key, the old value, the new one). `carried`: secrets the
        context finder found in the JSON text, replaced in a leaf that holds one and has no hit of its
        own."""
        leaves: list[tuple[Any, Any, JsonPath]] = []
        if isinstance(tree, (dict, list)):
            self._walk_keys(tree, path, trail, leaves, depth, edits)
        else:
            return tree
        if not leaves:
            return tree
        if scan_leaves:
            texts = [node[k] for node, k, _ in leaves]
            # Joined by newlines: a pattern that must be followed by a blank or the end of its text
            # (`…(?=\s|$)`) finds a secret at a leaf's end too; a hit across leaves only marks each of
            # them for a look of its own.
            hit_leaves = _leaves_hit(texts, self._finder.find("\n".join(texts)))
        else:  # nested JSON strings can still hold secret keys
            hit_leaves = set()
        for i, (node, k, leaf_path) in enumerate(leaves):
            text = node[k]
            if i in hit_leaves or (text[:1] in "{[" and len(text) >= _MIN_SECRET_LEN):
                node[k] = self._scrub_string(text, leaf_path, trail, depth + 1)
            elif carried and (found := _carried_hits(text, carried)):
                node[k] = self._scrub_text(text, leaf_path, trail, found)
            if edits is not None and node[k] is not text:
                edits.append((k, text, node[k]))
        return tree

    def _walk_keys(
        self,
        node: Any,
        path: JsonPath,
        trail: ScrubTrail,
        leaves: list[tuple[Any, Any, JsonPath]],
        depth: int,
        edits: list[tuple[Any, Any, Any]] | None = None,
    ) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node)
        # The keys of a `packages` mapping are distribution names (`google-auth`, `tiktoken`), not
        # secret names: only their values are checked, by shape.
        names_are_packages = bool(path) and path[-1] == "packages"
        for k, v in items:
            child = (*path, k)
            if isinstance(k, str) and not names_are_packages and not _nothing_to_hide(v):
                match = self.key_match(k)
                if match is not None:
                    node[k] = self._redact_key(child, v, match, trail)
                    if edits is not None:
                        edits.append((k, v, node[k]))
                    continue
            if isinstance(v, str):
                if len(v) >= _MIN_SECRET_LEN:
                    leaves.append((node, k, child))
            elif isinstance(v, (dict, list)):
                if depth + 1 >= _MAX_DEPTH:
                    node[k] = self._too_deep(v, child, trail)
                    if edits is not None and node[k] is not v:
                        edits.append((k, v, node[k]))
                else:
                    self._walk_keys(v, child, trail, leaves, depth + 1, edits)

    def _too_deep(self, value: Any, path: JsonPath, trail: ScrubTrail) -> Any:
        text = dumps_json(value)
        low = text.lower()
        if not self._finder.find(text) and not any(word in low for word in ASSIGNMENT_WORDS):
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


def _nothing_to_hide(value: Any, depth: int = 0) -> bool:
    """None, a flag, an empty string or a reference under a secret key: kept (`"password": ""` says
    none is set, `"api_key": "${OPENAI_API_KEY}"` where it comes from). A mapping or a list whose every
    leaf is one of those is kept too (and comes out byte for byte when it is JSON text)."""
    if value is None or isinstance(value, bool) or value == "":
        return True
    if isinstance(value, str):
        return _REFERENCE.fullmatch(value) is not None
    if isinstance(value, (dict, list, tuple)) and value and depth < 8:
        items = value.values() if isinstance(value, dict) else value
        return all(_nothing_to_hide(v, depth + 1) for v in items)
    return False


_REFERENCE = re.compile(
    r"\$\{[A-Za-z0-9_.:-]{1,128}\}|\{\{[ \t]*[A-Za-z0-9_.\[\]'\" -]{1,128}[ \t]*\}\}|<[A-Za-z0-9_ .-]{1,64}>"
    r"|\$[A-Z_][A-Z0-9_]{0,127}|\[Scrubbed[^\]]{0,64}\]|[*xX]{3,64}|redacted|REDACTED"
)
"""Values that stand for a secret without being one: `${X}`, `{{ x }}`, `<redacted>`, `$X`, `****`."""


_DECODER = json.JSONDecoder()


def _splice(s: str, edits: list[tuple[Any, Any, Any]]) -> str | None:
    """JSON text `s` with each edit made in place (a changed string wherever it is written, a value
    under a key where that key holds it), the rest byte for byte; None when an edit cannot be placed
    (the caller then re-encodes the whole tree)."""
    out = s
    for key, old, new in edits:
        new_text = dumps_json(new)
        if isinstance(old, str):
            # How a JSON text may spell the old string (whoever wrote it): with and without \u escapes.
            spellings = {json.encoder.encode_basestring_ascii(old), json.encoder.encode_basestring(old)}
            spelled = [t for t in spellings if t in out]
            if not spelled:
                return None
            for text in spelled:
                out = out.replace(text, new_text)
            continue
        if not isinstance(key, str):
            return None
        for m in re.finditer(re.escape(json.encoder.encode_basestring(key)) + r"\s*:\s*", out):
            try:
                value, end = _DECODER.raw_decode(out, m.end())
            except ValueError:
                continue
            if value == old:
                out = out[: m.end()] + new_text + out[end:]
                break
        else:
            return None
    return out


def _carried_hits(text: str, carried: dict[str, Hit]) -> list[Hit]:
    """Hits, in `text`, of the secrets found in the JSON text around it, leftmost first, apart."""
    found: list[Hit] = []
    for secret, hit in carried.items():
        at = text.find(secret)
        while at != -1:
            found.append(hit._replace(start=at, end=at + len(secret)))
            at = text.find(secret, at + len(secret))
    found.sort(key=lambda h: (h.start, -h.end))
    kept: list[Hit] = []
    for h in found:
        if not kept or h.start >= kept[-1].end:
            kept.append(h)
    return kept


def _leaves_hit(texts: list[str], hits: list[Hit]) -> set[int]:
    """Indexes of the leaves, joined by one newline, that the hits fall in."""
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
