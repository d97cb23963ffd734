"""Credentials recognised by where they stand: a secret word, or a service's name, near a value that
looks random.

The table's rules know a credential by its shape (a provider's prefix); the assignment finder
(`_context.find_assignments`) by a secret-named key right before `=` or `:`. This finder reads the
contexts people actually write credentials in, whatever the provider:

- no separator or a verb: `Stripe SECRET <value>`, `the api key is <value>`;
- `=` or `:` after any run of blanks (column-aligned `.env` files, Terraform, Go constants);
- quoted arguments of a call: `new NetworkCredential("user", "<value>")`,
  Gradle `buildConfigField "String", "API_KEY", "\\"<value>\\""`;
- XML elements and attributes: `<password><value></password>`, `password="<value>"`;
- command-line flags: `-Dsonar.login=<value>`, `-vaultToken <value>`, `-Password <value>`,
  `psexec -p <value>`, `docker login -p <value>`, `mysql -p<value>`;
- `.netrc` lines: `machine <host> login <user> password <value>`;
- log lines: `[DEBUG] Using <Service> Key=<value>`;
- a service's name alone (`service_words`: the table's provider names and aliases, less ordinary
  words and platforms such as `github` or `docker`), as a name or the end of one, before `=` or `:`
  (`SENDGRID=<value>`, `heroku: <value>`, `"mailgun": "<value>"`, `stripe_live = "<value>"`,
  `export CIRCLECI=<value>`), as a flag (`--sendgrid <value>`) or in prose (`Stripe <value>`,
  `using heroku <value>`). The bar is higher than after a secret word: `MIN_TOKEN_LEN` characters or
  more that look random, no UUID, not mostly words; in prose and flags upper and lower case and a
  digit too (no hex: commits and digests). A name whose last segment says what else it holds
  (`heroku_app_name`, `sendgrid_user`, `stripe_customer`) is no context.

A *secret word* is a segment of the name before the value (see `secret_name_strength`): `password`,
`passwd`, `pwd`, `secret`, `token`, `key`, `credential`, `auth`, compact names such as `DBPWD`,
`SMTPPW`, `*_PW`, and the table's own secret pairs. The value must then *look random*
(`looks_random`): long enough, two kinds of character or more, the entropy its length allows, and
neither a reference (`${X}`, `{{x}}`, `var.x`, `os.environ[...]`, `process.env.X`, `<placeholder>`), a
placeholder (`xxxx`, `your-key-here`, one character repeated), an identifier (`Auth::Unauthenticated`,
`userPassword`), a path nor a URL. A password-named value after `=`, `:`, in XML or in a call is
taken when it is any literal (passwords need not look random); in prose it too must look random.

Everything here reads the ASCII copy of a text (`text`) and its lower-case twin (`low`); every search
is one compiled regular expression with bounded repetitions, so the cost is linear in the text.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ._names import (
    KEY_SUFFIXES,
    SAFE_LAST_SEGMENTS,
    is_reference,
    key_segments,
    literal_value_is_secret,
    looks_like_identifier,
    provider_words,
    secret_key_word,
    service_words,
    shannon_entropy,
)
from ._table import MIN_TOKEN_LEN, run_map

__all__ = [
    "CONTEXT_GATE",
    "CONTEXT_WORDS",
    "SERVICE_GATE",
    "SERVICE_WORDS",
    "ContextHit",
    "find_in_context",
    "has_candidate",
    "looks_random",
    "mentions_context_word",
    "secret_name_strength",
    "service_candidate",
    "service_follows",
]

CONTEXT_WORDS = ("pass", "pw", "secret", "token", "key", "cred", "auth", "login", "-p")
"""Lower-case fragments one of which every text this finder can find something in holds: its gate."""


def mentions_context_word(low: str) -> bool:
    """Whether lower-cased `low` holds one of `CONTEXT_WORDS` (spelled out: a handful of C searches)."""
    return (
        "key" in low
        or "pass" in low
        or "pw" in low
        or "token" in low
        or "secret" in low
        or "auth" in low
        or "cred" in low
        or "login" in low
        or "-p" in low
    )


_V = r"[^\s\"'`<>]"  # a character of a value
_D = r"[^\s\"'`<>0-9,;()\[\]{}|&]"  # one that is neither a digit nor punctuation


def _holding(char: str) -> str:
    """Four value characters or more, one of which, in the first 41, is of class `char`."""
    return f"(?:{char}{_V}{{3}}|{_V}{char}{_V}{{2}}|{_V}{{2}}{char}{_V}|{_V}{{3,40}}{char})"


_GAPS = (
    r"[\"'`]?(?:(?:>|[ \t]*(?::=|=>|->|[:=])[ \t]*)(?:\\?[\"'`]){0,2}VALUE"
    r"|[ \t]*[(,][^\n]{0,120}[\"']\\?[\"'`]?[^\s\"'`<>\\]{4}"
    r"|[ \t]+(?:(?:is|was|are|equals|set[ \t]+to|to|=|:)[ \t]+){0,2}(?:\\?[\"'`]){0,2}"
    + _holding("[0-9]")
    + ")"
)
CONTEXT_GATE = (
    r"(?:pass|pw)[a-z0-9_.-]{0,60}" + _GAPS.replace("VALUE", _V + "{4}")
    + r"|(?:secret|token|key|cred|auth|login)[a-z0-9_.-]{0,60}" + _GAPS.replace("VALUE", _holding(_D))
    + r"|(?:^|[\s\"'])-p|machine[ \t]"
    + r"|-(?:pass|pw)[a-z0-9_.-]{0,60}[ \t]+(?:\\?[\"'`]){0,2}[^\s\"'`<>\\-]{6}"
)  # fmt: skip
"""Where the context finder can find something, as one pattern without look-arounds (for Hyperscan and
RE2, and `re` on lower-cased text): a secret word, the rest of a name, any gap the finder reads, and
four characters of a value (after blanks or words only, a value with a digit in its first 41
characters: prose is full of `tokens per round`; after any other word than a password's, with
something else than digits and punctuation there: configs are full of `"max_tokens": 4096`); or a
`-p` flag; or a `.netrc` `machine`; or a password flag (`--pass`, `-Password`, `--db-pw`) and six
characters of its value, which need no digit. It matches wherever the finder finds a credential (and in many
more places): the first pass's gate for it."""
_CANDIDATE = re.compile(CONTEXT_GATE)

