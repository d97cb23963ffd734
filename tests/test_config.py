"""configure(): the environment-variable table, validation, TRACEPARENT, flush results, reconfiguration."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import mastrace
from mastrace.setup import _config
from mastrace.store import query
from mastrace.tracing._tracer import NOOP_SPAN


def run_spans(*names: str) -> None:
    tracer = mastrace.get_tracer()
    for name in names:
        with tracer.span(name):
            pass


def captured(**kwargs: object) -> InMemorySpanExporter:
    memory = InMemorySpanExporter()
    kwargs.setdefault("local", False)
    mastrace.configure(exporters=[memory], synchronous=True, **kwargs)  # type: ignore[arg-type]
    return memory


def only_span(memory: InMemorySpanExporter) -> ReadableSpan:
    (span,) = memory.get_finished_spans()
    return span


def destination_names() -> set[str]:
    return set(mastrace.force_flush(timeout=5).destinations)


# --- the environment-variable table ----------------------------------------------------------------
def test_otel_service_name_sets_the_resource(monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_SERVICE_NAME becomes `service.name` when no argument is given."""
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    memory = captured()
    run_spans("s")
    assert only_span(memory).resource.attributes["service.name"] == "from-env"


def test_service_name_argument_beats_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """An explicit service_name wins over OTEL_SERVICE_NAME."""
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    memory = captured(service_name="from-arg")
    run_spans("s")
    assert only_span(memory).resource.attributes["service.name"] == "from-arg"


def test_otel_resource_attributes_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_RESOURCE_ATTRIBUTES adds resource attributes (e.g. a Phoenix project)."""
    monkeypatch.setenv(
        "OTEL_RESOURCE_ATTRIBUTES", "openinference.project.name=agents,deployment.environment=ci"
    )
    memory = captured()
    run_spans("s")
    attributes = only_span(memory).resource.attributes
    assert (attributes["openinference.project.name"], attributes["deployment.environment"]) == (
        "agents",
        "ci",
    )


def test_local_store_is_on_by_default_in_the_working_directory() -> None:
    """With no arguments, spans go to ./.mastrace."""
    mastrace.configure()
    run_spans("default-store")
    assert mastrace.force_flush(timeout=10).destinations["local"].exported == 1
    rows = query("SELECT span_name FROM records", Path.cwd() / ".mastrace")
    assert rows == [{"span_name": "default-store"}]


def test_mastrace_dir_moves_the_local_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """MASTRACE_DIR is where the local store is written."""
    monkeypatch.setenv("MASTRACE_DIR", str(tmp_path / "elsewhere"))
    mastrace.configure()
    run_spans("moved")
    mastrace.force_flush(timeout=10)
    assert query("SELECT span_name FROM records", tmp_path / "elsewhere") == [{"span_name": "moved"}]
    assert not (Path.cwd() / ".mastrace").exists()


def test_mastrace_local_0_turns_the_store_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """MASTRACE_LOCAL=0 configures no local destination when `local` is not passed."""
    monkeypatch.setenv("MASTRACE_LOCAL", "0")
    mastrace.configure(exporters=[InMemorySpanExporter()], synchronous=True)
    assert "local" not in destination_names()
    assert not (Path.cwd() / ".mastrace").exists()


def test_mastrace_otlp_adds_an_otlp_destination(monkeypatch: pytest.MonkeyPatch) -> None:
    """MASTRACE_OTLP=<url> sends spans over OTLP."""
    monkeypatch.setenv("MASTRACE_OTLP", "http://127.0.0.1:4318")
    mastrace.configure(local=False)
    assert destination_names() == {"otlp"}


def test_otel_exporter_otlp_endpoint_turns_otlp_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The standard OTEL_EXPORTER_OTLP_ENDPOINT alone enables the OTLP destination."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    mastrace.configure(local=False)
    assert destination_names() == {"otlp"}


def test_mastrace_otlp_0_wins_over_the_standard_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """MASTRACE_OTLP=0 keeps OTLP off even when OTEL_EXPORTER_OTLP_ENDPOINT is set."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    monkeypatch.setenv("MASTRACE_OTLP", "0")
    captured()
    assert "otlp" not in destination_names()


