"""The one table of settings: every `configure()` parameter, its environment variables and its default.

`configure()`, the environment reading, the error messages and the README's configuration table all
come from `PARAMS`. A value is taken from, in order:

1. the argument passed to `configure()` (anything but `UNSET`),
2. the first of the parameter's environment variables that is set to a non-empty value,
3. the default.

A bad argument raises `ConfigError` naming the argument; a bad environment value raises
`ConfigError` naming the variable; both say what is accepted.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from opentelemetry.sdk.trace.export import SpanExporter

from ..scrubbing._options import ScrubbingOptions
from ..tracing._params import (
    _FALSE,
    _FLAG_TEXT,
    _TRUE,
    CAPTURE_CONTENT,
    DISABLED,
    HINTS,
    UNSET,
    Param,
    UnsetType,
    _check_bool,
    _check_text,
    _no_env,
    _parse_flag,
    _parse_float,
    _parse_int,
    _parse_text,
    resolve,
    resolve_from,
)
from ..tracing._snapshot import Limits

__all__ = [
    "CAPTURE_CONTENT",
    "DISABLED",
    "HINTS",
    "PARAMS",
    "UNSET",
    "Param",
    "Settings",
    "UnsetType",
    "render_markdown_table",
    "resolve",
    "resolve_from",
]


def _number_check(
    kind: type[int] | type[float], low: float, high: float | None = None, *, above: bool = False
) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(value)
        if kind is int and not isinstance(value, int):
            raise TypeError(value)
        if math.isnan(value) or math.isinf(value):
            raise ValueError(value)
        if value < low or (above and value == low) or (high is not None and value > high):
            raise ValueError(value)
        return kind(value)

    return check


def _parse_local(var: str, text: str) -> bool | str:
    if var == "MASTRACE_LOCAL":
        return _parse_flag(var, text)
    return text.strip()  # MASTRACE_DIR: a folder


def _check_local(value: Any) -> bool | str | os.PathLike[str]:
    if isinstance(value, bool):
        return value
    if isinstance(value, (str, os.PathLike)) and str(value).strip():
        return value
    raise TypeError(value)


def _parse_otlp(var: str, text: str) -> bool | str:
    if var == "MASTRACE_OTLP":
        lowered = text.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        return text.strip()
    return True  # OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT: the exporter reads it itself


def _check_otlp(value: Any) -> bool | str:
    if isinstance(value, bool):
        return value
    if not isinstance(value, str):
        raise TypeError(value)
    from ..exporters.otlp import validate_endpoint

    return validate_endpoint(value)


def _parse_logfire(var: str, text: str) -> bool:
    if var == "MASTRACE_LOGFIRE":
        return _parse_flag(var, text)
    return True  # LOGFIRE_TOKEN: the logfire SDK reads the token itself


def _check_logfire(value: Any) -> bool | str:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip():
        return value
    raise ValueError("<redacted>")


def _check_scrubbing(value: Any) -> bool | ScrubbingOptions:
    if isinstance(value, (bool, ScrubbingOptions)):
        return value
    raise TypeError(value)


def _check_exporters(value: Any) -> tuple[SpanExporter, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, tuple, list)):
        raise TypeError(value)
    exporters = tuple(value)
    if not all(callable(getattr(e, "export", None)) for e in exporters):
        raise TypeError(value)
    return exporters


def _default_service_name() -> str:
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    name = Path(argv0).stem if argv0 and argv0 != "-c" else ""
    return name or "mastrace"


# --- the table -------------------------------------------------------------------------------------
SERVICE_NAME: Final = Param[str](
    name="service_name",
    env=("OTEL_SERVICE_NAME",),
    type="str",
    default="mastrace",
    default_factory=_default_service_name,
    default_doc="the script name",
    parser=_parse_text,
    check=_check_text,
    doc="`service.name` of the resource.",
    accepts="a non-empty string",
    none_is_unset=True,
)
LOCAL: Final = Param[bool | str | os.PathLike[str]](
    name="local",
    env=("MASTRACE_LOCAL", "MASTRACE_DIR"),
    type="bool \\| path",
    default=True,
    default_doc="`./.mastrace`",
    env_doc="`MASTRACE_LOCAL=0` turns it off; `MASTRACE_DIR` (a folder) moves it",
    parser=_parse_local,
    check=_check_local,
    doc="The local store: True for `$MASTRACE_DIR` or `./.mastrace`, a folder, or False.",
    accepts="True, False or a folder path",
    env_accepts=f"{_FLAG_TEXT} (MASTRACE_LOCAL) or a folder (MASTRACE_DIR)",
)
OTLP: Final = Param[bool | str](
    name="otlp",
    env=("MASTRACE_OTLP", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"),
    type="bool \\| str",
    default=False,
    default_doc="off",
    env_doc="`MASTRACE_OTLP` (a URL, or 1/0), else `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT` turns it on",
    parser=_parse_otlp,
    check=_check_otlp,
    doc="An OTLP endpoint URL, or True to use the `OTEL_EXPORTER_OTLP_*` variables.",
    accepts="an http:// or https:// URL, True or False",
    env_accepts=f"an http:// or https:// URL or {_FLAG_TEXT}",
    none_is_unset=True,
)
LOGFIRE: Final = Param[bool | str](
    name="logfire",
    env=("MASTRACE_LOGFIRE", "LOGFIRE_TOKEN"),
    type="bool \\| str",
    default=False,
    default_doc="off",
    env_doc="`MASTRACE_LOGFIRE` (1/0), else `LOGFIRE_TOKEN` turns it on",
    parser=_parse_logfire,
    check=_check_logfire,
    doc="True (token from `LOGFIRE_TOKEN`) or a write token: also send to Logfire (`mastrace[logfire]`).",
    accepts="True, False or a non-empty Logfire write token",
    env_accepts=_FLAG_TEXT,
    secret=True,
    none_is_unset=True,
)
CONSOLE: Final = Param[bool](
    name="console",
    env=("MASTRACE_CONSOLE",),
    type="bool",
    default=False,
    default_doc="off",
    parser=_parse_flag,
    check=_check_bool,
    doc="Print a line per finished span to stderr.",
    accepts="True or False",
    env_accepts=_FLAG_TEXT,
)
SCRUBBING: Final = Param[bool | ScrubbingOptions](
    name="scrubbing",
    env=("MASTRACE_SCRUBBING",),
    type="bool \\| ScrubbingOptions",
    default=True,
    default_doc="on",
    parser=_parse_flag,
    check=_check_scrubbing,
    doc="Redact secrets before any export: True, False or `ScrubbingOptions(...)`.",
    accepts="True, False or mastrace.ScrubbingOptions",
    env_accepts=_FLAG_TEXT,
)
SAMPLE_RATE: Final = Param[float](
    name="sample_rate",
    env=("MASTRACE_SAMPLE_RATE",),
    type="float",
    default=1.0,
    default_doc="`1.0`",
    parser=_parse_float,
    check=_number_check(float, 0.0, 1.0),
    doc="Fraction of traces kept (whole traces: children follow their root).",
    accepts="a number between 0.0 and 1.0",
    none_is_unset=True,
)
PROPAGATE_THREADS: Final = Param[bool](
    name="propagate_threads",
    env=("MASTRACE_PROPAGATE_THREADS",),
    type="bool",
    default=True,
    default_doc="on",
    parser=_parse_flag,
    check=_check_bool,
    doc="`ThreadPoolExecutor` and `threading.Thread` carry the caller's context.",
    accepts="True or False",
    env_accepts=_FLAG_TEXT,
    none_is_unset=True,
)
EXPORTERS: Final = Param[tuple[SpanExporter, ...]](
    name="exporters",
    env=(),
    type="sequence of SpanExporter",
    default=(),
    default_doc="none",
    parser=_no_env,
    check=_check_exporters,
    doc="Extra OpenTelemetry `SpanExporter`s, each fed by its own queue and thread.",
    accepts="a list of OpenTelemetry SpanExporter objects",
)
FLUSH_INTERVAL: Final = Param[float](
    name="flush_interval",
    env=("MASTRACE_FLUSH_INTERVAL",),
    type="float",
    default=0.5,
    default_doc="`0.5`",
    parser=_parse_float,
    check=_number_check(float, 0.001),
    doc="Seconds between background exports (what a killed process may lose).",
    accepts="a number of seconds, at least 0.001",
    none_is_unset=True,
)
MAX_QUEUE_SIZE: Final = Param[int](
    name="max_queue_size",
    env=("MASTRACE_MAX_QUEUE_SIZE",),
    type="int",
    default=200_000,
    default_doc="`200000`",
    parser=_parse_int,
    check=_number_check(int, 1),
    doc="Spans queued per destination; beyond it new spans are dropped and counted.",
    accepts="a whole number, at least 1",
    none_is_unset=True,
)
SHUTDOWN_TIMEOUT: Final = Param[float](
    name="shutdown_timeout",
    env=("MASTRACE_SHUTDOWN_TIMEOUT",),
    type="float",
    default=5.0,
    default_doc="`5.0`",
    parser=_parse_float,
    check=_number_check(float, 0.0),
    doc="Seconds the flush at exit and on SIGTERM may take.",
    accepts="a number of seconds, at least 0",
    none_is_unset=True,
)
OTLP_EXIT_TIMEOUT: Final = Param[float](
    name="otlp_exit_timeout",
    env=("MASTRACE_OTLP_EXIT_TIMEOUT",),
    type="float",
    default=1.0,
    default_doc="`1.0`",
    parser=_parse_float,
    check=_number_check(float, 0.0),
    doc=(
        "Seconds the flush at exit may wait for an OTLP collector that is down or slow, counted once "
        "the export thread is prepared (within `shutdown_timeout` in all)."
    ),
    accepts="a number of seconds, at least 0",
    none_is_unset=True,
)


def _check_row_bytes(value: Any) -> int:
    from ..store._bound import check_max_row_bytes

    return check_max_row_bytes(value)


MAX_ROW_BYTES: Final = Param[int](
    name="max_row_bytes",
    env=("MASTRACE_MAX_ROW_BYTES",),
    type="int",
    default=1_000_000,
    default_doc="`1000000`",
    parser=_parse_int,
    check=_check_row_bytes,
    doc="Most bytes one span takes in the local store; its largest values are cut (with a marker) to fit.",
    accepts="a whole number of bytes from 4096 to 8388608",
    none_is_unset=True,
)


def _parse_retention(var: str, text: str) -> Any:
    from ..store._retention import parse_retention

    return parse_retention(text)


def _check_retention(value: Any) -> Any:
    from ..store._retention import Retention, parse_retention

    if isinstance(value, Retention):
        return value
    if not isinstance(value, str):
        raise TypeError(value)
    return parse_retention(value)


RETENTION: Final = Param[Any](
    name="retention",
    env=("MASTRACE_RETENTION",),
    type="str",
    default=None,
    default_doc="keep everything",
    parser=_parse_retention,
    check=_check_retention,
    doc="What the local store keeps: an age (`7d`), a size (`5GB`) or both; older segments are removed "
    "whenever a new one starts.",
    accepts="an age such as '7d', a size such as '5GB', or both ('7d,5GB')",
    none_is_unset=True,
)
SYNCHRONOUS: Final = Param[bool](
    name="synchronous",
    env=(),
    type="bool",
    default=False,
    default_doc="off",
    parser=_no_env,
    check=_check_bool,
    doc="Export on the calling thread when a span ends (tests and short scripts).",
    accepts="True or False",
)
EXPERIMENT: Final = Param[str | None](
    name="experiment",
    env=("MASTRACE_EXPERIMENT",),
    type="str",
    default=None,
    default_doc="none",
    parser=_parse_text,
    check=_check_text,
    doc="The experiment this process's runs belong to: every root span carries its name "
    "(`mastrace compare` groups runs by it).",
    accepts="a non-empty string",
    none_is_unset=True,
)
REPETITION: Final = Param[int | None](
    name="repetition",
    env=("MASTRACE_REPETITION",),
    type="int",
    default=None,
    default_doc="none",
    parser=_parse_int,
    check=_number_check(int, 0),
    doc="The repetition this process runs, when an experiment runs one process per repetition: "
    "root spans carry it as their repetition index, MassGen turns count from it.",
    accepts="a whole number, at least 0",
    none_is_unset=True,
)


def _parse_run(var: str, text: str) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(text)
    return value


# What `mastrace run` can pin from its command line (see RUN below).
RUN_PINNABLE: Final = ("service_name", "local", "otlp", "console", "experiment", "repetition")


def _check_run(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or not set(value) <= set(RUN_PINNABLE):
        raise ValueError(value)
    by_name = {p.name: p for p in (SERVICE_NAME, LOCAL, OTLP, CONSOLE, EXPERIMENT, REPETITION)}
    return {name: by_name[name].check(item) for name, item in value.items()}


RUN: Final = Param[dict[str, Any]](
    name="run",
    env=("MASTRACE_RUN",),
    type="JSON object",
    default={},
    default_doc="none",
    parser=_parse_run,
    check=_check_run,
    doc="The options of `mastrace run`'s command line (`--store`, `--service-name`, `--otlp`, "
    "`--console`, `--experiment`, `--repetition`), set by it for the program and its child processes: "
    "they beat `configure()`'s arguments.",
    accepts="a JSON object",
    env_accepts="a JSON object of service_name, local, otlp, console, experiment and repetition, "
    'e.g. {"local": "/tmp/store"}',
    argument=False,
)

PARAMS: Final[tuple[Param[Any], ...]] = (
    SERVICE_NAME,
    LOCAL,
    OTLP,
    LOGFIRE,
    CONSOLE,
    SCRUBBING,
    CAPTURE_CONTENT,
    SAMPLE_RATE,
    PROPAGATE_THREADS,
    EXPORTERS,
    FLUSH_INTERVAL,
    MAX_QUEUE_SIZE,
    SHUTDOWN_TIMEOUT,
    OTLP_EXIT_TIMEOUT,
    MAX_ROW_BYTES,
    RETENTION,
    SYNCHRONOUS,
    EXPERIMENT,
    REPETITION,
    DISABLED,
    HINTS,
    RUN,
)
"""Every setting, in the order of `configure()`'s signature; environment-only settings last."""