_RUN_CHAR = "[a-z0-9_.+~-]"
_SERVICE_GAP = (
    r"[\"'`]?(?:[ \t]*(?::=|=>|->|[:=])[ \t]*|[ \t]+(?:(?:is|was|are|equals|set[ \t]+to|to|=|:)[ \t]+){0,2})"
    r"(?:\\?[\"'`]){0,2}"
)
_MAX_SUFFIXES = 3
SERVICE_WORDS = "(?:" + "|".join(sorted(service_words())) + ")"
"""The names of `service_words` as one pattern: Hyperscan reports where each ends, and
`service_follows` reads the rest of `SERVICE_GATE` there (the whole pattern in Hyperscan's database
made its scan of ordinary text three times slower)."""
_SERVICE_TAIL = (
    "(?:[_.-]+(?:" + "|".join(sorted(KEY_SUFFIXES)) + "|[0-9]+)){0," + str(_MAX_SUFFIXES) + "}[_.-]*"
    + _SERVICE_GAP + _RUN_CHAR + "{" + str(MIN_TOKEN_LEN) + "}"
)  # fmt: skip
SERVICE_GATE = SERVICE_WORDS + _SERVICE_TAIL
"""Where a service name alone can be the context (`SENDGRID=<value>`, `heroku: <value>`, `Stripe
<value>`), as one pattern without look-arounds (for RE2, and `re` on lower-cased text): a name of
`service_words`, its suffixes (`_live`, `_prod`, `_2`), an assignment's or prose's gap, and
`MIN_TOKEN_LEN` run characters of a value (a long run: the pure-Python first pass reads the name
before each long run instead, `service_candidate`)."""
_SERVICE_AFTER = re.compile(_SERVICE_TAIL, re.IGNORECASE)


def service_follows(text: str, end: int) -> bool:
    """Whether the rest of `SERVICE_GATE` follows a service's name that ends at `end` of `text`."""
    return _SERVICE_AFTER.match(text, end) is not None


def has_candidate(low: str) -> bool:
    """Whether lower-cased `low` has a place `CONTEXT_GATE` matches (the pure-Python first pass): the
    pattern is tried only where one of its words starts (`str.find`, not a regular expression's scan,
    which would try it at every character)."""
    if not mentions_context_word(low):
        return False
    match = _CANDIDATE.match
    for word in _GATE_WORDS:
        at = low.find(word)
        while at != -1:
            if match(low, at) is not None or (word == "-p" and at and match(low, at - 1) is not None):
                return True
            at = low.find(word, at + 1)
    return False