def test_sample_rate_zero_from_the_environment_keeps_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """MASTRACE_SAMPLE_RATE=0 samples every new trace out."""
    monkeypatch.setenv("MASTRACE_SAMPLE_RATE", "0")
    memory = captured()
    run_spans("a", "b", "c")
    assert memory.get_finished_spans() == ()


def test_sample_rate_keeps_whole_traces() -> None:
    """A child is kept exactly when its root is (parent-based sampling)."""
    memory = captured(sample_rate=0.5)
    tracer = mastrace.get_tracer()
    for i in range(200):
        with tracer.span(f"root-{i}"), tracer.span(f"child-{i}"):
            pass
    names = {s.name for s in memory.get_finished_spans()}
    kept = {n.split("-")[1] for n in names if n.startswith("root-")}
    assert 0 < len(kept) < 200
    assert names == {f"root-{i}" for i in kept} | {f"child-{i}" for i in kept}


def test_mastrace_disabled_makes_everything_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    """MASTRACE_DISABLED=1: configure records nothing and spans are the no-op singleton."""
    monkeypatch.setenv("MASTRACE_DISABLED", "1")
    mastrace.configure()
    assert not mastrace.is_configured()
    assert mastrace.get_tracer().span("x") is NOOP_SPAN
    assert not (Path.cwd() / ".mastrace").exists()


def test_flush_interval_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """MASTRACE_FLUSH_INTERVAL and MASTRACE_MAX_QUEUE_SIZE reach the settings."""
    monkeypatch.setenv("MASTRACE_FLUSH_INTERVAL", "0.25")
    monkeypatch.setenv("MASTRACE_MAX_QUEUE_SIZE", "1000")
    mastrace.configure(local=False, exporters=[InMemorySpanExporter()])
    settings = _config._RT.settings
    assert settings is not None and (settings.flush_interval, settings.max_queue_size) == (0.25, 1000)


# --- validation ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MASTRACE_SAMPLE_RATE", "often"),
        ("MASTRACE_SAMPLE_RATE", "1.5"),
        ("MASTRACE_LOCAL", "maybe"),
        ("MASTRACE_DISABLED", "perhaps"),
        ("MASTRACE_OTLP", "not a url"),
        ("MASTRACE_FLUSH_INTERVAL", "soon"),
        ("MASTRACE_MAX_QUEUE_SIZE", "0"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
    ],
)
def test_invalid_environment_values_raise_config_error(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    """Each malformed environment variable raises ConfigError naming the problem."""
    monkeypatch.setenv(name, value)
    if name == "OTEL_EXPORTER_OTLP_PROTOCOL":
        monkeypatch.setenv("MASTRACE_OTLP", "1")
    with pytest.raises(mastrace.ConfigError):
        mastrace.configure()
    assert not mastrace.is_configured()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"sample_rate": -0.1},
        {"sample_rate": "half"},
        {"otlp": "127.0.0.1:4318"},
        {"otlp": 4318},
        {"local": 3},
        {"scrubbing": "yes"},
        {"logfire": ""},
        {"flush_interval": 0},
    ],
)
def test_invalid_arguments_raise_config_error(kwargs: dict[str, object]) -> None:
    """Each invalid argument raises ConfigError, which is also a ValueError."""
    with pytest.raises(mastrace.ConfigError) as info:
        mastrace.configure(**kwargs)  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)


def test_a_failed_reconfigure_keeps_the_previous_configuration() -> None:
    """An invalid configure() leaves the working configuration untouched."""
    memory = captured()
    with pytest.raises(mastrace.ConfigError):
        mastrace.configure(otlp="nowhere")
    run_spans("still-recorded")
    assert [s.name for s in memory.get_finished_spans()] == ["still-recorded"]


