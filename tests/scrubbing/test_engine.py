"""The scrubbing engine (`scrubbing._engine`): secret keys, secret shapes, safe keys and the trail."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mastrace.exceptions import ConfigError
from mastrace.scrubbing._engine import Scrubber, ScrubbingOptions, ScrubMatch, format_path

# Assembled from parts so that no complete credential-looking literal sits in the source.
_B = "abcdefghijklmnopqrstuvwxyz0123456789"
SECRET_SHAPES: list[tuple[str, str, str]] = [
    (
        "pem_private_key",
        "key:\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN\n-----END PRIVATE KEY-----\nend",
        "MIIEvQIBADAN",
    ),
    ("pem_private_key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA", "MIIEpAIBAAKCAQEA"),
    ("anthropic_key", "ANTHROPIC said sk-ant-api03-" + _B[:30] + " ok", "api03-" + _B[:30]),
    ("openai_key", "key sk-" + _B[:32] + " here", _B[:32]),
    ("openai_key", "project key sk-proj-" + _B[:28] + "_-XY", _B[:28] + "_-XY"),
    ("openai_key", "service sk-svcacct-" + _B[:24], _B[:24]),
    ("stripe_key", "stripe sk_live_" + _B[:24], _B[:24]),
    ("stripe_key", "restricted rk_live_" + _B[:24], _B[:24]),
    ("stripe_key", "test sk_test_" + _B[:24], _B[:24]),
    ("google_api_key", "google AIza" + "SyD" + _B[:32] + " end", "SyD" + _B[:32]),
    ("github_token", "gh ghp_" + _B[:36], _B[:36]),
    ("github_token", "oauth gho_" + _B[:36], _B[:36]),
    ("github_token", "server ghs_" + _B[:36], _B[:36]),
    ("github_token", "user ghu_" + _B[:36], _B[:36]),
    ("github_fine_grained_pat", "fine github_pat_11ABCDEFG0" + _B[:30], "11ABCDEFG0" + _B[:30]),
    ("slack_token", "slack xoxb-1234567890-" + _B[:20], "1234567890-" + _B[:20]),
    ("slack_token", "user xoxp-1234567890-" + _B[:12], "1234567890-" + _B[:12]),
    ("huggingface_token", "hf hf_" + _B[:34], _B[:34]),
    ("aws_access_key_id", "id AKIA" + "IOSFODNN7EXAMPLE" + " x", "IOSFODNN7EXAMPLE"),
    ("aws_access_key_id", "temp ASIA" + "IOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
    (
        "aws_secret_access_key",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI",
    ),
    ("aws_secret_access_key", 'AWS_SECRET_ACCESS_KEY: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"', "K7MDENG"),
    (
        "jwt",
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0",
        "dozjgNry",
    ),
    ("bearer_token", "Authorization: Bearer abc.DEF-ghi_12345678", "abc.DEF-ghi_12345678"),
    ("bearer_token", "authorization: bearer 0123456789abcdef", "0123456789abcdef"),
    ("basic_auth", "Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA"),
    ("url_password", "postgres://admin:hunter2hunter2@db.example.com:5432/app", "hunter2hunter2"),
    ("url_password", "see https://bot:p%40ss@example.org/x", "p%40ss"),
    ("url_query_secret", "https://api.example.com/v1?api_key=abcd1234efgh&q=1", "abcd1234efgh"),
    ("secret_assignment", "login failed: password=hunter22 for admin", "hunter22"),
    ("secret_assignment", 'config {"passwd": "s3cr3t-value"}', "s3cr3t-value"),
    ("secret_assignment", "client_secret: Zm9vYmFyYmF6", "Zm9vYmFyYmF6"),
    ("secret_assignment", "PRIVATE_KEY=abcdef0123", "abcdef0123"),
    ("secret_assignment", "github_token=abcdef0123", "abcdef0123"),
]

SECRET_KEYS: list[str] = [
    "password",
    "db_passwd",
    "passphrase",
    "client_secret",
    "OPENAI_API_KEY",
    "api-key",
    "authorization",
    "credentials",
    "private_key",
    "session_token",
    "set-cookie",
    "x-csrf-token",
    "xsrf",
    "jwt",
    "user_ssn",
    "access_token",
    "refresh.token",
    "bearer",
    "social_security_number",
    "credit_card",
    "card_number",
    "connection_string",
    "github_token",
]

SAFE_KEYS: list[str] = [
    "input_tokens",
    "output_tokens",
    "max_tokens",
    "massgen.usage.input",
    "massgen.usage.output",
    "massgen.usage.cost",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.request.max_tokens",
    "total_tokens",
    "prompt_tokens_details",
    "token_count",
    "tokens",
    "tokenizer",
    "author",
    "mcp.session.id",
]


@pytest.fixture
def scrubber() -> Scrubber:
    """A scrubber with the default options."""
    return Scrubber(ScrubbingOptions())


@pytest.mark.parametrize(("kind", "text", "secret"), SECRET_SHAPES)
def test_secret_shape_is_replaced_in_place(scrubber: Scrubber, kind: str, text: str, secret: str) -> None:
    """Each secret shape is replaced by its kind's marker and the text around it is kept."""
    out = scrubber.scrub_text(text)
    assert secret not in out
    assert f"[Scrubbed: {kind}]" in out
    assert out.split("[Scrubbed")[0] == text[: len(out.split("[Scrubbed")[0])]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_secret_key_blanks_value(scrubber: Scrubber, key: str) -> None:
    """A secret-named key blanks its whole value and names the matching word."""
    attrs, paths = scrubber.scrub_attributes({key: "visible-value-123"})
    assert attrs[key].startswith("[Scrubbed due to '")
    assert paths == [format_path(("attributes", key))]