_GATE_WORDS = ("pass", "pw", "secret", "token", "key", "cred", "auth", "login", "-p", "machine")


def service_candidate(low: str, runs: bytes, at: int) -> bool:
    """Whether a name of a service stands right before a long run of lower-cased `low` (`runs` is its
    `run_map`, `at` where its first long run starts): the pure-Python first pass's `SERVICE_GATE`."""
    gap, ends, word_ends = _GAP_OR_NAME_END, _SERVICE_ENDS, _WORD_ENDS
    while at != -1:
        j = at
        while j and low[j - 1] in gap:
            j -= 1
        if (
            low[j - 4 : j] in ends
            or low[j - 2 : j] in word_ends
            or (low[j - 1 : j].isdigit() and _may_end_service(low, j, ends, word_ends))
        ) and _service_name_before(low, at) is not None:  # `_may_end_service`, inline for the common case
            return True
        end = runs.find(b" ", at)
        if end == -1:
            return False
        at = runs.find(_LONG_RUN, end)
    return False


_LONG_RUN = b"a" * MIN_TOKEN_LEN
_BEHIND_REACH = 100
_GAP_OR_NAME_END = frozenset(" \t=:>\"'`\\_.-")
_SERVICE_ENDS = frozenset(
    {w[-4:] for w in service_words() | KEY_SUFFIXES if len(w) >= 4}
    | {sep + w for w in KEY_SUFFIXES if len(w) == 3 for sep in "_.-"}
)
_WORD_ENDS = frozenset({"is", "to", "as", "re", "ls"})  # is, to, was, are, equals


def _may_end_service(low: str, j: int, ends: frozenset[str], word_ends: frozenset[str]) -> bool:
    """A screen before `_SERVICE_BEHIND`: whether what ends at `j` may end a service's name (its last
    four characters, a suffix's, or a number after `_ . -`) or be a word of prose's gap."""
    if low[j - 4 : j] in ends or low[j - 2 : j] in word_ends:
        return True
    k = j
    while k and low[k - 1].isdigit():
        k -= 1
    return 0 < k < j and low[k - 1] in "_.-"


_SERVICE_BEHIND = re.compile(
    r"""
    (?:["'`]\\?){0,2}                                     # the value's opening quotes
    (?:[ \t]*(?:=:|>=|>-|[:=])[ \t]*                       # =, :, :=, =>, -> (read backwards)
      | (?:[ \t]+(?:si|saw|era|slauqe|ot[ \t]+tes|ot|=|:)){0,2}[ \t]+)
    ["'`]?
    (?P<name>[a-z0-9_.-]{1,60})
    """,
    re.VERBOSE,
)
"""What stands before a value (`_GAP`'s assignments and prose, no XML nor call), read backwards from
the value's first character on the reversed text: the name's end is where this match ends."""


def _service_name_before(low: str, at: int) -> tuple[int, int] | None:
    """The span of the name before the value at `at` when it names a service alone (`_names_service`)."""
    lo = max(0, at - _BEHIND_REACH)
    j = at
    while j > lo and low[j - 1] in _GAP_OR_NAME_END:
        j -= 1
    if not _may_end_service(low, j, _SERVICE_ENDS, _WORD_ENDS):
        return None  # what ends there is no service, suffix, number, nor a word of prose's gap: no regex
    back = low[lo:at][::-1]
    m = _SERVICE_BEHIND.match(back)
    if m is None:
        return None
    start, end = at - m.end("name"), at - m.start("name")
    if start > 0 and low[start - 1] in _NAME_CHARS:
        return None  # a name longer than the finder reads
    while start < end and low[start] in ".-":
        start += 1
    if start == end or not _names_service(low[start:end]):
        return None
    return start, end


@functools.lru_cache(maxsize=4096)
def _names_service(name: str) -> bool:
    """Whether lower-case `name` names a service and nothing else: its last piece (split on `_ . -`;
    after up to three suffixes such as `live`, `prod` or a number) is one of `service_words` (`sendgrid`,
    `stripe_live`, `settings.heroku`; not `heroku_app_name`, `sendgrid_user`)."""
    pieces = [p for p in _PIECE_SPLIT.split(name) if p]
    i = len(pieces) - 1
    while i > 0 and (pieces[i] in KEY_SUFFIXES or pieces[i].isdigit()) and len(pieces) - i <= _MAX_SUFFIXES:
        i -= 1
    return i >= 0 and pieces[i] in service_words()


