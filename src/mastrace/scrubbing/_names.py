"""Which key names hold secrets, and which values written next to them are literal secrets.

A key is judged by its *segments* (split on anything but letters and digits, and at camelCase humps):
a secret word must be a whole segment, so `api_key` and `x-api-key` are secret while `token_budget`,
`secretary` and `session_keyword` are not. A value is a literal secret when it is neither a reference
(`var.x`, `${X}`, `{X}`, `os.environ[...]`, `<placeholder>`) nor an identifier, and has enough entropy.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter

from ._table import RULES

__all__ = [
    "PASSWORD_WORDS",
    "SAFE_KEY_PREFIXES",
    "entropy_floor",
    "is_reference",
    "key_segments",
    "literal_value_is_secret",
    "looks_like_identifier",
    "provider_words",
    "secret_key_word",
    "service_words",
    "shannon_entropy",
]

SECRET_WORDS = frozenset(
    {
        "password", "passwd", "pwd", "passphrase", "passcode", "secret", "secrets", "token", "apikey",
        "authorization", "auth", "bearer", "cookie", "cookies", "credential", "credentials", "creds",
        "jwt", "csrf", "xsrf", "ssn", "privatekey", "accesstoken", "refreshtoken", "authtoken",
        "idtoken", "sessiontoken", "clientsecret", "secretkey", "apitoken", "accesskey", "connectionstring",
        "connstr", "sas", "saskey", "pat", "dsn", "pgpass", "webhooksecret", "privkey",
    }
)  # fmt: skip
"""A key with one of these as a whole segment names a secret (so does a segment ending in `password`)."""

SECRET_PAIRS = frozenset(
    {
        ("api", "key"), ("private", "key"), ("secret", "key"), ("access", "key"), ("account", "key"),
        ("connection", "string"), ("conn", "string"), ("conn", "str"), ("credit", "card"),
        ("card", "number"), ("social", "security"), ("session", "key"), ("master", "key"),
        ("encryption", "key"), ("signing", "key"), ("shared", "key"), ("app", "key"), ("license", "key"),
        ("webhook", "url"), ("service", "key"), ("admin", "key"), ("client", "key"), ("write", "key"),
        ("auth", "key"), ("root", "pass"), ("db", "pass"),
    }
)  # fmt: skip
"""Two adjacent segments that together name a secret."""

SAFE_LAST_SEGMENTS = frozenset(
    {
        "budget", "budgets", "limit", "limits", "count", "counts", "type", "types", "method", "methods",
        "provider", "providers", "required", "policy", "policies", "per", "usage", "length", "len",
        "size", "name", "names", "url", "uri", "endpoint", "file", "path", "dir", "env", "var", "header",
        "kind", "mode", "scheme", "format", "field", "hint", "label", "enabled", "disabled", "expiry",
        "expires", "expiration", "ttl", "timeout", "rotation", "location", "source", "version",
        "algorithm", "alg", "strength", "valid", "present", "set", "missing", "used", "rate", "ratio",
        "estimate", "estimates", "window", "max", "min", "total", "index", "idx", "position", "pos",
        "ids", "id", "prefix", "suffix", "santa", "level", "flow", "grant", "scope", "scopes", "issuer",
        "audience", "domain", "status", "state", "error", "errors", "attempts", "retries", "manager",
    }
)  # fmt: skip
"""A key whose last segment is one of these describes a secret rather than holding one
(`token_budget`, `auth_method`, `secret_name`, `access_key_id`), unless that segment is the secret word."""

SAFE_BEFORE_TOKEN = frozenset(
    {
        "max", "min", "num", "n", "input", "output", "prompt", "completion", "total", "reasoning",
        "cached", "cache", "audio", "text", "image", "new", "stop", "special", "end", "start", "bos",
        "eos", "pad", "unk", "sep", "mask", "cls", "first", "last", "next", "per", "thinking", "tool",
        "visible", "accepted", "rejected", "predicted", "context",
    }
)  # fmt: skip
"""Words before `token` that make it a count or a tokenizer's special token (`max_token`, `eos_token`)."""

KEY_SUFFIXES = frozenset(
    {
        "backup", "old", "new", "prev", "previous", "next", "primary", "secondary", "fallback", "alt",
        "prod", "production", "dev", "development", "test", "staging", "live", "sandbox", "local", "main",
    }
)  # fmt: skip
"""Segments that may follow a provider's `KEY` and keep it a secret (`ANTHROPIC_KEY_BACKUP`)."""

ORDINAL_BEFORE_PASS = frozenset(
    {"first", "second", "third", "last", "next", "single", "multi", "each", "per", "one"}
)

SAFE_KEY_PREFIXES = ("massgen.usage.", "gen_ai.usage.", "mastrace.usage.", "llm.usage.", "logfire.")
"""Keys under these prefixes hold counts and costs, or Logfire's own fields: never blanked by name."""