@pytest.mark.parametrize("key", SAFE_KEYS)
def test_usage_and_token_count_keys_survive(scrubber: Scrubber, key: str) -> None:
    """Token counts, usage keys and other look-alikes are never blanked."""
    attrs, paths = scrubber.scrub_attributes({key: 1234})
    assert attrs[key] == 1234
    assert paths == []


def test_usage_keys_survive_inside_json(scrubber: Scrubber) -> None:
    """Token counts nested in a JSON attribute keep their values next to a scrubbed key."""
    doc = {"usage": {"input_tokens": 10, "output_tokens": 5, "max_tokens": 99}, "api_key": "abc12345"}
    attrs, _ = scrubber.scrub_attributes({"mastrace.config": json.dumps(doc)})
    out = json.loads(attrs["mastrace.config"])
    assert out["usage"] == {"input_tokens": 10, "output_tokens": 5, "max_tokens": 99}
    assert out["api_key"] == "[Scrubbed due to 'api_key']"


def test_url_password_keeps_user_and_host(scrubber: Scrubber) -> None:
    """Only the password of a URL is removed; scheme, user, host and path stay."""
    out = scrubber.scrub_text("redis://worker:topsecret99@cache.internal:6379/0")
    assert out == "redis://worker:[Scrubbed: url_password]@cache.internal:6379/0"


def test_secret_named_env_value_is_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The value of a secret-named environment variable is scrubbed wherever it appears."""
    value = "Zq8vR2mN" + "x7Lp4Kt9"
    monkeypatch.setenv("MY_SERVICE_API_KEY", value)
    out = Scrubber().scrub_text(f"calling with {value} now")
    assert out == "calling with [Scrubbed: env MY_SERVICE_API_KEY] now"


def test_ordinary_env_values_are_not_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Values of ordinary variables, and paths held by secret-named ones, stay visible."""
    monkeypatch.setenv("MY_MODEL_NAME", "claude-sonnet-4")
    monkeypatch.setenv("MY_CREDENTIALS_FILE", "/etc/app/credentials.json")
    out = Scrubber().scrub_text("claude-sonnet-4 reads /etc/app/credentials.json")
    assert out == "claude-sonnet-4 reads /etc/app/credentials.json"


def test_extra_patterns_match_keys_and_values() -> None:
    """An extra pattern blanks a matching key and replaces a matching substring."""
    scrubber = Scrubber(ScrubbingOptions(extra_patterns=[r"internal-\d{4}"]))
    attrs, paths = scrubber.scrub_attributes({"ticket": "see internal-1234 now", "internal-0001": "x"})
    assert attrs["ticket"] == "see [Scrubbed: custom] now"
    assert attrs["internal-0001"] == "[Scrubbed due to 'internal-0001']"
    assert len(paths) == 2


