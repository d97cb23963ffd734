"""Secrets known only by their context — assignments in code and configuration, command lines, headers,
Kubernetes `Secret` data, `.env` files, connection strings and DSNs — and the ordinary agent content,
code and references that must come out untouched."""

from __future__ import annotations

import base64

import pytest

from mastrace.scrubbing._engine import Scrubber
from mastrace.scrubbing._table import expand

SECRET = expand("{{a:24}}")
HEX = expand("{{h:32}}")


@pytest.fixture(scope="module")
def scrubber() -> Scrubber:
    return Scrubber()


CONTEXT_SECRETS = [
    f'api_key = "{SECRET}"',
    f'apiKey := "{SECRET}"',
    f'"secret_key" => "{SECRET}",',
    f"client_secret: {SECRET}",
    f'  password: "{SECRET}"',
    f'{{"auth_token": "{SECRET}"}}',
    f"export GITHUB_TOKEN={SECRET}",
    f"DB_PASSWORD={SECRET}\nDB_HOST=localhost",
    f'<add key="ClearTextPassword" value="{SECRET}" />',
    f"mysql --password={SECRET} app",
    f"tool --api-key {SECRET} --verbose",
    f"mysql -h db -u root -p{SECRET} app",
    f"curl -u elastic:{SECRET} https://es:9200",
    f"AUTHORIZATION: token {HEX}",
    f"authorization: {SECRET}",
    f"Proxy-Authorization: Basic {base64.b64encode(b'admin:' + SECRET.encode()).decode()}",
    f"kind: Secret\ndata:\n  password: {base64.b64encode(SECRET.encode()).decode()}\n",
    f"SENTRY_DSN=https://{HEX}@o4505.ingest.sentry.io/4506",
    f"report to https://{HEX}@o4505.ingest.sentry.io/4506 now",
    f"jdbc:postgresql://db:5432/app?user=app&password={SECRET}",
    f"jdbc:sqlserver://db:1433;databaseName=app;user=sa;password={SECRET};",
    f"jdbc:oracle:thin:scott/{SECRET}@db:1521/ORCL",
    f"Driver={{ODBC Driver 18 for SQL Server}};Server=db;Uid=sa;Pwd={SECRET};",
    f"amqp://worker:{SECRET}@rabbit:5672/vhost",
    f"mqtts://device:{SECRET}@broker:8883",
    f"Server=db;Database=app;User Id=sa;Password={SECRET};",
]


@pytest.mark.parametrize("text", CONTEXT_SECRETS)
def test_context_secrets_are_scrubbed(scrubber: Scrubber, text: str) -> None:
    """The literal in each form is replaced; the name and the form around it stay."""
    out = scrubber.scrub_text(text)
    secret = SECRET if SECRET in text else HEX
    encoded = base64.b64encode(SECRET.encode()).decode()
    assert secret not in out and encoded not in out, out
    assert "[Scrubbed" in out


LOOK_ALIKES = [
    "administrator_login_password = var.db_password",
    "SUMO_ACCESS_KEY={SumoAccessKey}",
    "api_key: ${API_KEY}",
    'token = os.environ["GITHUB_TOKEN"]',
    'password = os.getenv("DB_PASSWORD")',
    "secret: {{ .Values.secret }}",
    "password: <your-password-here>",
    "token_budget = 4096",
    "max_tokens: 1024",
    "hf_requiredCharacteristicTypesForDisplayMetadata",
    "proto_tree_add_item(tree, &hf_servingcell_information_rsrp, tvb, offset, 1, ENC_NA);",
    "curl -u $USER:$PASS https://h/",
    "tool --password-file /run/secrets/db",
    "Authorization: Bearer ${TOKEN}",
    "kind: ConfigMap\ndata:\n  mode: c2VjcmV0LW1vZGU=\n",
    "the passage on keyword search explains the monkey's key idea",
]


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_references_identifiers_and_templates_are_kept(scrubber: Scrubber, text: str) -> None:
    """Code identifiers, references and template placeholders where a secret could be stay as they are."""
    assert scrubber.scrub_text(text) == text


AGENT_CONTENT = [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b fixed the bug",
    "request 550e8400-e29b-41d4-a716-446655440000 and trace 4bf92f3577b34da6a3ce929d0e0e4736",
    "image sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "data:image/png;base64," + base64.b64encode(bytes(range(256)) * 4).decode(),
    "model gpt-4o-mini-2024-07-18, claude-3-5-sonnet-20241022, gemini-2.0-flash-exp",
    "response resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
    "completion chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
    "msg_01XFDUDYJgAACzvnptvVoYEL tool_use toolu_01A09q90qw90lq917835lq9",
    "def get_api_key(self):\n    return self._api_key or os.environ.get('API_KEY')\n",
    "The agents agreed: the answer is 42, because the key insight is that every token costs money. " * 30,
    "sk-learn and task-runner-2024-11-25-abcdef are package names",
]


@pytest.mark.parametrize("text", AGENT_CONTENT)
def test_ordinary_agent_content_is_untouched(scrubber: Scrubber, text: str) -> None:
    """SHAs, UUIDs, digests, base64 images, model names, response ids, code and long answers stay."""
    assert scrubber.scrub_text(text) == text
    assert scrubber.is_plain_text(text) or scrubber.scrub_value(text) == text


FORMERLY_LEAKED = [
    "pscale_pw_{{w:43}}", "EZAK{{a:54}}", "sgp_{{h:16}}_{{h:40}}", "fo1_{{w:43}}", "glc_{{a:48}}",
    "glsa_{{a:32}}_{{h:8}}", "AKCp{{a:69}}", "PMAK-{{h:24}}-{{h:34}}", "pul-{{h:40}}", "pnu_{{a:36}}",
    "dp.pt.{{a:43}}", "dt0c01.{{u:24}}.{{a:64}}", "xkeysib-{{h:64}}-{{a:16}}", "EAAA{{w:60}}",
    "sha256~{{w:43}}",
    "xoxa-2-{{a:40}}", "xoxs-{{d:10}}-{{d:10}}-{{h:30}}", "ABSK{{b:132}}", "AC{{h:32}}:{{h:32}}",
    "curl -u elastic:P@ssw0rd$1 https://es:9200", 'artifactoryApiKey := "{{a:40}}"',
    "kind: Secret\ndata:\n  token: {{b:40}}\n", '<add key="Password" value="{{a:16}}" />',
    '"secret_key" => "{{a:24}}"', 'asana_api_token = "{{d:16}}"',
]  # fmt: skip


@pytest.mark.parametrize("template", FORMERLY_LEAKED)
def test_formats_that_used_to_leave_unscrubbed_are_scrubbed(scrubber: Scrubber, template: str) -> None:
    """Each format an earlier table let through, written as users write it, is scrubbed now."""
    text = expand(template)
    out = scrubber.scrub_text(text)
    assert "[Scrubbed" in out
    secret = text.split("=", 1)[-1].split(":", 1)[-1] if "{{" not in template else None
    assert secret is None or secret not in out
