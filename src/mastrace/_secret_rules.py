"""The secret rule table: every credential shape mastrace scrubs, with samples that prove it.

This module is data. Each `SecretRule` says what it detects, the regular expression that finds it,
the cheap *gate* that must pass before the expression is tried, and at least one sample it must
scrub and one look-alike it must keep. The engine in `_scrubbing` reads only this table; the tests
try every sample in every place a value can leave the process.

Gates (all compared with lower-cased text):

- ``"word"``: the rule runs when a run of token characters (letters, digits and ``_ . - + ~``) at
  least `MIN_TOKEN_LEN` long starts with one of the gate strings. Prefixed tokens
  (``ghp_…``, ``sk-…``) are found this way without searching the whole text.
- ``"shape"``: the rule has no literal prefix; it is tried on each such long word.
- ``"text"``: the rule runs when one of the gate strings occurs anywhere in the text.
- ``"context"``: a vendor's key written next to its name (`AZURE_OPENAI_API_KEY=…`): tried where the
  assignment search (below) found a secret-named key containing one of the gate strings, to name the
  vendor in the replacement.
- ``"assignment"``: `NAME=value`, `"name": "value"` and `name: value` in free text, where NAME is a
  secret-named key (`secret_key_word`) and the value passes `assignment_value_is_secret`. Gated on
  `ASSIGNMENT_WORDS`; the engine finds each occurrence and reads the name around it.

Key names are judged by `secret_key_word`: a secret word must be a whole *segment* of the key
(split on ``_ - .``, spaces and camelCase), so ``api_key`` and ``x-api-key`` are secret while
``token_budget``, ``secretary`` and ``session_keyword`` are not.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ASSIGNMENT_WORDS",
    "MIN_TOKEN_LEN",
    "RULES",
    "SAFE_KEY_PREFIXES",
    "SecretRule",
    "assignment_value_is_secret",
    "key_segments",
    "mentions_secret_word",
    "secret_key_word",
]

MIN_TOKEN_LEN = 20
"""Runs of token characters shorter than this are not looked at by the ``word`` and ``shape`` gates."""

ASSIGNMENT_WORDS = ("pass", "pwd", "secret", "token", "key", "auth", "cred", "cookie", "jwt", "sas")
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
    )


Gate = Literal["word", "shape", "text", "context", "assignment"]


@dataclass(frozen=True)
class SecretRule:
    """One credential shape.

    Attributes:
        id: The kind shown in the replacement, `[Scrubbed: <id>]`.
        description: What it detects, for people.
        pattern: The regular expression. A group named `p` is a prefix that is kept.
        gate: How the engine decides cheaply whether to try `pattern` (see the module docstring).
        keys: The gate strings, lower case.
        samples: Texts holding a secret this rule must scrub.
        negatives: Look-alikes it must keep.
        ignore_case: Match `pattern` regardless of case.
        check: A second look at a match (the secret text only); False keeps it.
    """

    id: str
    description: str
    pattern: str
    gate: Gate
    keys: tuple[str, ...]
    samples: tuple[str, ...]
    negatives: tuple[str, ...]
    ignore_case: bool = False
    check: Callable[[str], bool] | None = None


def _fake(n: int, alphabet: str = "aB3dE5fG7hJ9kL2mN4pQ6rS8tU1vW0xYz", seed: int = 7) -> str:
    """A deterministic string of `n` characters drawn from `alphabet`, for samples."""
    out = []
    x = seed
    for _ in range(n):
        x = (x * 1103515245 + 12345) % 2147483648
        out.append(alphabet[(x >> 16) % len(alphabet)])
    return "".join(out)


_HEX = "0123456789abcdef"
_UPHEX = "0123456789ABCDEF"
_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_B64 = "aB3dE5fG7hJ9kL2mN4pQ6rS8tU1vW0xYz+/"
_BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"

_END = r"(?![A-Za-z0-9_-])"


def _prefixed(prefix: str, body: str, end: str = "") -> str:
    """`prefix` then `body`, with `prefix` not glued to a word before it.

    The literal comes first so that the regular-expression engine can skip ahead to it quickly; the
    look-behind after it checks the character before.
    """
    lit = re.escape(prefix)
    return f"{lit}(?<![A-Za-z0-9_-]{lit}){body}{end}"


def _decodes_to_credentials(secret: str) -> bool:
    """`Basic` credentials are base64 of `user:password`; "Basic understanding" is prose."""
    try:
        return b":" in base64.b64decode(secret + "=" * (-len(secret) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False


RULES: tuple[SecretRule, ...] = (
    # -- generic shapes ------------------------------------------------------------------------------
    SecretRule(
        "pem_private_key",
        "PEM private key block (RSA, EC, OpenSSH, PKCS#8, PGP), also when cut off before its END line",
        r"-----BEGIN[A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[\s\S]{0,65536}?-----END[A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s\\]{0,65536})",
        "text",
        ("-----begin",),
        (
            "key:\n-----BEGIN PRIVATE KEY-----\n" + _fake(64, _B64) + "\n-----END PRIVATE KEY-----\nend",
            "-----BEGIN OPENSSH PRIVATE KEY-----\n" + _fake(70, _B64),
        ),
        ("-----BEGIN PUBLIC KEY-----\n" + _fake(40, _B64), "-----BEGIN CERTIFICATE-----"),
    ),
    SecretRule(
        "jwt",
        "JSON Web Token (header.payload.signature, base64url)",
        _prefixed("eyJ", r"[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
        "word",
        ("eyj",),
        ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0." + _fake(43, _B64[:-2] + "_-"),),
        ("eyJhbGciOiJIUzI1NiJ9 alone is a header", "keyJumpingExample.value"),
    ),
    SecretRule(
        "bearer_token",
        "`Bearer <token>` in an Authorization header or text",
        r"(?P<p>bearer(?<![a-z0-9_]bearer)\s+)[a-z0-9._~+/=-]{8,}",
        "text",
        ("bearer",),
        ("Authorization: Bearer abc.DEF-ghi_" + _fake(20),),
        ("a bearer of good news", "Bearer"),
        ignore_case=True,
    ),
    SecretRule(
        "basic_auth",
        "`Basic <base64 user:password>` credentials",
        r"(?P<p>basic(?<![a-z0-9_]basic)\s+)[a-z0-9+/]{8,}={0,2}(?![a-z0-9+/=])",
        "text",
        ("basic",),
        ("Authorization: Basic " + base64.b64encode(b"admin:" + _fake(12).encode()).decode(),),
        ("Basic understanding of the problem", "basic arithmetic"),
        ignore_case=True,
        check=_decodes_to_credentials,
    ),
    SecretRule(
        "url_password",
        "password in a URL's userinfo (`scheme://user:password@host`, the user may be empty)",
        r"(?P<p>://[^\s:/?#@\[\]\"']{0,256}:)[^\s/?#@\"']{1,256}(?=@)",
        "text",
        ("://",),
        (
            "postgres://admin:" + _fake(14) + "@db.example.com:5432/app",
            "redis://:" + _fake(16) + "@cache.internal:6379/0",
            "amqp://guest:" + _fake(10) + "@rabbit/",
        ),
        ("https://example.com:8443/path", "see http://user@example.org/x"),
    ),
    SecretRule(
        "url_query_secret",
        "secret query parameter in a URL: key, api_key, token, access_token, sig, secret, password, …",
        r"(?P<p>[?&;](?:api[_-]?key|apikey|key|token|access[_-]?token|refresh[_-]?token|id[_-]?token"
        r"|auth|auth[_-]?token|sig|signature|secret|client[_-]?secret|password|passwd|pwd|code)=)"
        r"[^&#\s\"'<>]{4,}",
        "text",
        ("=",),
        (
            "https://api.example.com/v1?api_key=" + _fake(24) + "&q=1",
            "https://maps.example.com/geo?q=x&key=" + _fake(39),
            "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sp=r&sig=" + _fake(43, _B64) + "%3D",
        ),
        ("https://example.com/search?q=key&page=2", "https://example.com/?monkey=banana"),
        ignore_case=True,
    ),
    SecretRule(
        "secret_assignment",
        'a secret-named key and its value in free text: `NAME=value`, `"name": "value"`, `name: value`',
        r"[^\s\"'&,;<>)\]}]{4,1000}",
        "assignment",
        ASSIGNMENT_WORDS,
        (
            "login failed: password=hunter22 for admin",
            'config {"passwd": "s3cr3t-value"}',
            "client_secret: Zm9vYmFyYmF6" + _fake(8),
            "export DB_PASSWORD='correct horse'",
            "X-Api-Key: " + _fake(32, _HEX),
            "GITHUB_TOKEN=" + _fake(40),
        ),
        ("token_budget=4096", "auth_method: oauth", "password: required", "api_key=None", "max_token=512"),
    ),
    # -- LLM providers -------------------------------------------------------------------------------
    SecretRule(
        "anthropic_key",
        "Anthropic API and admin keys (`sk-ant-api03-…`, `sk-ant-admin01-…`)",
        _prefixed("sk-ant-", r"[A-Za-z0-9_-]{20,}"),
        "word",
        ("sk-ant-",),
        ("ANTHROPIC said sk-ant-api03-" + _fake(93) + "AA ok", "sk-ant-admin01-" + _fake(80)),
        ("sk-ant-short", "task-ant-" + _fake(30)),
    ),
    SecretRule(
        "openrouter_key",
        "OpenRouter API key (`sk-or-v1-` and 64 hex)",
        _prefixed("sk-or-v1-", r"[0-9a-f]{64}", _END),
        "word",
        ("sk-or-v1-",),
        ("sk-or-v1-" + _fake(64, _HEX),),
        ("sk-or-v1-" + _fake(10, _HEX),),
    ),
    SecretRule(
        "openai_key",
        "OpenAI keys: user, project (`sk-proj-`), service account (`sk-svcacct-`), admin (`sk-admin-`);"
        " DeepSeek's `sk-` keys have the same shape",
        _prefixed("sk-", r"(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}"),
        "word",
        ("sk-",),
        (
            "key sk-" + _fake(48) + " here",
            "sk-proj-" + _fake(40) + "T3BlbkFJ" + _fake(40),
            "sk-svcacct-" + _fake(60),
            "sk-admin-" + _fake(60),
            "deepseek sk-" + _fake(32, _HEX),
        ),
        ("sk-learn", "task-" + _fake(30), "disk-usage-" + _fake(24)),
    ),
    SecretRule(
        "google_api_key",
        "Google API key (Gemini / Google AI Studio, Maps, Firebase): `AIza` and 35 characters",
        _prefixed("AIza", r"[0-9A-Za-z_-]{35}", _END),
        "word",
        ("aiza",),
        ("google AIzaSyD" + _fake(32) + " end",),
        ("AIzaShort", "AIza" + _fake(20)),
    ),
    SecretRule(
        "azure_openai_key",
        "Azure OpenAI / Cognitive Services key (32 hex) written next to an Azure name",
        r"(?P<p>azure[\w.-]{0,40}(?:key|token)[\"']?\s{0,3}[=:]\s{0,3}[\"']?)[0-9a-f]{32}(?![0-9a-f])",
        "context",
        ("azure",),
        ("AZURE_OPENAI_API_KEY=" + _fake(32, _HEX), 'azure_api_key: "' + _fake(32, _HEX) + '"'),
        ("AZURE_OPENAI_ENDPOINT=https://x.openai.azure.com", "azure key rotation is monthly"),
        ignore_case=True,
    ),
    SecretRule(
        "mistral_key",
        "Mistral API key (32 characters) written next to a Mistral name",
        r"(?P<p>mistral[\w.-]{0,40}(?:key|token)[\"']?\s{0,3}[=:]\s{0,3}[\"']?)[A-Za-z0-9]{32}(?![A-Za-z0-9])",
        "context",
        ("mistral",),
        ("MISTRAL_API_KEY=" + _fake(32), "export mistral_api_key: " + _fake(32)),
        ("MISTRAL_MODEL=mistral-large-latest",),
        ignore_case=True,
    ),
    SecretRule(
        "cohere_key",
        "Cohere API key (40 characters) written next to a Cohere name",
        r"(?P<p>(?:cohere|\bco)[\w.-]{0,40}(?:key|token)[\"']?\s{0,3}[=:]\s{0,3}[\"']?)"
        r"[A-Za-z0-9]{40}(?![A-Za-z0-9])",
        "context",
        ("cohere", "co_api"),
        ("COHERE_API_KEY=" + _fake(40), "CO_API_KEY=" + _fake(40)),
        ("COHERE_MODEL=command-r-plus",),
        ignore_case=True,
    ),
    SecretRule(
        "together_key",
        "Together AI API key (`tgp_v1_`)",
        _prefixed("tgp_v1_", r"[A-Za-z0-9_-]{40,}"),
        "word",
        ("tgp_v1_",),
        ("tgp_v1_" + _fake(43),),
        ("tgp_v1_short",),
    ),
    SecretRule(
        "together_legacy_key",
        "Together AI legacy key (64 hex) written next to a Together name",
        r"(?P<p>together[\w.-]{0,40}(?:key|token)[\"']?\s{0,3}[=:]\s{0,3}[\"']?)[0-9a-f]{64}(?![0-9a-f])",
        "context",
        ("together",),
        ("TOGETHER_API_KEY=" + _fake(64, _HEX),),
        ("TOGETHER_MODEL=meta-llama/Llama-3-70b",),
        ignore_case=True,
    ),
    SecretRule(
        "groq_key",
        "Groq API key (`gsk_`)",
        _prefixed("gsk_", r"[A-Za-z0-9]{40,}"),
        "word",
        ("gsk_",),
        ("gsk_" + _fake(52),),
        ("gsk_short",),
    ),
    SecretRule(
        "xai_key",
        "xAI (Grok) API key (`xai-`)",
        _prefixed("xai-", r"[A-Za-z0-9]{40,}"),
        "word",
        ("xai-",),
        ("xai-" + _fake(80),),
        ("xai-grok-2-latest", "xai-" + _fake(10)),
    ),
    SecretRule(
        "perplexity_key",
        "Perplexity API key (`pplx-`)",
        _prefixed("pplx-", r"[A-Za-z0-9]{40,}"),
        "word",
        ("pplx-",),
        ("pplx-" + _fake(48),),
        ("pplx-sonar-small",),
    ),
    SecretRule(
        "fireworks_key",
        "Fireworks AI API key (`fw_`)",
        _prefixed("fw_", r"[A-Za-z0-9]{20,}"),
        "word",
        ("fw_",),
        ("fw_" + _fake(24),),
        ("fw_version",),
    ),
    SecretRule(
        "replicate_token",
        "Replicate API token (`r8_`)",
        _prefixed("r8_", r"[A-Za-z0-9]{30,}"),
        "word",
        ("r8_",),
        ("r8_" + _fake(37),),
        ("r8_short",),
    ),
    SecretRule(
        "huggingface_token",
        "Hugging Face user and organisation tokens (`hf_`, `api_org_`)",
        _prefixed("hf_", r"[A-Za-z0-9]{30,}") + "|" + _prefixed("api_org_", r"[A-Za-z0-9]{30,}"),
        "word",
        ("hf_", "api_org_"),
        ("hf hf_" + _fake(34), "api_org_" + _fake(34)),
        ("hf_hub_download", "hf_transfer_enabled_flag"),
    ),
    SecretRule(
        "langsmith_key",
        "LangSmith personal and service keys (`lsv2_pt_`, `lsv2_sk_`)",
        _prefixed("lsv2_", r"(?:pt|sk)_[0-9a-f]{32}_[0-9a-f]{10}", _END),
        "word",
        ("lsv2_",),
        ("lsv2_pt_" + _fake(32, _HEX) + "_" + _fake(10, _HEX),),
        ("lsv2_pt_short",),
    ),
    SecretRule(
        "logfire_token",
        "Logfire write and API tokens (`pylf_v1_…`)",
        _prefixed("pylf_v", r"\d{1,2}_[A-Za-z0-9_]{20,}"),
        "word",
        ("pylf_v",),
        ("LOGFIRE says pylf_v1_us_" + _fake(44),),
        ("pylf_version_1",),
    ),
    SecretRule(
        "tavily_key",
        "Tavily API key (`tvly-`, `tvly-dev-`)",
        _prefixed("tvly-", r"(?:dev-|prod-)?[A-Za-z0-9]{20,}"),
        "word",
        ("tvly-",),
        ("tvly-" + _fake(32), "tvly-dev-" + _fake(32)),
        ("tvly-search",),
    ),
    SecretRule(
        "pinecone_key",
        "Pinecone API key (`pcsk_`)",
        _prefixed("pcsk_", r"[A-Za-z0-9_]{40,}"),
        "word",
        ("pcsk_",),
        ("pcsk_" + _fake(6) + "_" + _fake(64),),
        ("pcsk_short",),
    ),
    # -- clouds ---------------------------------------------------------------------------------------
    SecretRule(
        "aws_access_key_id",
        "AWS access key id (`AKIA`, `ASIA`, `ABIA`, `ACCA` and 16 characters)",
        r"(?:AKIA|ASIA|ABIA|ACCA)(?<![A-Za-z0-9](?:AKIA|ASIA|ABIA|ACCA))[A-Z0-9]{16}(?![A-Za-z0-9])",
        "word",
        ("akia", "asia", "abia", "acca"),
        ("id AKIA" + _fake(16, _UPPER) + " x", "temp ASIA" + _fake(16, _UPPER)),
        ("AKIA" + _fake(10, _UPPER), "ASIAN" + "CUISINE" * 3),
    ),
    SecretRule(
        "aws_secret_access_key",
        "AWS secret access key (40 base64 characters) written next to its name",
        r"(?P<p>aws[\w.-]{0,30}secret[\w.-]{0,30}[\"']?\s{0,3}[=:]\s{0,3}[\"']?)"
        r"[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])",
        "context",
        ("aws",),
        (
            "aws_secret_access_key = " + _fake(40, _B64),
            'AWS_SECRET_ACCESS_KEY: "' + _fake(40, _B64) + '"',
            "\nAWS_SECRET_ACCESS_KEY=" + _fake(40, _B64),
        ),
        ("AWS_SECRET_ACCESS_KEY is read from the environment",),
        ignore_case=True,
    ),
    SecretRule(
        "gcp_private_key_id",
        "Google Cloud service-account JSON: its `private_key_id` (its key is caught by `pem_private_key`)",
        r"(?P<p>\"private_key_id\"\s{0,3}:\s{0,3}\")[0-9a-f]{40}",
        "context",
        ("private_key_id",),
        ('{"type": "service_account", "private_key_id": "' + _fake(40, _HEX) + '"}',),
        ('{"private_key_id": ""}',),
    ),
    SecretRule(
        "google_oauth_token",
        "Google OAuth 2.0 access token (`ya29.`)",
        _prefixed("ya29.", r"[A-Za-z0-9_-]{20,}"),
        "word",
        ("ya29.",),
        ("token ya29.a0" + _fake(120),),
        ("ya29.short",),
    ),
    SecretRule(
        "google_oauth_client_secret",
        "Google OAuth client secret (`GOCSPX-`)",
        _prefixed("GOCSPX-", r"[A-Za-z0-9_-]{24,}"),
        "word",
        ("gocspx-",),
        ("GOCSPX-" + _fake(28),),
        ("GOCSPX-short",),
    ),
    SecretRule(
        "azure_connection_string",
        "Azure storage / Service Bus / Event Hubs connection string secrets (`AccountKey=`, "
        "`SharedAccessKey=`)",
        r"(?P<p>(?:accountkey|sharedaccesskey)\s{0,3}=\s{0,3})[a-z0-9+/=]{20,}",
        "context",
        ("accountkey", "sharedaccesskey"),
        (
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey="
            + _fake(86, _B64)
            + "==;EndpointSuffix=core.windows.net",
            "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=root;SharedAccessKey="
            + _fake(44, _B64),
        ),
        ("AccountName=acct;EndpointSuffix=core.windows.net",),
        ignore_case=True,
    ),
    SecretRule(
        "azure_client_secret",
        "Microsoft Entra (Azure AD) client secret (`…8Q~…`)",
        r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])",
        "shape",
        ("q~",),
        ("client secret " + _fake(3) + "8Q~" + _fake(34),),
        ("abc8Q~short",),
    ),
    SecretRule(
        "digitalocean_token",
        "DigitalOcean personal, OAuth and refresh tokens (`dop_v1_`, `doo_v1_`, `dor_v1_`)",
        r"do[opr]_v1_(?<![A-Za-z0-9_-]do[opr]_v1_)[0-9a-f]{64}(?![0-9a-f])",
        "word",
        ("dop_v1_", "doo_v1_", "dor_v1_"),
        ("dop_v1_" + _fake(64, _HEX),),
        ("dop_v1_" + _fake(12, _HEX),),
    ),
    SecretRule(
        "databricks_token",
        "Databricks personal access token (`dapi` and 32 hex)",
        _prefixed("dapi", r"[0-9a-f]{32}(?:-\d)?", r"(?![A-Za-z0-9])"),
        "word",
        ("dapi",),
        ("dapi" + _fake(32, _HEX), "dapi" + _fake(32, _HEX) + "-2"),
        ("dapiSomethingElseEntirely", "rapid" + _fake(32, _HEX)),
    ),
    SecretRule(
        "heroku_key",
        "Heroku API key (`HRKU-`)",
        _prefixed("HRKU-", r"[A-Za-z0-9_-]{40,}"),
        "word",
        ("hrku-",),
        ("HRKU-" + _fake(60),),
        ("HRKU-short",),
    ),
    SecretRule(
        "cloudflare_origin_ca_key",
        "Cloudflare Origin CA key (`v1.0-…`)",
        _prefixed("v1.0-", r"[0-9a-f]{24}-[0-9a-f]{146}", _END),
        "word",
        ("v1.0-",),
        ("v1.0-" + _fake(24, _HEX) + "-" + _fake(146, _HEX),),
        ("v1.0-release-candidate",),
    ),
    # -- code hosting and registries ---------------------------------------------------------------------
    SecretRule(
        "github_token",
        "GitHub tokens: personal (`ghp_`), OAuth (`gho_`), user-to-server (`ghu_`), server-to-server"
        " (`ghs_`), refresh (`ghr_`), fine-grained (`github_pat_`)",
        r"gh[pousr]_(?<![A-Za-z0-9_-]gh[pousr]_)[A-Za-z0-9]{36,}"
        r"|github_pat_(?<![A-Za-z0-9_-]github_pat_)[A-Za-z0-9_]{22,}",
        "word",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        (
            "gh ghp_" + _fake(36),
            "gho_" + _fake(36),
            "ghu_" + _fake(36),
            "ghs_" + _fake(36),
            "ghr_" + _fake(36),
            "github_pat_11ABCDEFG0" + _fake(70),
        ),
        ("ghp_short", "github_pat_"),
    ),
    SecretRule(
        "gitlab_token",
        "GitLab tokens: personal/project/group (`glpat-`), deploy (`gldt-`), runner (`glrt-`, "
        "`GR1348941`), pipeline trigger (`glptt-`), CI job (`glcbt-`), feed, incoming mail, SCIM, agent",
        r"(?<![A-Za-z0-9_-])gl(?:pat|dt|rt|ptt|cbt|imt|soat|ffct|agent|oas|ft)-[A-Za-z0-9_-]{20,}"
        r"|GR1348941(?<![A-Za-z0-9_-]GR1348941)[A-Za-z0-9_-]{20,}",
        "word",
        (
            "glpat-",
            "gldt-",
            "glrt-",
            "glptt-",
            "glcbt-",
            "glimt-",
            "glsoat-",
            "glffct-",
            "glagent-",
            "gloas-",
            "glft-",
            "gr1348941",
        ),
        ("gitlab glpat-" + _fake(20), "gldt-" + _fake(20), "glrt-" + _fake(20), "GR1348941" + _fake(20)),
        ("glpat-short", "global-" + _fake(24)),
    ),
    SecretRule(
        "bitbucket_token",
        "Bitbucket app password / access token (`ATBB`, `ATCTT3x`)",
        _prefixed("ATBB", r"[A-Za-z0-9_=.-]{28,}") + "|" + _prefixed("ATCTT3x", r"[A-Za-z0-9_=-]{60,}"),
        "word",
        ("atbb", "atctt3x"),
        ("ATBB" + _fake(32),),
        ("ATBBshort",),
    ),
    SecretRule(
        "npm_token",
        "npm access token (`npm_` and 36 characters)",
        _prefixed("npm_", r"[A-Za-z0-9]{36}", _END),
        "word",
        ("npm_",),
        ("//registry.npmjs.org/:_authToken=npm_" + _fake(36),),
        ("npm_config_cache_directory_x",),
    ),
    SecretRule(
        "pypi_token",
        "PyPI and TestPyPI upload token (`pypi-AgE…`)",
        _prefixed("pypi-", r"AgE[A-Za-z0-9_-]{50,}"),
        "word",
        ("pypi-",),
        ("pypi-AgEIcHlwaS5vcmc" + _fake(70),),
        ("pypi-simple-index-mirror",),
    ),
    SecretRule(
        "docker_hub_token",
        "Docker Hub personal access token (`dckr_pat_`, `dckr_oat_`)",
        r"(?<![A-Za-z0-9_-])dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,}",
        "word",
        ("dckr_pat_", "dckr_oat_"),
        ("dckr_pat_" + _fake(27),),
        ("dckr_pat_short",),
    ),
    # -- messaging --------------------------------------------------------------------------------------
    SecretRule(
        "slack_token",
        "Slack tokens: bot, user, app, config, refresh (`xoxb-`, `xoxp-`, `xapp-`, `xoxe.xoxp-`, …)",
        r"xox[a-z](?:\.xox[a-z])?-(?<![A-Za-z0-9_]xox[a-z]-)[A-Za-z0-9-]{10,}"
        r"|xoxe\.xox[a-z]-[A-Za-z0-9-]{10,}|xapp-(?<![A-Za-z0-9_]xapp-)[A-Za-z0-9-]{20,}",
        "word",
        ("xox", "xapp-"),
        (
            "slack xoxb-1234567890-" + _fake(24),
            "xoxp-1234567890-" + _fake(24),
            "xapp-1-A0123456789-1234567890-" + _fake(32, _HEX),
        ),
        ("xoxo hugs and kisses",),
    ),
    SecretRule(
        "slack_webhook",
        "Slack incoming-webhook and workflow URLs",
        r"(?P<p>hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9/_-]{20,}",
        "text",
        ("hooks.slack.com/",),
        (
            "post to https://hooks.slack.com/services/T0"
            + _fake(8, _UPPER)
            + "/B0"
            + _fake(8, _UPPER)
            + "/"
            + _fake(24),
        ),
        ("https://hooks.slack.com/",),
    ),
    SecretRule(
        "discord_bot_token",
        "Discord bot token (three dot-separated base64url parts)",
        r"(?<![A-Za-z0-9_-])[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}(?![A-Za-z0-9_-])",
        "shape",
        (".",),
        ("bot token M" + _fake(25) + "." + _fake(6) + "." + _fake(38),),
        ("Mostly.harmless.text",),
    ),
    SecretRule(
        "discord_webhook",
        "Discord webhook URL",
        r"(?P<p>discord(?:app)?\.com/api/webhooks/\d{5,30}/)[A-Za-z0-9_-]{20,}",
        "text",
        ("discord.com/api/webhooks/", "discordapp.com/api/webhooks/"),
        ("https://discord.com/api/webhooks/123456789012345678/" + _fake(68),),
        ("https://discord.com/channels/123",),
    ),
    SecretRule(
        "telegram_bot_token",
        "Telegram bot token (`<bot id>:AA…`)",
        r"(?<![0-9])\d{8,10}:AA[A-Za-z0-9_-]{33}(?![A-Za-z0-9_-])",
        "word",
        ("aa",),
        ("https://api.telegram.org/bot123456789:AA" + _fake(33) + "/getMe",),
        ("at 12345678:AA the meeting",),
    ),
    SecretRule(
        "twilio_key",
        "Twilio API key SID secret pair (`SK` and 32 hex)",
        _prefixed("SK", r"[0-9a-fA-F]{32}", r"(?![A-Za-z0-9])"),
        "word",
        ("sk",),
        ("twilio SK" + _fake(32, _HEX),),
        ("SKELETON_" + _fake(24),),
    ),
    SecretRule(
        "sendgrid_key",
        "SendGrid API key (`SG.` and two base64url parts)",
        _prefixed("SG.", r"[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}", _END),
        "word",
        ("sg.",),
        ("SG." + _fake(22) + "." + _fake(43),),
        ("SG.short.value",),
    ),
    SecretRule(
        "mailgun_key",
        "Mailgun API key (`key-` and 32 hex)",
        _prefixed("key-", r"[0-9a-f]{32}", _END),
        "word",
        ("key-",),
        ("mailgun key-" + _fake(32, _HEX),),
        ("key-value-store-configuration",),
    ),
    SecretRule(
        "mailchimp_key",
        "Mailchimp API key (32 hex and the data-centre suffix `-us12`)",
        r"(?<![0-9a-f])[0-9a-f]{32}-us\d{1,2}(?![0-9])",
        "shape",
        ("-us",),
        ("mailchimp " + _fake(32, _HEX) + "-us12",),
        (_fake(32, _HEX) + "-usage",),
    ),
    # -- SaaS --------------------------------------------------------------------------------------------
    SecretRule(
        "stripe_key",
        "Stripe secret, restricted and webhook-signing keys (`sk_live_`, `rk_live_`, `whsec_`, test keys)",
        r"(?<![A-Za-z0-9_-])(?:[sr]k_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})",
        "word",
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"),
        ("stripe sk_live_" + _fake(24), "rk_live_" + _fake(24), "sk_test_" + _fake(24), "whsec_" + _fake(32)),
        ("pk_live_" + _fake(24), "sk_live_short"),
    ),
    SecretRule(
        "shopify_token",
        "Shopify access, custom-app, private-app tokens and shared secrets (`shpat_`, `shpca_`, …)",
        r"(?<![A-Za-z0-9_-])shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}(?![A-Za-z0-9])",
        "word",
        ("shpat_", "shpca_", "shppa_", "shpss_"),
        ("shpat_" + _fake(32, _HEX),),
        ("shpat_short",),
    ),
    SecretRule(
        "square_token",
        "Square access token and OAuth secret (`EAAA…`, `sq0atp-`, `sq0csp-`)",
        _prefixed("EAAA", r"[A-Za-z0-9_-]{59,}") + r"|sq0(?:atp|csp)-[A-Za-z0-9_-]{22,43}",
        "word",
        ("eaaa", "sq0atp-", "sq0csp-"),
        ("EAAA" + _fake(60), "sq0csp-" + _fake(43)),
        ("EAAAshort",),
    ),
    SecretRule(
        "linear_key",
        "Linear API key (`lin_api_`) and OAuth token (`lin_oauth_`)",
        r"(?<![A-Za-z0-9_-])lin_(?:api|oauth)_[A-Za-z0-9]{40}(?![A-Za-z0-9])",
        "word",
        ("lin_api_", "lin_oauth_"),
        ("lin_api_" + _fake(40),),
        ("lin_api_short",),
    ),
    SecretRule(
        "notion_token",
        "Notion integration token (`ntn_`, legacy `secret_` and 43 characters)",
        _prefixed("ntn_", r"[A-Za-z0-9]{40,}") + "|" + _prefixed("secret_", r"[A-Za-z0-9]{43}", _END),
        "word",
        ("ntn_", "secret_"),
        ("ntn_" + _fake(46), "secret_" + _fake(43)),
        ("ntn_short", "secret_santa_count"),
    ),
    SecretRule(
        "atlassian_token",
        "Atlassian API token (`ATATT3x…`)",
        _prefixed("ATATT3x", r"[A-Za-z0-9_=-]{60,}"),
        "word",
        ("atatt3x",),
        ("ATATT3xFfGF0" + _fake(180),),
        ("ATATT3xshort",),
    ),
    SecretRule(
        "sentry_token",
        "Sentry organisation and user auth tokens (`sntrys_`, `sntryu_`)",
        r"(?<![A-Za-z0-9_-])sntry[su]_[A-Za-z0-9+/=_-]{40,}",
        "word",
        ("sntrys_", "sntryu_"),
        ("sntrys_eyJpYXQiOjE2ODczMzY1NDMuNjk4NjI0LCJ1cmwiOm51bGx9" + _fake(40),),
        ("sntrys_short",),
    ),
    SecretRule(
        "datadog_key",
        "Datadog API (32 hex) and application (40 hex) keys written next to their name",
        r"(?P<p>(?:dd|datadog)[\w.-]{0,30}(?:api|app|application)[\w.-]{0,10}key[\"']?\s{0,3}[=:]\s{0,3}"
        r"[\"']?)[0-9a-f]{32,40}(?![0-9a-f])",
        "context",
        ("dd_", "dd-", "datadog"),
        ("DD_API_KEY=" + _fake(32, _HEX), "datadog_app_key: " + _fake(40, _HEX)),
        ("DD_SITE=datadoghq.eu",),
        ignore_case=True,
    ),
    SecretRule(
        "new_relic_key",
        "New Relic user API key and insights keys (`NRAK-`, `NRII-`)",
        r"(?<![A-Za-z0-9_-])NR(?:AK|II)-[A-Z0-9]{27}(?![A-Za-z0-9])",
        "word",
        ("nrak-", "nrii-"),
        ("NRAK-" + _fake(27, _UPPER),),
        ("NRAK-short",),
    ),
    SecretRule(
        "hashicorp_token",
        "HashiCorp Vault service, batch and recovery tokens (`hvs.`, `hvb.`, `hvr.`)",
        r"(?<![A-Za-z0-9_-])hv[sbr]\.[A-Za-z0-9_-]{24,}",
        "word",
        ("hvs.", "hvb.", "hvr."),
        ("vault hvs." + _fake(24), "hvb." + _fake(90)),
        ("hvs.short",),
    ),
    SecretRule(
        "terraform_token",
        "Terraform Cloud / Enterprise API token (`….atlasv1.…`)",
        r"(?<![A-Za-z0-9])[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}",
        "shape",
        (".atlasv1.",),
        (_fake(14) + ".atlasv1." + _fake(67),),
        ("app.atlasv1.short",),
    ),
    SecretRule(
        "age_secret_key",
        "age encryption secret key (`AGE-SECRET-KEY-1…`)",
        _prefixed("AGE-SECRET-KEY-1", f"[{_BECH32}]{{58}}", _END),
        "word",
        ("age-secret-key-1",),
        ("AGE-SECRET-KEY-1" + _fake(58, _BECH32),),
        ("AGE-SECRET-KEY-1SHORT",),
    ),
)
"""Every value shape mastrace scrubs. Ordered: where two rules match the same text, the earlier
rule names the replacement (`anthropic_key` before `openai_key`)."""


# -- key names -----------------------------------------------------------------------------------------

SECRET_WORDS = frozenset(
    {
        "password", "passwd", "pwd", "passphrase", "passcode", "secret", "secrets", "token", "apikey",
        "authorization", "auth", "bearer", "cookie", "cookies", "credential", "credentials", "creds",
        "jwt", "csrf", "xsrf", "ssn", "privatekey", "accesstoken", "refreshtoken", "authtoken",
        "idtoken", "sessiontoken", "clientsecret", "secretkey", "apitoken", "accesskey", "connectionstring",
        "connstr", "sas", "saskey", "pat",
    }
)  # fmt: skip
"""A key with one of these as a whole segment names a secret."""

SECRET_PAIRS = frozenset(
    {
        ("api", "key"), ("private", "key"), ("secret", "key"), ("access", "key"), ("account", "key"),
        ("connection", "string"), ("conn", "string"), ("conn", "str"), ("credit", "card"),
        ("card", "number"), ("social", "security"), ("session", "key"), ("master", "key"),
        ("encryption", "key"), ("signing", "key"), ("shared", "key"), ("app", "key"), ("license", "key"),
        ("webhook", "url"), ("service", "key"), ("admin", "key"), ("client", "key"), ("write", "key"),
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
        "ids", "prefix", "suffix", "santa", "level", "flow", "grant", "scope", "scopes", "issuer",
        "audience", "domain", "status", "state", "error", "errors", "attempts", "retries", "manager",
    }
)  # fmt: skip
"""A key whose last segment is one of these describes a secret rather than holding one
(`token_budget`, `auth_method`, `secret_name`), unless that last segment is itself the secret word."""

SAFE_BEFORE_TOKEN = frozenset(
    {
        "max", "min", "num", "n", "input", "output", "prompt", "completion", "total", "reasoning",
        "cached", "cache", "audio", "text", "image", "new", "stop", "special", "end", "start", "bos",
        "eos", "pad", "unk", "sep", "mask", "cls", "first", "last", "next", "per", "thinking", "tool",
        "visible", "accepted", "rejected", "predicted", "context",
    }
)  # fmt: skip
"""Words before `token` that make it a count or a tokenizer's special token (`max_token`, `eos_token`)."""