def render_markdown_table() -> str:
    """The README's configuration table, generated from `PARAMS` (a test keeps them equal)."""
    header = ("argument", "type", "environment variable", "default", "meaning")
    rows = [header]
    for p in PARAMS:
        env = p.env_doc or ", ".join(f"`{v}`" for v in p.env) or "—"
        name = f"`{p.name}`" if p.argument else "—"
        default = p.default_doc or f"`{p.default!r}`"
        rows.append((name, p.type, env, default, p.doc))
    lines = ["| " + " | ".join(row) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("---" for _ in header) + "|")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Settings:
    """The resolved configuration (arguments merged with the environment)."""

    service_name: str
    local: Path | None
    otlp: str | bool | None
    logfire: str | bool | None = field(repr=False)  # may hold a token
    console: bool
    scrubbing: ScrubbingOptions | None
    sample_rate: float
    propagate_threads: bool
    exporters: tuple[SpanExporter, ...] = ()
    capture_content: bool = False
    flush_interval: float = 0.5
    max_queue_size: int = 200_000
    synchronous: bool = False
    shutdown_timeout: float = 5.0
    otlp_exit_timeout: float = 1.0
    max_row_bytes: int = 1_000_000
    retention: Any = None  # a store._retention.Retention
    experiment: str | None = None
    repetition: int | None = None
    logfire_token_ignored: bool = False  # LOGFIRE_TOKEN is set but the logfire package is missing
    limits: Limits = field(default_factory=Limits)