_PIECE_SPLIT = re.compile(r"[_.-]+")


@dataclass(frozen=True)
class ContextHit:
    """A credential found by its context: the value's span, its match, and which context it was."""

    start: int
    end: int
    match: re.Match[str]
    context: str


# Where a secret word can be: the core of a name, found by one search; the name around it is then read
# outwards, at most 60 characters each way.
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.-")
_NAME_FWD = re.compile(r"[a-z0-9_.-]{0,60}")

# What may stand between the name and the value, each alternative a context. `q` closes a quoted
# name; `open` is the quote (or escaped quote) that opens a quoted value.
_GAP = re.compile(
    r"""
    (?P<q>["'`]?)
    (?:
        (?P<xml>>)                                                        # <password>value
      | [ \t]*(?P<assign>:=|=>|->|[:=])(?![:=])[ \t]*                       # name = value, any blanks
      | [ \t]*[(,][ \t]*                                                  # a call's arguments
          (?P<call>(?:(?:["'][^"'\n]{0,64}["']|[A-Za-z_][A-Za-z0-9_.]{0,40})[ \t]*,[ \t]*)?)
          (?=\\?["'])
      | (?P<words>[ \t]+(?:(?:is|was|are|equals|set[ \t]+to|to|=|:)[ \t]+){0,2})   # prose, flags
    )
    (?P<open>(?:\\?["'`]){0,2})
    """,
    re.VERBOSE,
)
_QUOTED = re.compile(r"[^\"'`\s\\<>]{1,512}")
_BARE = re.compile(r"[^\s\"'`<>,;()\[\]{}|&]{1,512}")
_PROSE_VALUE = re.compile(r"[A-Za-z0-9+/=_\-.~!@#$%^&*]{1,512}")
_XML_VALUE = re.compile(r"[^<\s]{1,512}(?=</)")
_TRAILING = ".,:;!?)"
_DIGIT_REACH = 41
_NOT_DIGIT = re.compile(_D)

_NETRC = re.compile(
    r"(?<![a-z0-9_])machine[ \t]+[^\s]{1,253}(?:[ \t]+login[ \t]+[^\s]{1,253})?"
    r"[ \t]+password[ \t]+(?P<v>[^\s]{1,512})"
)
_DASH_P = re.compile(
    r"(?<![^\s\"'])-p(?:[ \t]+(?P<v>[^\s\"'-][^\s\"']{0,511})|(?P<glued>[^\s\"'-][^\s\"']{0,511}))"
)
_DASH_P_COMMANDS = (
    "mysql",
    "mariadb",
    "psexec",
    "docker login",
    "podman login",
    "sshpass",
    "helm registry login",
)
_DASH_P_LINE = 400  # how far back on a line a `-p` flag looks for its command

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
_PLACEHOLDER_WORDS = (
    "your", "example", "sample", "dummy", "changeme", "change-me", "change_me", "placeholder", "redacted",
    "here", "xxx", "***", "...", "todo", "fixme", "insert", "replace", "fake", "test-key", "secret-key",
)  # fmt: skip
_TOKEN_PREFIXES = frozenset({"s", "b", "hvs", "hvb", "hvr", "pk", "sk", "tk", "rk"})
"""Words before a dot that start a real token (`s.` Vault, `pk.`/`sk.`/`tk.` Mapbox), not a reference."""
_PATH_START = ("/", "./", "../", "~/", "~\\", "\\\\", "file:", "arn:", "s3:", "gs:", "http:", "https:")
_CODE_WORDS = frozenset(
    {"null", "none", "true", "false", "nil", "undefined", "self", "this", "new", "return"}
)
_WEAK = frozenset({"key", "auth", "login"})
"""Secret words that often name something else (a sort key, an auth method, a user name): their
value must look random in every context, and a UUID is not taken."""