# --- TRACEPARENT, idempotence, reconfiguration -----------------------------------------------------
def test_traceparent_continues_the_parent_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    """A TRACEPARENT in the environment makes the first span a child of that remote span."""
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    monkeypatch.setenv("TRACEPARENT", f"00-{trace_id}-{span_id}-01")
    memory = captured()
    run_spans("child-process")
    span = only_span(memory)
    assert span.context is not None and span.parent is not None
    assert (f"{span.context.trace_id:032x}", f"{span.parent.span_id:016x}") == (trace_id, span_id)


def test_configure_twice_with_the_same_arguments_keeps_the_pipeline() -> None:
    """A repeated identical configure() is a no-op."""
    mastrace.configure(local=False, console=True)
    pipeline = _config._RT.pipeline
    mastrace.configure(local=False, console=True)
    assert _config._RT.pipeline is pipeline


def test_reconfigure_renames_the_service_on_the_same_provider() -> None:
    """A second configure() with another service name applies it to new spans, keeping one provider."""
    memory = captured(service_name="first")
    provider = trace.get_tracer_provider()
    run_spans("one")
    memory2 = captured(service_name="second")
    run_spans("two")
    assert trace.get_tracer_provider() is provider
    assert only_span(memory).resource.attributes["service.name"] == "first"
    assert only_span(memory2).resource.attributes["service.name"] == "second"


def test_an_existing_global_provider_is_used_not_replaced() -> None:
    """When the app already set a TracerProvider, mastrace adds its destinations to it."""
    from opentelemetry.sdk.trace import TracerProvider

    app_provider = TracerProvider()
    trace.set_tracer_provider(app_provider)
    memory = captured()
    with trace.get_tracer("app").start_as_current_span("app-span"):
        run_spans("mastrace-span")
    assert trace.get_tracer_provider() is app_provider
    assert [s.name for s in memory.get_finished_spans()] == ["mastrace-span", "app-span"]


# --- flush and shutdown ----------------------------------------------------------------------------
def test_force_flush_counts_per_destination(tmp_path: Path) -> None:
    """force_flush() reports exported counts for each destination."""
    memory = InMemorySpanExporter()
    mastrace.configure(local=tmp_path / "store", exporters=[memory])
    run_spans("a", "b")
    result = mastrace.force_flush(timeout=10)
    assert result.ok and result.complete
    assert {name: s.exported for name, s in result.destinations.items()} == {
        "local": 2,
        "InMemorySpanExporter#0": 2,
    }
    assert result.exported == 4


def test_force_flush_before_configure_is_empty_and_ok() -> None:
    """Without configure(), force_flush() returns an empty, truthy result."""
    result = mastrace.force_flush(timeout=1)
    assert result.ok and result.destinations == {} and result.exported == 0


def test_shutdown_makes_tracing_a_no_op_until_configured_again() -> None:
    """After shutdown() spans are no-ops; configure() brings recording back."""
    captured()
    final = mastrace.shutdown(timeout=5)
    assert final.complete and not mastrace.is_configured()
    assert mastrace.get_tracer().span("x") is NOOP_SPAN
    memory = captured()
    run_spans("again")
    assert only_span(memory).name == "again"


def test_shutdown_interrupted_ends_open_spans_marked() -> None:
    """shutdown(interrupted=True) ends spans still open with mastrace.interrupted=true."""
    memory = captured()
    span = mastrace.get_tracer().start_span("left-open")
    mastrace.shutdown(timeout=5, interrupted=True)
    assert only_span(memory).attributes == {"mastrace.interrupted": True}
    assert not span.is_recording()


def test_shutdown_timeout_env_is_read_at_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exit hook ends open spans and honours MASTRACE_SHUTDOWN_TIMEOUT."""
    monkeypatch.setenv("MASTRACE_SHUTDOWN_TIMEOUT", "2")
    memory = captured()
    mastrace.get_tracer().start_span("open-at-exit")
    _config._at_exit()
    assert not mastrace.is_configured()
    assert only_span(memory).attributes == {"mastrace.interrupted": True}


def test_an_unwritable_store_path_does_not_raise(tmp_path: Path) -> None:
    """A local store path that cannot be created is a warning, not an exception in the application."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    mastrace.configure(local=blocker / "store")
    assert mastrace.is_configured()
    assert os.listdir(tmp_path) == ["file"]