def test_allow_keys_keep_named_values() -> None:
    """An allowed key is not blanked because of its name."""
    scrubber = Scrubber(ScrubbingOptions(allow_keys=["Session_Token"]))
    attrs, paths = scrubber.scrub_attributes({"session_token": "opaque-handle-1", "password": "hunter22"})
    assert attrs["session_token"] == "opaque-handle-1"
    assert paths == ["attributes.password"]


def test_callback_can_keep_a_match() -> None:
    """Returning the matched value from the callback keeps it and records nothing."""
    seen: list[ScrubMatch] = []

    def keep(match: ScrubMatch) -> object:
        seen.append(match)
        return match.value

    scrubber = Scrubber(ScrubbingOptions(callback=keep))
    attrs, paths = scrubber.scrub_attributes({"password": "hunter22", "note": "Bearer abcdefgh12345678"})
    assert attrs == {"password": "hunter22", "note": "Bearer abcdefgh12345678"}
    assert paths == []
    assert [(m.kind, m.path) for m in seen] == [
        ("key", ("attributes", "password")),
        ("bearer_token", ("attributes", "note")),
    ]


def test_callback_can_replace_a_match() -> None:
    """A string returned by the callback replaces the secret substring."""
    scrubber = Scrubber(ScrubbingOptions(callback=lambda m: "<redacted>" if m.kind != "key" else None))
    out = scrubber.scrub_text("token sk-" + _B[:30] + " end")
    assert out == "token <redacted> end"


def test_callback_that_raises_scrubs(caplog: pytest.LogCaptureFixture) -> None:
    """A failing callback leaves the value scrubbed and is reported."""

    def broken(match: ScrubMatch) -> object:
        raise RuntimeError("callback bug")

    attrs, _ = Scrubber(ScrubbingOptions(callback=broken)).scrub_attributes({"password": "hunter22"})
    assert attrs["password"] == "[Scrubbed due to 'password']"
    assert "scrubbing callback raised" in caplog.text


def test_scrubbed_paths_are_reported(scrubber: Scrubber) -> None:
    """The trail names every scrubbed location, including inside JSON, once each."""
    doc = json.dumps({"agents": [{"llm": {"api_key": "abc12345", "note": "sk-" + _B[:30]}}]})
    _, paths = scrubber.scrub_attributes({"mastrace.config": doc, "db": "mysql://u:pw12345@h/db"})
    assert paths == [
        "attributes['mastrace.config'].agents[0].llm.api_key",
        "attributes['mastrace.config'].agents[0].llm.note",
        "attributes.db",
    ]


def test_unchanged_values_are_the_same_objects(scrubber: Scrubber) -> None:
    """Values without secrets come back as the very same objects."""
    text = "an ordinary sentence about agents and rounds"
    doc = json.dumps({"model": "gpt-4o", "temperature": 0.2})
    attrs, paths = scrubber.scrub_attributes({"a": text, "b": doc, "c": ("x" * 10, "y" * 10)})
    assert attrs["a"] is text and attrs["b"] is doc
    assert paths == []


def test_scrubbing_is_idempotent(scrubber: Scrubber) -> None:
    """Scrubbing scrubbed output changes nothing and reports nothing."""
    attrs, _ = scrubber.scrub_attributes({"t": " ".join(text for _, text, _ in SECRET_SHAPES)})
    again, paths = scrubber.scrub_attributes(attrs)
    assert again == attrs
    assert paths == []


def test_prose_is_left_alone(scrubber: Scrubber) -> None:
    """Common words that resemble secret prefixes are not scrubbed."""
    text = "A basic understanding; the task-force-of-agents-alpha; token: null; max_tokens: 4096"
    assert scrubber.scrub_text(text) == text


def test_boolean_under_secret_key_is_kept(scrubber: Scrubber) -> None:
    """Booleans and None under secret-named keys carry no secret and are kept."""
    attrs, paths = scrubber.scrub_attributes(
        {"auth_enabled": True, "cfg": '{"use_auth": false, "cookie": null}'}
    )
    assert attrs["auth_enabled"] is True
    assert json.loads(attrs["cfg"]) == {"use_auth": False, "cookie": None}
    assert paths == []