@functools.lru_cache(maxsize=4096)
def secret_name_strength(name: str) -> str | None:
    """How `name` names a secret: `"password"` (any literal is one), `"secret"`, `"weak"` (`key`,
    `auth`, `login`: the value must look random), or None when it names none.

    >>> secret_name_strength("DBPWD"), secret_name_strength("stream_key"), secret_name_strength("keyboard")
    ('password', 'weak', None)
    """
    segments = [m.group().lower() for m in key_segments(name)]
    if not segments:
        return None
    if secret_key_word(name) is not None:
        return "password" if _password_word(segments) else "secret"
    if segments[-1] in SAFE_LAST_SEGMENTS:
        return None
    for i, word in enumerate(segments):
        if _password_word([word]):
            return "password"
        if word.endswith("pw") and (len(word) <= 8 or word == "pw") and (i or len(segments) == 1):
            return "password"  # SMTPPW, ADMIN_PW
        if word.endswith("pw") and name.isupper() and len(word) <= 8:
            return "password"
        if word in ("key", "keys", "login") or (word.endswith("key") and word[:-3] in _KEY_JOINED):
            return "weak"
        if word == "token" or word.endswith("token") or word.endswith("secret"):
            return "secret"
        if word in ("credential", "credentials", "cred", "creds") or word.endswith("credential"):
            return "secret"
    return None


_KEY_JOINED = frozenset(
    {"api", "access", "secret", "private", "app", "auth", "master", "license", "stream", "sub"}
)


def _password_word(words: list[str]) -> bool:
    return any(
        w in ("password", "passwd", "pwd", "passphrase", "passcode", "pass", "pgpass")
        or w.endswith(("password", "passwd", "pwd"))
        for w in words
    )


@functools.cache
def _providers() -> frozenset[str]:
    return provider_words()


def _is_placeholder(value: str) -> bool:
    low = value.lower()
    if len(set(low.replace("-", "").replace("_", ""))) <= 2:  # xxxx, ****, aaaa-aaaa
        return True
    return any(word in low for word in _PLACEHOLDER_WORDS)


def _is_reference(value: str, quoted: bool) -> bool:
    if value.startswith(("os.environ", "process.env", "ENV[", "env(", "env.", "var.", "local.", "secrets.")):
        return True
    if _IDENTIFIER_WITH_DIGITS.fullmatch(value) and sum(c.isdigit() for c in value) >= 4 and len(value) >= 16:
        return False  # `live_4f8a9b2c7d1e…`: a token with underscores, not a variable's name
    head, dot, rest = value.partition(".")
    if dot and head.lower() in _TOKEN_PREFIXES and len(rest) >= 16 and not looks_like_identifier(rest):
        return False  # a Vault `s.` or Mapbox `tk.` token, not a dotted reference
    return is_reference(value, quoted)


_IDENTIFIER_WITH_DIGITS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _looks_like_path(value: str) -> bool:
    """A path, a URL, or words joined by colons (`debate:v3:6f1d3c2a`, a cache key)."""
    if value.startswith(_PATH_START) or "://" in value:
        return True
    if ":" in value and any(len(p) >= 3 and p.isalpha() and p.islower() for p in value.split(":")):
        return True
    if "/" in value or "\\" in value:
        pieces = [p for p in re.split(r"[/\\]", value) if p]
        return all(p.lower() == p for p in pieces) and any(len(p) >= 3 and p.isalpha() for p in pieces)
    return False


def _is_slug(value: str) -> bool:
    """Words joined by dashes or underscores with an id among them (`run-6f1d3c2a-planner-v3`)."""
    pieces = re.split(r"[-_.]", value)
    words = [p for p in pieces if len(p) >= 3 and p.isalpha() and any(v in p.lower() for v in "aeiou")]
    return len(pieces) >= 3 and len(words) >= 2


def looks_random(value: str, *, min_len: int = 8, uuid_ok: bool = True) -> bool:
    """Whether `value` reads as a random string rather than a word, a name, a number or an id.

    Two kinds of character or more (upper, lower, digits, symbols), not one word run together, not a
    path, not a reference or a placeholder, and at least 75% of the entropy its length allows (3 bits
    per character past 16 characters). `uuid_ok=False` keeps UUIDs (ids far more often than keys).
    """
    n = len(value)
    if n < min_len or n > 512:
        return False
    if value.isdigit() or value.lower() in _CODE_WORDS or _is_placeholder(value):
        return False
    if _is_reference(value, quoted=False) or _looks_like_path(value) or "::" in value:
        return False
    if looks_like_identifier(value) or looks_like_identifier(value.replace("-", "_")):
        return False
    if _is_slug(value):
        return False
    if not uuid_ok and _UUID.fullmatch(value):
        return False
    upper = value.lower() != value
    lower = value.upper() != value
    digit = any(c.isdigit() for c in value)
    symbol = not value.isalnum()
    if upper + lower + digit + symbol < 2:
        return False
    if not digit and n < 16:  # short letters-only values are words, names or ids far more often
        return False
    return shannon_entropy(value) >= min(3.0, 0.75 * (n.bit_length() - 1 if n > 1 else 1))