SAFE_KEY_PREFIXES = ("massgen.usage.", "gen_ai.usage.", "mastrace.usage.", "llm.usage.", "logfire.")
"""Keys under these prefixes hold counts and costs, or Logfire's own fields: never blanked by name."""

PASSWORD_WORDS = frozenset({"password", "passwd", "pwd", "passphrase", "passcode"})
"""Secret words whose value is a secret even when it is short and plain (`password: hunter22`)."""


_SEGMENT = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def key_segments(key: str) -> list[re.Match[str]]:
    """The segments of a key: split on anything but letters and digits, and at camelCase humps."""
    return list(_SEGMENT.finditer(key))


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
    for i, word in enumerate(words):
        if word in SECRET_WORDS:
            if word == "token" and i and words[i - 1] in SAFE_BEFORE_TOKEN:
                continue
            found = (i, i)
        elif i and (words[i - 1], word) in SECRET_PAIRS:
            found = (i - 1, i)
        if found is not None:
            break
    if found is None:
        return None
    last = len(words) - 1
    if found[1] < last and words[last] in SAFE_LAST_SEGMENTS:
        return None
    return segments[found[0]].start(), segments[found[1]].end()


_PLACEHOLDERS = frozenset(
    {
        "none", "null", "nil", "true", "false", "undefined", "redacted", "******", "xxxxxxxx", "required",
        "optional", "changeme", "example", "placeholder", "secret", "password", "token", "string", "str",
        "your-api-key", "your_api_key", "<redacted>", "hidden", "masked", "unset", "empty", "missing",
    }
)  # fmt: skip


def assignment_value_is_secret(key: str, value: str) -> bool:
    """Whether `value`, written next to the secret-named `key` in free text, is worth scrubbing.

    Password-like names take any value of 4 or more characters; other names (`token`, `api_key`) a
    value that looks random: 8 or more characters mixing at least two of lower case, upper case,
    digits and symbols, and not only digits.
    """
    if len(value) < 4 or value.lower() in _PLACEHOLDERS or value.startswith(("[Scrubbed", "$", "<", "%(")):
        return False
    if value.startswith("{{") or set(value) <= set("*xX.-_#"):
        return False
    words = {m.group().lower() for m in key_segments(key)}
    if words & PASSWORD_WORDS:
        return True
    if len(value) < 8 or value.isdigit():
        return False
    classes = (
        any(c.islower() for c in value)
        + any(c.isupper() for c in value)
        + any(c.isdigit() for c in value)
        + any(not c.isalnum() for c in value)
    )
    return classes >= 2