def test_escaped_secret_inside_json_is_found(scrubber: Scrubber) -> None:
    """A secret that JSON escaping splits in the raw text is still found in the parsed leaf."""
    doc = json.dumps({"header": "Bearer\tabcdefgh12345678"})
    attrs, _ = scrubber.scrub_attributes({"request": doc})
    assert "abcdefgh12345678" not in attrs["request"]


def test_double_encoded_json_is_scrubbed(scrubber: Scrubber) -> None:
    """A JSON string inside a JSON document is scrubbed by key too."""
    inner = json.dumps({"secret": "abc12345"})
    attrs, _ = scrubber.scrub_attributes({"outer": json.dumps({"payload": inner})})
    assert "abc12345" not in attrs["outer"]


def test_deep_json_is_scrubbed(scrubber: Scrubber) -> None:
    """A secret key nested deeper than the walk goes is still not exported."""
    doc: object = {"password": "hunter22"}
    for _ in range(80):
        doc = {"nested": doc}
    attrs, paths = scrubber.scrub_attributes({"deep": json.dumps(doc)})
    assert "hunter22" not in attrs["deep"]
    assert paths


def test_sequence_of_strings_is_scrubbed(scrubber: Scrubber) -> None:
    """Each string of a sequence attribute is scrubbed and the sequence stays a tuple."""
    attrs, _ = scrubber.scrub_attributes({"cmd": ("curl", "-H", "Authorization: Bearer abcdefgh12345678")})
    assert attrs["cmd"] == ("curl", "-H", "Authorization: Bearer [Scrubbed: bearer_token]")


@pytest.mark.parametrize(
    "value",
    [
        (None, "Bearer abcdefgh12345678"),
        (None, None, "x Bearer abcdefgh12345678 y"),
        [None, "Bearer abcdefgh12345678"],
    ],
)
def test_a_sequence_whose_text_is_not_first_is_scrubbed(scrubber: Scrubber, value: Any) -> None:
    """OpenTelemetry sequences may hold None: a secret after one is still found (it was not)."""
    attrs, paths = scrubber.scrub_attributes({"cmd": value})
    assert "abcdefgh12345678" not in repr(attrs["cmd"])
    assert attrs["cmd"][0] is None and isinstance(attrs["cmd"], tuple)
    assert paths == [f"attributes.cmd[{len(value) - 1}]"]


def test_scrub_value_walks_python_containers(scrubber: Scrubber) -> None:
    """scrub_value scrubs mappings and sequences by key and by value without changing the input."""
    config = {"llm": {"api_key": "abc12345", "base_url": "https://u:pw123456@host/v1"}, "agents": ("a", "b")}
    out = scrubber.scrub_value(config)
    assert out == {
        "llm": {
            "api_key": "[Scrubbed due to 'api_key']",
            "base_url": "https://u:[Scrubbed: url_password]@host/v1",
        },
        "agents": ["a", "b"],
    }
    assert config["llm"]["api_key"] == "abc12345"


def test_logfire_keys_are_untouched(scrubber: Scrubber) -> None:
    """Logfire rendering keys are never scrubbed."""
    attrs, paths = scrubber.scrub_attributes(
        {"logfire.msg": "password=hunter22", "logfire.json_schema": "{}"}
    )
    assert attrs["logfire.msg"] == "password=hunter22"
    assert paths == []


def test_invalid_extra_pattern_is_a_config_error() -> None:
    """A pattern that does not compile is refused when the options are built."""
    with pytest.raises(ConfigError, match="invalid scrubbing pattern"):
        ScrubbingOptions(extra_patterns=["(unclosed"])


def test_single_string_extra_patterns_is_a_config_error() -> None:
    """Passing one string instead of a sequence is refused."""
    with pytest.raises(ConfigError):
        ScrubbingOptions(extra_patterns="password")  # type: ignore[arg-type]


def test_options_are_hashable() -> None:
    """Options hold tuples, so equal options compare and hash equal."""
    assert hash(ScrubbingOptions(extra_patterns=["a"])) == hash(ScrubbingOptions(extra_patterns=("a",)))