def find_in_context(text: str, low: str, covered: Sequence[tuple[int, int]] = ()) -> Iterator[ContextHit]:
    """Every credential of `text` found by its context (see the module docstring), leftmost first.

    `covered`: spans already found by other means, sorted and apart; a value inside one is not judged
    (it is replaced anyway), and no name is read inside it.
    """
    starts = [a for a, _ in covered]
    last_end = -1
    judged: dict[tuple[str, str, str, bool, bool], bool] = {}  # secret-dense text repeats its values
    for at, size in _cores(low):
        if at < last_end:
            continue  # inside a name already read
        if _CANDIDATE.match(low, at) is None and not (
            at and low[at - 1] == "-" and _CANDIDATE.match(low, at - 1)
        ):
            continue  # the gate says no value can follow (it reads the name from its word on, or a
            # password flag from its dash)
        found = _at_name(text, low, at, at + size, judged, covered, starts)
        if found is None:
            continue
        hit, name_end = found
        last_end = name_end
        if hit is not None:
            yield hit
            last_end = hit.end
    if len(low) > MIN_TOKEN_LEN:
        yield from _after_services(text, low, covered, starts)
    if "machine" in low and "password" in low:
        for m in _NETRC.finditer(low):
            value = text[m.start("v") : m.end("v")]
            if not _is_reference(value, quoted=False) and not _is_placeholder(value):
                yield ContextHit(m.start("v"), m.end("v"), m, "netrc")
    if "-p" in low:
        yield from _dash_p(text, low)


def _cores(low: str) -> list[tuple[int, int]]:
    """Where each secret word of `_CORE_WORDS` starts, and its length, in order (`str.find` per word: a C
    search for a literal, where a regular expression of alternatives tries each character)."""
    found: list[tuple[int, int]] = []
    for word in _CORE_WORDS:
        at = low.find(word)
        while at != -1:
            found.append((at, len(word)))
            at = low.find(word, at + 1)
    found.sort()
    return found


_CORE_WORDS = ("pass", "pw", "secret", "token", "key", "cred", "auth", "login")


def _at_name(
    text: str,
    low: str,
    core_start: int,
    core_end: int,
    judged: dict[tuple[str, str, str, bool, bool], bool],
    covered: Sequence[tuple[int, int]],
    starts: list[int],
) -> tuple[ContextHit | None, int] | None:
    size = len(text)
    start, stop = core_start, max(0, core_start - 60)
    while start > stop and low[start - 1] in _NAME_CHARS:
        start -= 1
    end = _NAME_FWD.match(low, core_end).end()  # type: ignore[union-attr]
    while start < core_start and low[start] in ".-":
        start += 1
    while end > core_end and low[end - 1] in ".-":
        end -= 1
    name = text[start:end]
    strength = secret_name_strength(name)
    if strength is None:
        return None, end
    gap = _GAP.match(text, end)
    if gap is None or gap.end() >= size:
        return None, end
    q = gap.group("q")
    if q and q != "`" and (not start or text[start - 1] != q):
        return None, end  # a closing quote that opened nothing: the name was inside a value
    context, value_at = _context_of(gap, text, start)
    if context is None:
        return None, end
    quoted = bool(gap.group("open"))
    pattern = (
        _XML_VALUE
        if context == "xml element"
        else _QUOTED
        if quoted
        else _PROSE_VALUE
        if context in ("prose", "flag")
        else _BARE
    )
    m = pattern.match(text, value_at)
    if m is None:
        return None, end
    v_start, v_end = m.span()
    while v_end > v_start and text[v_end - 1] in _TRAILING and not quoted:
        v_end -= 1
    if quoted and v_end < size and text[v_end] not in "\"'`\\":
        return None, end  # a quoted value that does not end at a quote is prose
    if starts:
        i = bisect_right(starts, v_start) - 1
        if i >= 0 and covered[i][1] >= v_end:
            return None, v_end  # inside a secret found already: nothing to judge, nor to read in it
    value = text[v_start:v_end]
    if (
        gap.group("words") is not None
        and not (context == "flag" and _names_password_last(name))
        and not any(c.isdigit() for c in value[:_DIGIT_REACH])
    ):
        return None, end  # as the gate asks: after blanks or words, a value holds a digit (but for a
        # password flag, `-Password correcthorse`: any literal of six characters or more)
    if strength != "password" and _NOT_DIGIT.search(value, 0, _DIGIT_REACH) is None:
        return None, end  # as the gate asks: after another word than a password's, not only digits
    provider_near = strength == "weak" and _provider_before(low, start, name)
    key = (value, strength, context, quoted, provider_near)
    taken = judged.get(key)
    if taken is None:
        if len(judged) >= _MAX_JUDGED:
            judged.clear()
        taken = judged[key] = _takes(value, strength, context, quoted, provider_near)
    if not taken:
        return None, end
    return ContextHit(v_start, v_end, m, context), end


