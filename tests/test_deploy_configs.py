"""collector-config.yaml and docker-compose.yml: consistent with each other, the SDK defaults and the docs."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from opentelemetry.exporter.otlp.proto.http.trace_exporter import DEFAULT_ENDPOINT as SDK_HTTP_ENDPOINT

ROOT = Path(__file__).resolve().parents[1]
SDK_GRPC_PORT = 4317  # opentelemetry-exporter-otlp-proto-grpc's default endpoint is localhost:4317
SDK_HTTP_PORT = urlsplit(SDK_HTTP_ENDPOINT).port
ENV_REF = re.compile(r"\$\{env:(?P<name>[A-Z0-9_]+)(?::-(?P<default>[^}]*))?\}")


def load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((ROOT / name).read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def collector() -> dict[str, Any]:
    return load("collector-config.yaml")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load("docker-compose.yml")


@pytest.fixture(scope="module")
def viewing() -> str:
    return (ROOT / "README.md").read_text()


def resolve_default(value: str) -> str:
    """The value a collector sees when the referenced variable is unset."""
    return ENV_REF.sub(lambda m: m.group("default") or "", value)


def port_of(endpoint: str) -> int:
    return int(str(endpoint).rsplit(":", 1)[1])


def collector_service(compose: dict[str, Any]) -> dict[str, Any]:
    (service,) = [s for s in compose["services"].values() if "opentelemetry-collector" in s["image"]]
    return service


def test_every_pipeline_component_is_defined(collector: dict[str, Any]) -> None:
    """Each receiver, processor and exporter a pipeline names (env defaults applied) is defined."""
    pipelines = collector["service"]["pipelines"]
    assert pipelines
    for pipeline in pipelines.values():
        for kind in ("receivers", "processors", "exporters"):
            for name in pipeline.get(kind, []):
                assert resolve_default(name) in collector[kind], f"{kind}: {name}"
    for name in collector["service"].get("extensions", []):
        assert name in collector["extensions"]


def test_traces_go_through_batch_to_jaeger(collector: dict[str, Any]) -> None:
    """The traces pipeline is OTLP in, batch, then the Jaeger OTLP exporter."""
    traces = collector["service"]["pipelines"]["traces"]
    assert traces["receivers"] == ["otlp"]
    assert "batch" in traces["processors"]
    assert traces["exporters"] == ["otlp/jaeger"]


def test_receiver_ports_match_the_sdk_defaults(collector: dict[str, Any]) -> None:
    """The collector listens where the OTLP exporters send by default: 4317 gRPC, 4318 HTTP."""
    protocols = collector["receivers"]["otlp"]["protocols"]
    assert port_of(protocols["grpc"]["endpoint"]) == SDK_GRPC_PORT
    assert port_of(protocols["http"]["endpoint"]) == SDK_HTTP_PORT == 4318


def test_logfire_exporter_is_optional_and_takes_the_token_from_the_environment(
    collector: dict[str, Any],
) -> None:
    """By default the Logfire pipeline exports nowhere; chosen, it sends LOGFIRE_TOKEN as Authorization."""
    (choice,) = collector["service"]["pipelines"]["traces/logfire"]["exporters"]
    assert resolve_default(choice) == "nop"
    logfire = collector["exporters"]["otlphttp/logfire"]
    assert resolve_default(logfire["endpoint"]) == "https://logfire-api.pydantic.dev"
    assert logfire["headers"]["Authorization"] == "${env:LOGFIRE_TOKEN}"
    assert "MASTRACE_LOGFIRE_EXPORTER=otlphttp/logfire" in (ROOT / "README.md").read_text()


def test_compose_passes_every_variable_the_collector_reads(
    collector: dict[str, Any], compose: dict[str, Any]
) -> None:
    """Each ${env:NAME} in the collector config is set in the collector container's environment."""
    names = {m.group("name") for m in ENV_REF.finditer((ROOT / "collector-config.yaml").read_text())}
    assert names >= {"LOGFIRE_TOKEN", "MASTRACE_LOGFIRE_EXPORTER"}
    assert names <= set(collector_service(compose)["environment"])


def test_compose_mounts_the_config_the_collector_is_started_with(compose: dict[str, Any]) -> None:
    """The collector's --config path is where collector-config.yaml is mounted."""
    service = collector_service(compose)
    (config_arg,) = [a for a in service["command"] if a.startswith("--config=")]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in service["volumes"]}
    assert mounts[config_arg.removeprefix("--config=")] == "./collector-config.yaml"


def test_compose_publishes_the_otlp_ports_and_the_jaeger_ui(compose: dict[str, Any]) -> None:
    """Host ports 4317 and 4318 reach the collector, 16686 reaches Jaeger."""
    published = {int(p.split(":")[0]): int(p.split(":")[1]) for p in collector_service(compose)["ports"]}
    assert published[SDK_GRPC_PORT] == SDK_GRPC_PORT and published[4318] == 4318
    jaeger = compose["services"]["jaeger"]
    assert jaeger["image"].startswith("jaegertracing/jaeger:2")
    assert "16686:16686" in jaeger["ports"]