def test_secret_in_long_text_is_found(scrubber: Scrubber) -> None:
    """A secret deep inside a long text, past the short-string screen, is scrubbed."""
    filler = "the agents voted and the round ended. " * 400
    out = scrubber.scrub_text(filler + "sk-" + _B[:30] + " " + filler)
    assert "[Scrubbed: openai_key]" in out and _B[:30] not in out
    assert len(out) == 2 * len(filler) + len("[Scrubbed: openai_key] ")


def test_package_names_in_a_packages_mapping_are_not_secret_names(scrubber: Scrubber) -> None:
    """Distribution names such as `google-auth` or `tiktoken` under `packages` keep their versions."""
    config = {
        "benchmark": {"packages": {"google-auth": "2.40.0", "tiktoken": "0.9.0", "SecretStorage": "3.3"}}
    }
    attrs, paths = scrubber.scrub_attributes({"mastrace.config": json.dumps(config)})
    assert json.loads(attrs["mastrace.config"]) == config
    assert paths == []


def test_secret_shaped_value_under_packages_is_still_scrubbed(scrubber: Scrubber) -> None:
    """Only key-name matching is skipped under `packages`; a secret-shaped value is still removed."""
    secret = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2
    attrs, _ = scrubber.scrub_attributes({"mastrace.config": json.dumps({"packages": {"x": secret}})})
    assert secret not in attrs["mastrace.config"]


def test_repeated_values_are_judged_the_same_every_time(scrubber: Scrubber) -> None:
    """The cache of screened short strings never lets a repeated secret through."""
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" * 2
    for _ in range(3):
        attrs, _ = scrubber.scrub_attributes({"note": f"use {secret}", "model": "gpt-4o-mini"})
        assert secret not in attrs["note"]
        assert attrs["model"] == "gpt-4o-mini"


def test_plain_keys_remember_only_ordinary_keys(scrubber: Scrubber) -> None:
    """`plain_keys` lists the keys `key_match` found ordinary, never a secret-named one."""
    assert scrubber.key_match("massgen.agent_id") is None
    assert scrubber.key_match("api_key") is not None
    assert "massgen.agent_id" in scrubber.plain_keys
    assert "api_key" not in scrubber.plain_keys


def test_plain_texts_remember_only_plain_strings(scrubber: Scrubber) -> None:
    """`plain_texts` lists strings `is_plain_text` found plain, never a secret-shaped one."""
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" * 2
    assert scrubber.is_plain_text("initial_answer") is True
    assert scrubber.is_plain_text(f"use {secret}") is False
    assert "initial_answer" in scrubber.plain_texts
    assert f"use {secret}" not in scrubber.plain_texts


def test_a_secret_ending_a_json_leaf_is_found_in_every_leaf(scrubber: Scrubber) -> None:
    """A pattern that needs a blank or the text's end after the secret finds it at the end of each
    leaf of a JSON document, not only of the last one."""
    secret = "BUNDLE_ENTERPRISE__CONTRIBSYS__COM=de701515:0c65fea9"
    out = scrubber.scrub_value({"llm": {"endpoint": secret, "list": [1, secret]}})
    assert "0c65fea9" not in json.dumps(out)


def test_long_plain_json_is_known_plain_and_a_secret_in_it_is_not(scrubber: Scrubber) -> None:
    """A JSON text past the plain-text cache is plain when scrubbing keeps it, not with a secret in it."""
    usage = {"provider": "openai", "category": None, **{f"t{i}_tokens": i for i in range(30)}}
    plain = json.dumps(usage)
    assert len(plain) > 256 and not scrubber.is_plain_text(plain)
    assert scrubber.is_plain_json(plain) and scrubber.is_plain_json(plain)  # the second from memory
    assert not scrubber.is_plain_json(json.dumps({**usage, "api_key": "abcdefgh1234"}))
    assert not scrubber.is_plain_json(json.dumps({**usage, "note": "sk-" + _B[:30]}))
    assert not scrubber.is_plain_json("x" * 300) and not scrubber.is_plain_json('{"a": 1}')


def test_long_json_is_not_known_plain_under_a_callback() -> None:
    """With a callback the scrubber cannot say a text is plain without asking it: no quick answer."""
    seen: list[ScrubMatch] = []
    scrubber = Scrubber(ScrubbingOptions(callback=lambda m: seen.append(m)))
    assert not scrubber.is_plain_json(json.dumps({f"t{i}_tokens": i for i in range(40)}))
    assert seen == []
