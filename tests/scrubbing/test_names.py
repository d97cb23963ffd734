"""Key names: which hold secrets (a secret word as a whole segment, and the forms real environments use:
a provider's `KEY`, compact names, `*_DSN`, `*_CREDENTIALS*`, `*_JSON_B64`) and which stay; and the
values written next to them: literals are secrets, references, templates and identifiers are not."""

from __future__ import annotations

import pytest

from mastrace.scrubbing._engine import Scrubber
from mastrace.scrubbing._names import (
    is_reference,
    literal_value_is_secret,
    looks_like_identifier,
    secret_key_word,
)

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
    "key_id",
    "access_key_id",
    "AWS_ACCESS_KEY_ID",
    "sort_key",
    "cache_key",
    "public_key",
    "first_pass",
    "pass_rate",
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
    "OPENAI_KEY",
    "ANTHROPIC_KEY_BACKUP",
    "PGPASSWORD",
    "MYSQL_PWD",
    "REDIS_PASS",
    "SENTRY_DSN",
    "SERVICE_ACCOUNT_JSON_B64",
]

# Environment variables that hold a secret, in the forms real deployments use.
SECRET_ENV_NAMES = [
    "OPENAI_API_KEY", "OPENAI_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_KEY_BACKUP", "GEMINI_API_KEY",
    "MISTRAL_KEY", "GROQ_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "GITHUB_TOKEN", "GH_PAT",
    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AZURE_OPENAI_KEY", "PGPASSWORD", "MYSQL_PWD",
    "MYSQL_ROOT_PASSWORD", "REDIS_PASS", "SMTP_PASS", "DB_PASS", "SENTRY_DSN", "DATABASE_DSN",
    "GOOGLE_CREDENTIALS", "GCP_CREDENTIALS_JSON", "SERVICE_ACCOUNT_JSON_B64", "FIREBASE_JSON_BASE64",
    "STRIPE_SECRET", "SLACK_BOT_TOKEN", "LOGFIRE_TOKEN", "NPM_AUTH_TOKEN", "DOCKER_PASSWORD",
    "STRIPE_KEY_2", "SENDGRID_KEY_PROD",
]  # fmt: skip

# Environment variables that do not, and must stay readable.
ORDINARY_ENV_NAMES = [
    "PATH", "HOME", "OPENAI_BASE_URL", "OPENAI_MODEL", "ANTHROPIC_MODEL", "AWS_REGION", "AWS_ACCESS_KEY_ID",
    "MAX_TOKENS", "TOKEN_BUDGET", "PGHOST", "PGUSER", "REDIS_HOST", "SENTRY_ENVIRONMENT", "SORT_KEY",
    "CACHE_KEY", "PRIMARY_KEY", "KEYBOARD_LAYOUT", "MONKEY_PATCH", "PASS_RATE", "FIRST_PASS",
    "GOOGLE_APPLICATION_CREDENTIALS_FILE", "PASSWORD_FILE", "TOKENIZERS_PARALLELISM",
]  # fmt: skip


@pytest.fixture(scope="module")
def scrubber() -> Scrubber:
    return Scrubber(matcher="python")


@pytest.mark.parametrize("key", ORDINARY_KEYS)
def test_ordinary_keys_are_kept(scrubber: Scrubber, key: str) -> None:
    """Keys that merely mention a secret word (`token_budget`, `keyword`, `key_id`) keep their value."""
    assert secret_key_word(key) is None
    attrs, paths = scrubber.scrub_attributes({key: "some ordinary value"})
    assert attrs[key] == "some ordinary value" and paths == []


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_secret_keys_are_blanked(scrubber: Scrubber, key: str) -> None:
    """A key naming a secret has its whole value blanked."""
    attrs, _ = scrubber.scrub_attributes({key: "hunter22-plain"})
    assert attrs[key].startswith("[Scrubbed due to ")


