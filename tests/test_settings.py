"""The settings table: argument > environment > default, errors naming their source, no silent sink."""

from __future__ import annotations

import pickle
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import mastrace
from mastrace.setup import _config, _settings
from mastrace.setup._config import Settings
from mastrace.setup._settings import PARAMS, UNSET, UnsetType, render_markdown_table, resolve, resolve_from
from mastrace.store import query

README = Path(__file__).resolve().parents[1] / "README.md"
SECRET = "sk-proj-" + "Q7x9" * 12  # an OpenAI project key shape


def run_span(name: str = "s", **attributes: Any) -> None:
    with mastrace.get_tracer().span(name, attributes=attributes):
        pass


@contextmanager
def mastrace_warnings() -> Iterator[list[warnings.WarningMessage]]:
    """Record every MastraceWarning raised in the block (and let any other warning fail the test)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found: list[warnings.WarningMessage] = []
        yield found
    found.extend(w for w in caught if issubclass(w.category, mastrace.MastraceWarning))
    others = [w for w in caught if not issubclass(w.category, mastrace.MastraceWarning)]
    assert others == []


def current() -> Settings:
    settings = _config._RT.settings
    assert settings is not None
    return settings


# --- the sentinel ----------------------------------------------------------------------------------
def test_unset_is_a_falsy_singleton_with_a_plain_repr() -> None:
    """UNSET prints as UNSET, is the only UnsetType, is falsy, and survives pickling as itself."""
    assert repr(UNSET) == "UNSET"
    assert UnsetType() is UNSET
    assert not UNSET
    assert pickle.loads(pickle.dumps(UNSET)) is UNSET


def test_every_configure_argument_defaults_to_unset_and_is_in_the_table() -> None:
    """configure()'s keyword arguments are exactly the table's argument rows, each defaulting to UNSET."""
    import inspect

    parameters = inspect.signature(mastrace.configure).parameters
    assert [p.name for p in PARAMS if p.argument] == list(parameters)
    assert {name: p.default for name, p in parameters.items()} == dict.fromkeys(parameters, UNSET)


# --- precedence, for every parameter ---------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One parameter: an environment value and an explicit argument that disagree."""

    env: str
    env_text: str
    explicit: Any
    read: Callable[[Settings], Any]
    from_explicit: Any
    from_env: Any
    from_default: Any


CASES: dict[str, Case] = {
    "service_name": Case(
        "OTEL_SERVICE_NAME",
        "from-env",
        "from-arg",
        lambda s: s.service_name,
        "from-arg",
        "from-env",
        _settings._default_service_name(),
    ),
    "local": Case(
        "MASTRACE_LOCAL", "0", True, lambda s: s.local and s.local.name, ".mastrace", None, ".mastrace"
    ),
    "otlp": Case(
        "MASTRACE_OTLP", "http://127.0.0.1:4318", False, lambda s: s.otlp, None, "http://127.0.0.1:4318", None
    ),
    "logfire": Case("MASTRACE_LOGFIRE", "1", False, lambda s: s.logfire, None, True, None),
    "console": Case("MASTRACE_CONSOLE", "1", False, lambda s: s.console, False, True, False),
    "scrubbing": Case("MASTRACE_SCRUBBING", "0", True, lambda s: s.scrubbing is not None, True, False, True),
    "capture_content": Case(
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        "SPAN_ONLY",
        False,
        lambda s: s.capture_content,
        False,
        True,
        False,
    ),
    "sample_rate": Case("MASTRACE_SAMPLE_RATE", "0.25", 0.75, lambda s: s.sample_rate, 0.75, 0.25, 1.0),
    "propagate_threads": Case(
        "MASTRACE_PROPAGATE_THREADS", "0", True, lambda s: s.propagate_threads, True, False, True
    ),
    "flush_interval": Case(
        "MASTRACE_FLUSH_INTERVAL", "0.25", 0.75, lambda s: s.flush_interval, 0.75, 0.25, 0.5
    ),
    "max_queue_size": Case(
        "MASTRACE_MAX_QUEUE_SIZE", "1000", 5000, lambda s: s.max_queue_size, 5000, 1000, 200_000
    ),
    "otlp_exit_timeout": Case(
        "MASTRACE_OTLP_EXIT_TIMEOUT", "2", 0.5, lambda s: s.otlp_exit_timeout, 0.5, 2.0, 1.0
    ),
    "shutdown_timeout": Case(
        "MASTRACE_SHUTDOWN_TIMEOUT", "2", 7.0, lambda s: s.shutdown_timeout, 7.0, 2.0, 5.0
    ),
    "max_row_bytes": Case(
        "MASTRACE_MAX_ROW_BYTES", "65536", 8192, lambda s: s.max_row_bytes, 8192, 65536, 1_000_000
    ),
    "retention": Case(
        "MASTRACE_RETENTION",
        "7d",
        "5GB",
        lambda s: s.retention and str(s.retention),
        "5000000000B",
        "604800s",
        None,
    ),
    "experiment": Case(
        "MASTRACE_EXPERIMENT", "from-env", "given", lambda s: s.experiment, "given", "from-env", None
    ),
    "repetition": Case("MASTRACE_REPETITION", "3", 1, lambda s: s.repetition, 1, 3, None),
}
# The other direction: an environment value that turns something on, an argument that turns it off
# (or the reverse), for the parameters whose values are switches.
REVERSED: dict[str, Case] = {
    "local": Case(
        "MASTRACE_DIR", "env-store", False, lambda s: s.local and s.local.name, None, "env-store", ".mastrace"
    ),
    "otlp": Case(
        "MASTRACE_OTLP", "0", "http://127.0.0.1:4317", lambda s: s.otlp, "http://127.0.0.1:4317", None, None
    ),
    "console": Case("MASTRACE_CONSOLE", "0", True, lambda s: s.console, True, False, False),
    "scrubbing": Case("MASTRACE_SCRUBBING", "1", False, lambda s: s.scrubbing is not None, False, True, True),
    "capture_content": Case(
        "MASTRACE_CAPTURE_CONTENT", "0", True, lambda s: s.capture_content, True, False, False
    ),
    "propagate_threads": Case(
        "MASTRACE_PROPAGATE_THREADS", "1", False, lambda s: s.propagate_threads, False, True, True
    ),
}