def test_jaeger_exporter_targets_the_jaeger_service(
    collector: dict[str, Any], compose: dict[str, Any]
) -> None:
    """The collector forwards to the compose service named in its exporter, on Jaeger's OTLP gRPC port."""
    host, port = collector["exporters"]["otlp/jaeger"]["endpoint"].split(":")
    assert host in compose["services"] and int(port) == SDK_GRPC_PORT
    assert "jaeger" in collector_service(compose)["depends_on"]


def test_docs_use_the_same_ports_and_commands(viewing: str) -> None:
    """The README starts the stack and points the SDK at the published ports."""
    assert "## View in Jaeger" in viewing and "## View in Logfire" in viewing
    assert "docker compose up -d" in viewing
    assert "OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318" in viewing
    assert "OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4317" in viewing
    assert "http://localhost:16686" in viewing


def test_files_named_in_the_deploy_configs_exist() -> None:
    """Every `docs/...` or other relative file a config's comments point to is in the repository."""
    for name in ("docker-compose.yml", "collector-config.yaml"):
        text = (ROOT / name).read_text()
        for ref in re.findall(r"\b((?:docs|examples)/[\w./-]+\.\w+)", text):
            assert (ROOT / ref).exists(), f"{name} refers to {ref}, which does not exist"


def test_the_readme_install_lines_name_real_extras() -> None:
    """`pip install '.[x]'` in the README: each extra is defined, and no line installs from PyPI by name."""
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    readme = (ROOT / "README.md").read_text()
    lists = re.findall(r"pip install (?:-e )?'\.\[([\w,]+)\]'", readme)
    named = {extra for group in lists for extra in group.split(",")}
    assert named and named <= extras, named - extras
    assert not re.search(r"^pip install mastrace\b", readme, re.M)


# The `clickhouse` exporter's configuration keys, as its README documents them
# (opentelemetry-collector-contrib, exporter/clickhouseexporter): any other key is refused at start-up.
CLICKHOUSE_EXPORTER_KEYS = frozenset(
    {
        "endpoint",
        "username",
        "password",
        "database",
        "connection_params",
        "ttl",
        "logs_table_name",
        "traces_table_name",
        "metrics_table_name",
        "metrics_tables",
        "create_schema",
        "table_engine",
        "cluster_name",
        "async_insert",
        "compress",
        "timeout",
        "sending_queue",
        "retry_on_failure",
    }
)


def test_clickhouse_exporter_uses_documented_keys_and_the_table_mastrace_reads(
    collector: dict[str, Any],
) -> None:
    """The `clickhouse` exporter names only documented keys, writes `otel_traces` with the Collector's
    schema (create_schema), and a pipeline takes OTLP through batch into it."""
    from mastrace.store._clickhouse import DEFAULT_TABLE

    exporter = collector["exporters"]["clickhouse"]
    assert set(exporter) <= CLICKHOUSE_EXPORTER_KEYS
    assert exporter["traces_table_name"] == DEFAULT_TABLE and exporter["create_schema"] is True
    pipeline = collector["service"]["pipelines"]["traces/clickhouse"]
    assert pipeline["receivers"] == ["otlp"] and "batch" in pipeline["processors"]
    assert pipeline["exporters"] == ["clickhouse"]


def test_clickhouse_service_matches_the_exporter_and_what_mastrace_reads(
    collector: dict[str, Any], compose: dict[str, Any]
) -> None:
    """The exporter reaches the compose ClickHouse on its native port with the database and user
    the server creates; the `--source` URLs the configs and the README give parse, and name the
    published HTTP port, that database and the exporter's table."""
    from mastrace.store._clickhouse import parse_target

    exporter = collector["exporters"]["clickhouse"]
    server = compose["services"]["clickhouse"]
    environment = collector_service(compose)["environment"]
    endpoint = urlsplit(resolve_default(environment["CLICKHOUSE_ENDPOINT"]))
    assert endpoint.hostname in compose["services"] and endpoint.port == 9000
    assert resolve_default(exporter["endpoint"]) == environment["CLICKHOUSE_ENDPOINT"]
    assert (
        resolve_default(exporter["database"])
        == environment["CLICKHOUSE_DATABASE"]
        == server["environment"]["CLICKHOUSE_DB"]
    )
    assert (
        resolve_default(exporter["username"])
        == environment["CLICKHOUSE_USER"]
        == server["environment"]["CLICKHOUSE_USER"]
    )
    assert "clickhouse" in collector_service(compose)["depends_on"]
    published = {p.rsplit(":", 2)[-2]: int(p.rsplit(":", 1)[1]) for p in server["ports"]}
    sources = [
        m
        for name in ("docker-compose.yml", "collector-config.yaml", "README.md")
        for m in re.findall(r"--source '(clickhouse://otel@[^']+)'", (ROOT / name).read_text())
    ]
    assert len(sources) >= 4
    for url in sources:
        target = parse_target(url)
        assert (
            target.host == "localhost"
            and str(target.port) in published
            and published[str(target.port)] == 8123
        )
        assert target.database == server["environment"]["CLICKHOUSE_DB"]
        assert (
            target.table == exporter["traces_table_name"]
            and target.username == server["environment"]["CLICKHOUSE_USER"]
        )