def test_the_blanking_note_names_the_secret_word(scrubber: Scrubber) -> None:
    """The note says which word of the key made it secret."""
    attrs, _ = scrubber.scrub_attributes(
        {"x-api-key": "v", "AWS_SECRET_ACCESS_KEY": "v", "apiKey": "v", "OPENAI_KEY": "v", "PGPASSWORD": "v"}
    )
    assert attrs == {
        "x-api-key": "[Scrubbed due to 'api-key']",
        "AWS_SECRET_ACCESS_KEY": "[Scrubbed due to 'SECRET']",
        "apiKey": "[Scrubbed due to 'apiKey']",
        "OPENAI_KEY": "[Scrubbed due to 'KEY']",
        "PGPASSWORD": "[Scrubbed due to 'PGPASSWORD']",
    }


@pytest.mark.parametrize("name", SECRET_ENV_NAMES)
def test_secret_environment_variables_are_scrubbed_everywhere(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The value of each secret-bearing variable is scrubbed from free text, and its name blanks a key."""
    value = "v4lue-" + name.lower().replace("_", "")[:10] + "-Zq8"
    monkeypatch.setenv(name, value)
    scrubber = Scrubber(matcher="python")
    assert (
        scrubber.scrub_text(f"the tool printed {value} twice")
        == f"the tool printed [Scrubbed: env {name}] twice"
    )
    assert secret_key_word(name) is not None


@pytest.mark.parametrize("name", ORDINARY_ENV_NAMES)
def test_ordinary_environment_variables_stay(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The value of an ordinary variable stays in text, and its name blanks nothing."""
    value = "plainValue-" + name.lower()[:8] + "-7"
    monkeypatch.setenv(name, value)
    assert Scrubber(matcher="python").scrub_text(f"value {value} here") == f"value {value} here"
    assert secret_key_word(name) is None


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("var.db_password", False), ("${DB_PASSWORD}", False), ("$DB_PASSWORD", False),
        ("{SumoAccessKey}", False), ("{{ .Values.secret }}", True), ("%NUGET_PASSWORD%", True),
        ("<your-password>", True), ("os.environ[", False), ("getenv(", False),
        ("settings.OPENAI_API_KEY", False), ("API_KEY", False), ("user_password", False),
        ("userPassword", False), ("process.env.TOKEN", True),
    ],
)  # fmt: skip
def test_references_are_not_secrets(value: str, quoted: bool) -> None:
    """Variables, templates and placeholders written where a secret could be are references, not values."""
    assert is_reference(value, quoted)
    assert not literal_value_is_secret("password", value, quoted)


@pytest.mark.parametrize(
    "value",
    ["requiredCharacteristicTypesForDisplayMetadata", "secretKeyFromVault", "deploy_user_for_the_app"],
)
def test_identifiers_read_as_words(value: str) -> None:
    """camelCase and snake_case words are identifiers, not random strings."""
    assert looks_like_identifier(value)
    assert not literal_value_is_secret("api_key", value, quoted=True)


@pytest.mark.parametrize("value", ["DmQWQndLjhhScbomQRWAtmgRKosqmAqiyJ", "Zm9vYmFyYmF6", "hunter22x9Q"])
def test_random_letters_are_not_identifiers(value: str) -> None:
    """Random letters are not words run together: such a literal next to a secret name is a secret."""
    assert not looks_like_identifier(value)
    assert literal_value_is_secret("api_key", value, quoted=True)


def test_a_password_takes_any_literal_but_a_token_needs_entropy() -> None:
    """`password: hunter22` is a secret; `token: aaaaaaaa` and `token: 12345678` are not."""
    assert literal_value_is_secret("password", "hunter22", quoted=False)
    assert not literal_value_is_secret("token", "aaaaaaaaaaaa", quoted=True)
    assert not literal_value_is_secret("token", "1234567890123", quoted=True)
    assert not literal_value_is_secret("password", "changeme", quoted=True)