def _names_password_last(name: str) -> bool:
    """Whether a flag's name ends with a password word (`--pass`, `-Password`, `--db-pw`; not
    `--pass-through`): its value needs no digit to be taken."""
    last = name.lower().rsplit("-", 1)[-1].rsplit("_", 1)[-1]
    return last in ("pass", "pw", "pwd", "passwd", "passphrase") or last.endswith("password")


def _context_of(gap: re.Match[str], text: str, name_start: int) -> tuple[str | None, int]:
    if gap.group("xml") is not None:
        if not name_start or text[name_start - 1] != "<":
            return None, 0
        return "xml element", gap.end()
    if gap.group("assign") is not None:
        before = text[name_start - 1] if name_start else ""
        if before in "-" and gap.group("assign") == "=":
            return "flag", gap.end()
        if before == " " and name_start >= 2 and text[name_start - 2] == "<":
            return "xml attribute", gap.end()
        return ("xml attribute" if _in_tag(text, name_start) else "assignment"), gap.end()
    if gap.group("call") is not None:
        return "call argument", gap.end()
    if gap.group("words") is not None:
        before = text[name_start - 1] if name_start else ""
        return ("flag" if before == "-" else "prose"), gap.end()
    return None, 0


_TAG_REACH = 400


def _in_tag(text: str, name_start: int) -> bool:
    """Whether the name stands inside an XML tag (`<user password="…">`): a `<` before it on its line,
    with no `>` in between."""
    line_start = max(
        text.rfind("\n", max(0, name_start - _TAG_REACH), name_start) + 1, name_start - _TAG_REACH
    )
    lt = text.rfind("<", line_start, name_start)
    return lt != -1 and text.find(">", lt, name_start) == -1


_MAX_JUDGED = 1024  # values judged per text, remembered for its later occurrences


def _takes(value: str, strength: str, context: str, quoted: bool, provider_near: bool) -> bool:
    """Whether `value`, in `context` after a name of `strength` (`provider_near`: a provider of the
    table named in or just before it), is a credential."""
    if not value or value.startswith("[Scrubbed") or _is_placeholder(value) or _is_reference(value, quoted):
        return False
    if context in ("prose", "flag") and value.startswith("-"):
        return False  # the next flag
    structured = context in ("assignment", "xml element", "xml attribute", "call argument") or (
        context == "flag" and quoted
    )
    if strength == "password" and structured:
        return (
            len(value) >= 4
            and "::" not in value
            and not _looks_like_path(value)
            and literal_value_is_secret("password", value, quoted)
        )
    if strength == "password" and context == "flag":
        return len(value) >= 6 and not _looks_like_path(value) and not value.isdigit() and "::" not in value
    uuid_ok = strength != "weak" or provider_near
    if strength == "weak" and not structured and not provider_near:
        return looks_random(value, min_len=16, uuid_ok=False)
    return looks_random(value, min_len=8, uuid_ok=uuid_ok)


def _provider_before(low: str, name_start: int, name: str) -> bool:
    """Whether a provider of the rule table is named in `name` or in the few words before it."""
    words = re.findall(r"[a-z0-9]+", low[max(0, name_start - 40) : name_start] + " " + name.lower())
    return not _providers().isdisjoint(words)


def _after_services(
    text: str, low: str, covered: Sequence[tuple[int, int]], starts: list[int]
) -> Iterator[ContextHit]:
    """Values that a service's name alone stands before (`SENDGRID=<value>`, `"mailgun": "<value>"`,
    `--heroku <value>`, `Stripe <value>`): read from each long run backwards (`_service_name_before`),
    which the text has few of, then forwards as `_at_name` reads a secret word's."""
    runs = run_map(low)
    at = runs.find(_LONG_RUN)
    judged: dict[tuple[str, str, bool], bool] = {}
    while at != -1:
        name = _service_name_before(low, at)
        if name is not None:
            hit = _service_hit(text, name[0], name[1], at, covered, starts, judged)
            if hit is not None:
                yield hit
        end = runs.find(b" ", at)
        if end == -1:
            return
        at = runs.find(_LONG_RUN, end)