PASSWORD_WORDS = frozenset({"password", "passwd", "pwd", "passphrase", "passcode", "pass", "pgpass"})
"""Secret words whose value is a secret even when it is short and plain (`password: hunter22`)."""

_NOT_PROVIDERS = frozenset(
    {"generic", "meta", "bird", "circle", "drone", "cos", "kafka", "lob", "aio", "linear"}
)


@functools.cache
def provider_words() -> frozenset[str]:
    """Lower-case provider names of the rule table (`openai`, `stripe`, …): a `KEY` after one is a secret."""
    words: set[str] = set()
    for rule in RULES:
        words.update(w for w in re.findall(r"[a-z0-9]+", rule.provider.lower()) if len(w) >= 3)
        if rule.gate == "keyword":
            words.update(h for h in rule.hints if len(h) >= 3)
    return frozenset(words - _NOT_PROVIDERS)


_NOT_SERVICES = frozenset(
    {
        # ordinary words first, whatever service they also name
        "atlas", "boundary", "cloud", "defined", "deploy", "face", "frame", "logic", "networking", "object",
        "private", "readme", "render", "storage", "teams", "times", "together", "vault", "weights", "square",
        "harness", "notion", "message", "intra", "entra", "sumo", "york", "neon", "voyage", "biases",
        "hugging", "relic", "sonar", "xray", "kraken", "octopus", "fireworks", "replicate", "prefect",
        "postman", "zoom", "plaid", "doppler", "pinecone", "honeycomb", "looker", "beamer", "duffel",
        "resend", "transactional", "cohere", "perplexity", "confluence", "confluent", "devops", "discord",
        "artifactory", "intercom", "braintrust", "braintree", "contentful", "gitter", "flickr", "fastly",
        "asana", "gemini", "travis", "sidekiq", "telegram", "twitch", "slack", "jira", "grafana",
        # platforms whose bare name heads repositories, images, packages, accounts, projects and regions
        "github", "gitlab", "bitbucket", "docker", "google", "microsoft", "azure", "oracle", "cisco",
        "alibaba", "aliyun", "yandex", "adobe", "facebook", "twitter", "linkedin", "openshift", "meraki",
        "softlayer", "salesforce", "paypal", "etsy", "dropbox", "atlassian", "terraform", "hashicorp",
        "nuget", "pypi", "rubygems", "clojars", "mongodb", "clickhouse", "okta", "1password", "nytimes",
    }
)  # fmt: skip
"""Provider names of the table that do not make a credential of a random value on their own: ordinary
words (`deploy`, `render`, `vault`), and platforms whose name heads commit hashes, image digests, package
versions, project and account ids far more often than a key (`github`, `docker`, `google`, `pypi`)."""


@functools.cache
def service_words() -> frozenset[str]:
    """Provider names that are a context on their own (`SENDGRID=<random>`, `heroku: <random>`): those
    of `provider_words` of four letters or more, less `_NOT_SERVICES`."""
    return frozenset(w for w in provider_words() if len(w) >= 4 and w.isalnum() and w not in _NOT_SERVICES)


_SEGMENT = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def key_segments(key: str) -> list[re.Match[str]]:
    """The segments of a key: split on anything but letters and digits, and at camelCase humps."""
    return list(_SEGMENT.finditer(key))


def _secret_at(words: list[str], i: int) -> tuple[int, int] | None:
    word = words[i]
    if word in SECRET_WORDS or word.endswith(("password", "passwd")):
        if word == "token" and i and words[i - 1] in SAFE_BEFORE_TOKEN:
            return None
        return i, i
    if i and (words[i - 1], word) in SECRET_PAIRS:
        return i - 1, i
    if word == "json" and words[i + 1 : i + 3] in (["b", "64"], ["base", "64"]):
        return i, i + 2  # SERVICE_ACCOUNT_JSON_B64: a credentials file, base64-encoded
    if word == "pass" and i and words[i - 1] not in ORDINAL_BEFORE_PASS and i == len(words) - 1:
        return i, i  # REDIS_PASS, SMTP_PASS
    provider_key = word == "key" and i and not provider_words().isdisjoint(words[:i])
    if provider_key and all(w in KEY_SUFFIXES or w.isdigit() for w in words[i + 1 :]):
        return i, i  # OPENAI_KEY, ANTHROPIC_KEY_BACKUP, ADAFRUIT_IO_KEY
    return None


def secret_key_word(key: str) -> tuple[int, int] | None:
    """Where in `key` the secret word is, as (start, end), or None when `key` is an ordinary key.

    >>> secret_key_word("x-api-key")
    (2, 9)
    >>> secret_key_word("token_budget") is None
    True
    """
    if key.startswith(SAFE_KEY_PREFIXES):
        return None
    segments = key_segments(key)
    words = [m.group().lower() for m in segments]
    found: tuple[int, int] | None = None
    for i in range(len(words)):
        found = _secret_at(words, i)
        if found is not None:
            break
    if found is None:
        return None
    last = len(words) - 1
    gcp_key_id = words[found[0] : found[1] + 1] == ["private", "key"] and words[last] == "id"
    if found[1] < last and words[last] in SAFE_LAST_SEGMENTS and not gcp_key_id:
        return None
    return segments[found[0]].start(), segments[found[1]].end()