def configure_with(name: str, value: Any) -> None:
    """configure() with one argument given (or not, for UNSET) and an in-memory exporter as destination."""
    kwargs: dict[str, Any] = {"exporters": [InMemorySpanExporter()], "synchronous": True}
    if value is not UNSET:
        kwargs[name] = value
    mastrace.configure(**kwargs)


def test_the_cases_cover_every_parameter_read_from_the_environment() -> None:
    """Adding a parameter with an environment variable without a precedence case fails here."""
    assert set(CASES) == {p.name for p in PARAMS if p.argument and p.env}
    for name, case in CASES.items():
        param = next(p for p in PARAMS if p.name == name)
        assert case.env in param.env


@pytest.mark.parametrize("name", sorted(CASES) + [f"{n}-reversed" for n in sorted(REVERSED)])
def test_an_explicit_argument_beats_a_conflicting_environment_variable(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For every parameter, configure(name=x) with the environment saying otherwise uses x."""
    base = name.removesuffix("-reversed")
    case = REVERSED[base] if name.endswith("-reversed") else CASES[base]
    monkeypatch.setenv(case.env, case.env_text)
    configure_with(base, case.explicit)
    assert case.from_explicit != case.from_env  # a real conflict
    assert case.read(current()) == case.from_explicit


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_environment_beats_the_default(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """For every parameter, its environment variable is used when the argument is not passed."""
    case = CASES[name]
    monkeypatch.setenv(case.env, case.env_text)
    configure_with(name, UNSET)
    assert case.read(current()) == case.from_env
    assert case.from_env != case.from_default


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_default_applies_with_neither(name: str) -> None:
    """For every parameter, with no argument and no variable, the table's default is used."""
    case = CASES[name]
    configure_with(name, UNSET)
    assert case.read(current()) == case.from_default


@pytest.mark.parametrize("name", ["service_name", "otlp", "sample_rate", "flush_interval", "max_queue_size"])
def test_none_means_not_passed(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Passing None (the historical default) reads the environment like not passing the argument."""
    case = CASES[name]
    monkeypatch.setenv(case.env, case.env_text)
    configure_with(name, None)
    assert case.read(current()) == case.from_env


def test_resolve_reports_where_each_value_came_from() -> None:
    """resolve_from() names the argument, the first variable set, or the default."""
    environ = {"MASTRACE_LOCAL": "", "MASTRACE_DIR": "/data/traces"}
    assert resolve_from(_settings.LOCAL, UNSET, environ) == ("/data/traces", "MASTRACE_DIR")
    assert resolve_from(_settings.LOCAL, False, environ) == (False, "argument")
    assert resolve_from(_settings.LOCAL, UNSET, {}) == (True, "default")
    environ = {"MASTRACE_LOGFIRE": "0", "LOGFIRE_TOKEN": "pylf_v1_us_x"}
    assert resolve_from(_settings.LOGFIRE, UNSET, environ) == (False, "MASTRACE_LOGFIRE")
    assert resolve(_settings.LOGFIRE, UNSET, {"LOGFIRE_TOKEN": "pylf_v1_us_x"}) is True


def test_explicit_scrubbing_scrubs_under_mastrace_scrubbing_0(monkeypatch: pytest.MonkeyPatch) -> None:
    """configure(scrubbing=True) with MASTRACE_SCRUBBING=0 still keeps a secret out of the export."""
    monkeypatch.setenv("MASTRACE_SCRUBBING", "0")
    memory = InMemorySpanExporter()
    mastrace.configure(scrubbing=True, local=False, exporters=[memory], synchronous=True)
    run_span(api_key=SECRET, note=f"key is {SECRET}")
    (span,) = memory.get_finished_spans()
    assert SECRET not in repr(dict(span.attributes or {}))
    assert {"api_key", "note"} <= set(span.attributes or {})


def test_mastrace_scrubbing_0_alone_turns_scrubbing_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """The counterpart: without the argument, MASTRACE_SCRUBBING=0 does export the value as given."""
    monkeypatch.setenv("MASTRACE_SCRUBBING", "0")
    memory = InMemorySpanExporter()
    mastrace.configure(local=False, exporters=[memory], synchronous=True)
    run_span(api_key=SECRET)
    (span,) = memory.get_finished_spans()
    assert (span.attributes or {})["api_key"] == SECRET


def test_explicit_console_false_prints_nothing_under_mastrace_console_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """configure(console=False) with MASTRACE_CONSOLE=1 has no console destination and prints nothing."""
    monkeypatch.setenv("MASTRACE_CONSOLE", "1")
    mastrace.configure(console=False, local=False, exporters=[InMemorySpanExporter()], synchronous=True)
    run_span("quiet-span")
    assert set(mastrace.force_flush(timeout=5).destinations) == {"InMemorySpanExporter#0"}
    assert "quiet-span" not in capsys.readouterr().err


def test_explicit_local_true_writes_the_store_under_mastrace_local_0(monkeypatch: pytest.MonkeyPatch) -> None:
    """configure(local=True) with MASTRACE_LOCAL=0 writes ./.mastrace and force_flush says complete."""
    monkeypatch.setenv("MASTRACE_LOCAL", "0")
    mastrace.configure(local=True)
    run_span("stored")
    result = mastrace.force_flush(timeout=10)
    assert result.complete and result.destinations["local"].exported == 1
    assert query("SELECT span_name FROM records", Path.cwd() / ".mastrace") == [{"span_name": "stored"}]


def test_explicit_shutdown_timeout_bounds_the_exit_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exit hook uses shutdown_timeout=, not MASTRACE_SHUTDOWN_TIMEOUT, when both are given."""
    monkeypatch.setenv("MASTRACE_SHUTDOWN_TIMEOUT", "2")
    configure_with("shutdown_timeout", 0.25)
    assert _config._shutdown_timeout() == 0.25


# --- errors name their source ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("var", "text", "accepts"),
    [
        ("MASTRACE_SHUTDOWN_TIMEOUT", "abc", "a number of seconds, at least 0"),
        ("MASTRACE_SHUTDOWN_TIMEOUT", "-1", "a number of seconds, at least 0"),
        ("MASTRACE_OTLP_EXIT_TIMEOUT", "soon", "a number of seconds, at least 0"),
        ("MASTRACE_SAMPLE_RATE", "2", "a number between 0.0 and 1.0"),
        ("MASTRACE_SAMPLE_RATE", "nan", "a number between 0.0 and 1.0"),
        ("MASTRACE_MAX_QUEUE_SIZE", "-1", "a whole number, at least 1"),
        ("MASTRACE_MAX_QUEUE_SIZE", "1.5", "a whole number, at least 1"),
        ("MASTRACE_FLUSH_INTERVAL", "0", "a number of seconds, at least 0.001"),
        ("MASTRACE_CONSOLE", "maybe", "1/0, true/false, yes/no or on/off"),
        ("MASTRACE_SCRUBBING", "partly", "1/0, true/false, yes/no or on/off"),
        ("MASTRACE_PROPAGATE_THREADS", "2", "1/0, true/false, yes/no or on/off"),
        ("MASTRACE_LOCAL", "perhaps", "or a folder (MASTRACE_DIR)"),
        ("MASTRACE_OTLP", "ftp://collector", "an http:// or https:// URL"),
        ("MASTRACE_DISABLED", "sometimes", "1/0, true/false, yes/no or on/off"),
        ("MASTRACE_MAX_ROW_BYTES", "100", "a whole number of bytes from 4096 to 8388608"),
        ("MASTRACE_MAX_ROW_BYTES", "1GB", "a whole number of bytes from 4096 to 8388608"),
        ("MASTRACE_RETENTION", "forever", "an age such as '7d', a size such as '5GB', or both"),
    ],
)
def test_a_bad_environment_value_names_the_variable_and_what_it_accepts(
    monkeypatch: pytest.MonkeyPatch, var: str, text: str, accepts: str
) -> None:
    """ConfigError says `VAR='text': expected ...`, and nothing is configured."""
    monkeypatch.setenv(var, text)
    with pytest.raises(mastrace.ConfigError) as info:
        configure_with("exporters", UNSET)
    message = str(info.value)
    assert message.startswith(f"{var}={text!r}: expected ")
    assert accepts in message
    assert not mastrace.is_configured()


def test_a_bad_environment_value_is_not_read_when_the_argument_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An explicit argument wins outright: the environment variable it replaces is not even parsed."""
    monkeypatch.setenv("MASTRACE_SAMPLE_RATE", "2")
    configure_with("sample_rate", 0.5)
    assert current().sample_rate == 0.5


@pytest.mark.parametrize(
    ("name", "value", "accepts"),
    [
        ("sample_rate", 2, "a number between 0.0 and 1.0"),
        ("sample_rate", True, "a number between 0.0 and 1.0"),
        ("max_queue_size", -1, "a whole number, at least 1"),
        ("max_queue_size", 10.5, "a whole number, at least 1"),
        ("shutdown_timeout", "abc", "a number of seconds, at least 0"),
        ("flush_interval", float("inf"), "a number of seconds, at least 0.001"),
        ("console", "yes", "True or False"),
        ("propagate_threads", 1, "True or False"),
        ("synchronous", "no", "True or False"),
        ("service_name", "  ", "a non-empty string"),
        ("exporters", "not-an-exporter", "SpanExporter"),
        ("otlp", "collector:4318", "an http:// or https:// URL"),
    ],
)
def test_a_bad_argument_names_the_argument(name: str, value: Any, accepts: str) -> None:
    """ConfigError says `name=value: expected ...` for an invalid explicit argument."""
    with pytest.raises(mastrace.ConfigError) as info:
        mastrace.configure(**{name: value})
    message = str(info.value)
    assert message.startswith(f"{name}={value!r}: expected ")
    assert accepts in message


def test_a_secret_value_is_never_echoed_in_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A token pasted into MASTRACE_LOGFIRE is named by its variable, not printed."""
    monkeypatch.setenv("MASTRACE_LOGFIRE", "pylf_v1_us_" + "k" * 40)
    with pytest.raises(mastrace.ConfigError) as info:
        configure_with("exporters", UNSET)
    assert str(info.value).startswith("MASTRACE_LOGFIRE=<redacted>: expected ")
    assert "k" * 40 not in str(info.value)


# --- no destination --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "setup",
    ["local=False", "MASTRACE_LOCAL=0", "local=False,console=False,MASTRACE_CONSOLE=1"],
)
def test_no_destination_warns_once_and_flush_is_incomplete(
    setup: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With nowhere for spans to go: one MastraceWarning at configure, complete=False at flush."""
    kwargs: dict[str, Any] = {}
    for part in setup.split(","):
        key, value = part.split("=")
        if key.isupper():
            monkeypatch.setenv(key, value)
        else:
            kwargs[key] = value == "True"
    with mastrace_warnings() as caught:
        mastrace.configure(**kwargs)
    assert len(caught) == 1 and "no destination" in str(caught[0].message)
    run_span("lost")
    result = mastrace.force_flush(timeout=2)
    assert (result.complete, result.ok, bool(result), result.destinations) == (False, False, False, {})
    assert mastrace.shutdown(timeout=2).complete is False


def test_an_identical_reconfigure_does_not_warn_again() -> None:
    """The warning comes with the configuration, not with every repeated identical call."""
    with mastrace_warnings() as caught:
        mastrace.configure(local=False)
        mastrace.configure(local=False)
    assert len(caught) == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"local": True},
        {"console": True},
        {"otlp": "http://127.0.0.1:4318"},
        {"exporters": [InMemorySpanExporter()]},
    ],
)
def test_any_destination_means_no_warning_and_a_complete_flush(kwargs: dict[str, Any]) -> None:
    """Each kind of destination alone is enough: no warning, and an idle flush is complete."""
    with mastrace_warnings() as caught:
        mastrace.configure(**{"local": False, **kwargs})
    assert caught == []
    assert mastrace.force_flush(timeout=5).complete


def test_the_applications_own_provider_counts_as_a_destination() -> None:
    """Spans that go through the application's TracerProvider are exported by it: no warning."""
    memory = InMemorySpanExporter()
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    app_provider = TracerProvider()
    app_provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(app_provider)
    with mastrace_warnings() as caught:
        mastrace.configure(local=False)
    assert caught == []
    run_span("through-the-app")
    assert mastrace.force_flush(timeout=5).complete
    assert [s.name for s in memory.get_finished_spans()] == ["through-the-app"]


def test_logfire_counts_as_a_destination() -> None:
    """configure(logfire=True) (offline: no token) adds no warning even with the local store off."""
    pytest.importorskip("logfire")
    with mastrace_warnings() as caught:
        mastrace.configure(logfire=True, local=False)
    assert caught == []
    assert mastrace.force_flush(timeout=5).complete


# --- LOGFIRE_TOKEN without the logfire package -----------------------------------------------------
def test_logfire_token_without_the_package_warns_once_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """LOGFIRE_TOKEN with `import logfire` failing: one warning naming the extra, other destinations work."""
    token = "pylf_v1_us_" + "T" * 40
    monkeypatch.setenv("LOGFIRE_TOKEN", token)
    monkeypatch.setitem(sys.modules, "logfire", None)
    memory = InMemorySpanExporter()
    with mastrace_warnings() as caught:
        mastrace.configure(local=False, exporters=[memory], synchronous=True)
        mastrace.configure(local=False, exporters=[memory], synchronous=True)  # identical: a no-op
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "pip install 'mastrace[logfire]'" in message and "LOGFIRE_TOKEN" in message
    assert token not in message
    assert current().logfire is None
    run_span("still-recorded")
    assert [s.name for s in memory.get_finished_spans()] == ["still-recorded"]


def test_asking_for_logfire_without_the_package_still_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    """MASTRACE_LOGFIRE=1 is a request, not a stray token: it raises ExportError naming the extra."""
    monkeypatch.setenv("MASTRACE_LOGFIRE", "1")
    monkeypatch.setitem(sys.modules, "logfire", None)
    with pytest.raises(mastrace.ExportError, match=re.escape("mastrace[logfire]")):
        configure_with("exporters", UNSET)


# --- the README table ------------------------------------------------------------------------------
def readme_table() -> str:
    text = README.read_text(encoding="utf-8")
    match = re.search(r"<!-- settings-table: start -->\n(.*?)<!-- settings-table: end -->", text, re.S)
    assert match is not None, "README.md lacks the settings-table markers"
    return match.group(1)


def test_the_readme_configuration_table_is_the_generated_one() -> None:
    """README.md between the settings-table markers equals render_markdown_table()."""
    assert readme_table() == render_markdown_table()


def test_the_generated_table_lists_every_parameter_and_variable() -> None:
    """Each argument and each environment variable of the table appears in its rendering."""
    table = render_markdown_table()
    rows = table.splitlines()[2:]
    assert len(rows) == len(PARAMS)
    otlp_pair = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"}
    for param, row in zip(PARAMS, rows, strict=True):
        assert (f"`{param.name}`" in row) == param.argument
        for var in param.env:
            shown = "OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT" if var in otlp_pair else var
            assert f"`{shown}" in row, (param.name, var)
    assert "MASTRACE_SHUTDOWN_TIMEOUT" in table and "MASTRACE_DISABLED" in table