def _service_hit(
    text: str,
    start: int,
    end: int,
    value_at: int,
    covered: Sequence[tuple[int, int]],
    starts: list[int],
    judged: dict[tuple[str, str, bool], bool],
) -> ContextHit | None:
    gap = _GAP.match(text, end)
    if gap is None or gap.end() != value_at:
        return None
    q = gap.group("q")
    if q and q != "`" and (not start or text[start - 1] != q):
        return None  # a closing quote that opened nothing: the name was inside a value
    context, _ = _context_of(gap, text, start)
    if context == "flag" and (not start or text[start - 1] != "-"):
        context = "assignment" if gap.group("assign") is not None else "prose"  # at the text's start
    if context not in ("assignment", "flag", "prose"):
        return None
    quoted = bool(gap.group("open"))
    pattern = _QUOTED if quoted else _PROSE_VALUE if context != "assignment" else _BARE
    m = pattern.match(text, value_at)
    if m is None:
        return None
    v_start, v_end = m.span()
    while v_end > v_start and text[v_end - 1] in _TRAILING and not quoted:
        v_end -= 1
    if quoted and v_end < len(text) and text[v_end] not in "\"'`\\":
        return None  # a quoted value that does not end at a quote is prose
    if starts:
        i = bisect_right(starts, v_start) - 1
        if i >= 0 and covered[i][1] >= v_end:
            return None  # inside a secret found already
    value = text[v_start:v_end]
    key = (value, context, quoted)
    taken = judged.get(key)
    if taken is None:
        if len(judged) >= _MAX_JUDGED:
            judged.clear()
        taken = judged[key] = _takes_service(value, context, quoted)
    return ContextHit(v_start, v_end, m, "service " + context) if taken else None


def _takes_service(value: str, context: str, quoted: bool) -> bool:
    """Whether `value`, after a service's name alone in `context`, is a credential: a higher bar than
    after a secret word. `MIN_TOKEN_LEN` characters or more that look random (`looks_random`; no UUID:
    an id far more often) and are not mostly words (`_wordy`); in prose and flags, also upper and lower
    case and a digit (so no hex: a commit or a digest, `deployed to heroku 3f9a1c…`)."""
    if value.startswith(("[Scrubbed", "-")) or _is_placeholder(value) or _is_reference(value, quoted):
        return False
    if not looks_random(value, min_len=MIN_TOKEN_LEN, uuid_ok=False) or _wordy(value):
        return False
    if context == "assignment":
        return True
    return value.lower() != value and value.upper() != value and any(c.isdigit() for c in value)


_WORDISH = re.compile(r"[A-Z]?[a-z]{2,}|[A-Z]{2,}(?![a-z])")


def _wordy(value: str) -> bool:
    """Whether nine tenths of the letters of `value` are in words of three letters or more with a vowel
    (`StripeClientConfiguration2024`, `HerokuDeployPipelineV2Stage3`): a name with numbers, not a key
    (a random string of 20 characters is that wordy about once in five hundred, of 32 almost never)."""
    letters = sum(c.isalpha() for c in value)
    in_words = sum(
        len(w) for w in _WORDISH.findall(value) if len(w) >= 3 and any(v in w.lower() for v in "aeiouy")
    )
    return in_words >= 0.9 * letters


def _dash_p(text: str, low: str) -> Iterator[ContextHit]:
    """`-p <password>` (or `-p<password>`, as MySQL takes it) on the line of a command that reads a
    password from it: a `-p` is a port, a path or a profile elsewhere."""
    for m in _DASH_P.finditer(text):
        line_start = max(
            low.rfind("\n", max(0, m.start() - _DASH_P_LINE), m.start()) + 1, m.start() - _DASH_P_LINE
        )
        line = low[line_start : m.start()]
        commands = [c for c in _DASH_P_COMMANDS if c in line]
        if not commands:
            continue
        glued = m.group("glued") is not None
        if glued and not any(c in ("mysql", "mariadb") for c in commands):
            continue
        group = "glued" if glued else "v"
        value = m.group(group)
        if value.isdigit() or _is_reference(value, quoted=False) or _is_placeholder(value) or len(value) < 4:
            continue
        if _looks_like_path(value) or ":" in value:
            continue
        yield ContextHit(m.start(group), m.end(group), m, "command line")