_PLACEHOLDERS = frozenset(
    {
        "none", "null", "nil", "true", "false", "undefined", "redacted", "******", "xxxxxxxx", "required",
        "optional", "changeme", "example", "placeholder", "secret", "password", "token", "string", "str",
        "your-api-key", "your_api_key", "<redacted>", "hidden", "masked", "unset", "empty", "missing",
    }
)  # fmt: skip
_PLACEHOLDER_PHRASE = re.compile(
    r"^your[-_ ]|[-_ ]here$|^insert[-_ ]|^replace[-_ ]|^change[-_]?me|^dummy|^fake[-_]|^example[-_]",
    re.IGNORECASE,
)
_DOTTED = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)+")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_DIGIT = re.compile(r"[0-9]")


def is_reference(value: str, quoted: bool) -> bool:
    """Whether `value` refers to a secret rather than being one: a variable, template or placeholder.

    `var.db_password`, `${X}`, `$X`, `{X}`, `{{ x }}`, `%X%`, `%(x)s`, `<placeholder>`, `os.environ[...]`,
    `getenv(...)`; unquoted, also a dotted path (`settings.API_KEY`) or a variable name (`API_KEY`,
    `user_password`, `userPassword`).
    """
    if value.startswith(("$", "<", "{", "%", "[Scrubbed", "#{", "@{", "&")) or "${" in value or "{{" in value:
        return True
    if value.endswith("}") and "{" in value:
        return True
    if quoted:
        return value.startswith(("os.environ", "process.env", "ENV[", "env("))
    if value.startswith(("os.environ", "process.env", "os.getenv", "System.getenv", "ENV[", "env(")):
        return True
    if "(" in value or "[" in value or _DOTTED.fullmatch(value.rstrip("!;,")):
        return True
    variable = _IDENTIFIER.fullmatch(value) is not None
    return variable and ("_" in value or value.isupper() or looks_like_identifier(value))


def looks_like_identifier(value: str) -> bool:
    """Whether `value` reads as words run together (`secretKeyFromVault`, `deploy_user_for_the_app`),
    not as random letters: letters and underscores only, in camelCase or snake_case words of three
    letters or more on average, each with a vowel, and vowels a third of the letters or more (about a
    fifth in random letters, two fifths in English words)."""
    letters = value.replace("_", "")
    if not letters.isalpha() or not letters.isascii():
        return False
    words = _WORDS.findall(value)
    if len(words) < 2 or sum(map(len, words)) / len(words) < 3:
        return False
    vowels = sum(letters.lower().count(v) for v in "aeiouy")
    return vowels >= len(letters) / 3 and all(any(v in w.lower() for v in "aeiouy") for w in words)


def shannon_entropy(value: str) -> float:
    """Bits per character of `value`."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values()) if n else 0.0


ENTROPY_FLOOR = 3.0
"""Bits per character a non-password value needs to count as a secret (32 hex characters have ~3.8);
a short value needs 75% of the most its length allows (`log2(len)`), when that is less."""


def entropy_floor(n: int) -> float:
    """The entropy (bits per character) a random-looking value of `n` characters must reach."""
    return min(ENTROPY_FLOOR, 0.75 * math.log2(max(n, 2)))


@functools.lru_cache(maxsize=4096)
def _names_password(key: str) -> bool:
    """Whether a segment of `key` is a password word (names repeat: remembered)."""
    words = {m.group().lower() for m in key_segments(key)}
    return bool(words & PASSWORD_WORDS) or any(w.endswith(("password", "passwd")) for w in words)


def literal_value_is_secret(key: str, value: str, quoted: bool) -> bool:
    """Whether `value`, written next to the secret-named `key` in free text, is worth scrubbing.

    Password-like names take any literal of 4 or more characters; other names (`token`, `api_key`) a
    literal of 8 or more that is not only digits nor words run together, mixes two kinds of
    character and has `ENTROPY_FLOOR` bits per character.
    """
    if len(value) < 4 or value.lower() in _PLACEHOLDERS or is_reference(value, quoted):
        return False
    if len(set(value.lower())) == 1 or _PLACEHOLDER_PHRASE.search(value):
        return False  # `aaaaaaaa`, `your-key-here`, `<insert token>`
    if not value.strip("*xX.-_#"):
        return False
    if _names_password(key):
        return True
    if len(value) < 8 or value.isdigit() or looks_like_identifier(value):
        return False
    classes = (value.upper() != value) + (value.lower() != value) + (_DIGIT.search(value) is not None)
    classes += not value.isalnum()
    return classes >= 2 and shannon_entropy(value) >= entropy_floor(len(value))
