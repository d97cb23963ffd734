"""The machinery of the parameter table, and the settings the hot path reads before `configure()`.

`setup._settings` holds the table (`PARAMS`, every `configure()` argument and environment variable,
rendered into the README); the parameter type, the parsers and `resolve` live here, below it, with
the three settings that code in `tracing/` must read whether or not `configure()` ran
(`CAPTURE_CONTENT`, `DISABLED`, `HINTS`): the hot path imports nothing of `setup/`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from ..exceptions import ConfigError

__all__ = ["CAPTURE_CONTENT", "DISABLED", "HINTS", "UNSET", "Param", "UnsetType", "resolve", "resolve_from"]

T = TypeVar("T")


class UnsetType:
    """The type of `UNSET`: "this argument was not passed", told apart from every real value."""

    _instance: UnsetType | None = None

    def __new__(cls) -> UnsetType:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "UNSET"


UNSET: Final = UnsetType()
"""The default of every `configure()` argument: take the environment variable, else the default."""


@dataclass(frozen=True)
class Param(Generic[T]):
    """One setting: where its value comes from and what it accepts.

    Attributes:
        name: The `configure()` argument (or, for an environment-only setting, a name for it).
        env: Environment variables read in this order when the argument is not passed; the first
            one set to a non-empty value is used.
        type: The accepted Python types, as shown in the README table.
        default: The value when neither the argument nor the environment gives one.
        parser: `(variable, text) -> value` for an environment variable; raises ValueError.
        check: Validates and normalises an argument or a parsed environment value; raises
            ValueError or TypeError.
        doc: One line for users.
        accepts: What the argument accepts, for error messages.
        env_accepts: What the environment variables accept, for error messages.
        env_doc: How the environment is read, for the README table (default: the variable names).
        default_doc: The default as shown in the README table (default: the value).
        default_factory: Computes the default when it depends on the process (the script name).
        argument: False for a setting that only the environment gives.
        secret: Never echo the value in an error message.
        none_is_unset: An explicit None means "not passed" (the argument's historical default).
    """

    name: str
    env: tuple[str, ...]
    type: str
    default: T
    parser: Callable[[str, str], Any]
    check: Callable[[Any], T]
    doc: str
    accepts: str
    env_accepts: str = ""
    env_doc: str = ""
    default_doc: str = ""
    default_factory: Callable[[], T] | None = None
    argument: bool = True
    secret: bool = False
    none_is_unset: bool = False

    def default_value(self) -> T:
        """The default, computed now when it depends on the process."""
        return self.default_factory() if self.default_factory is not None else self.default


# --- parsers and checks ----------------------------------------------------------------------------
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_FLAG_TEXT = "1/0, true/false, yes/no or on/off"


def _parse_flag(var: str, text: str) -> bool:
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(text)


# `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` also takes the content modes of the
# OpenTelemetry GenAI utilities; mastrace records content on spans only, so the span modes mean on.
_CONTENT_ON = frozenset({"span_only", "span_and_event"})
_CONTENT_OFF = frozenset({"no_content", "event_only"})


def _parse_capture(var: str, text: str) -> bool:
    value = text.strip().lower()
    if var == "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT":
        if value in _CONTENT_ON:
            return True
        if value in _CONTENT_OFF:
            return False
    return _parse_flag(var, text)


def _parse_text(var: str, text: str) -> str:
    return text.strip()


def _parse_float(var: str, text: str) -> float:
    return float(text)


def _parse_int(var: str, text: str) -> int:
    return int(text)


def _no_env(var: str, text: str) -> Any:  # pragma: no cover - parameters without variables
    raise ValueError(text)


def _check_bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(value)
    return value


def _check_text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(value)
    return value.strip()


# --- resolution ------------------------------------------------------------------------------------
def resolve_from(param: Param[T], explicit: object, environ: Mapping[str, str]) -> tuple[T, str]:
    """The value of `param` and where it came from: "argument", a variable's name, or "default".

    Raises:
        ConfigError: The argument, or the environment variable used, is invalid; the message
            names it and says what it accepts.
    """
    if not (explicit is UNSET or (explicit is None and param.none_is_unset)):
        try:
            return param.check(explicit), "argument"
        except (ValueError, TypeError):
            shown = "<redacted>" if param.secret else repr(explicit)
            raise ConfigError(f"{param.name}={shown}: expected {param.accepts}") from None
    for var in param.env:
        text = environ.get(var, "")
        if not text.strip():
            continue
        try:
            return param.check(param.parser(var, text)), var
        except (ValueError, TypeError):
            shown = "<redacted>" if param.secret else repr(text)
            raise ConfigError(f"{var}={shown}: expected {param.env_accepts or param.accepts}") from None
    return param.default_value(), "default"


def resolve(param: Param[T], explicit: object, environ: Mapping[str, str]) -> T:
    """The value of `param`: the explicit argument, else its environment variable, else its default.

    `explicit` is `UNSET` when the argument was not passed.

    Raises:
        ConfigError: The argument, or the environment variable used, is invalid.
    """
    return resolve_from(param, explicit, environ)[0]


# --- the settings `tracing/` reads -------------------------------------------------------------
CAPTURE_CONTENT: Final = Param[bool](
    name="capture_content",
    env=("MASTRACE_CAPTURE_CONTENT", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"),
    type="bool",
    default=False,
    default_doc="off",
    env_doc="`MASTRACE_CAPTURE_CONTENT`, else `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`",
    parser=_parse_capture,
    check=_check_bool,
    doc="Record LLM messages, system instructions, tool definitions and tool arguments (scrubbed).",
    accepts="True or False",
    env_accepts=f"{_FLAG_TEXT} (the OpenTelemetry variable also SPAN_ONLY, SPAN_AND_EVENT, "
    "EVENT_ONLY or NO_CONTENT)",
    none_is_unset=True,
)
DISABLED: Final = Param[bool](
    name="disabled",
    env=("MASTRACE_DISABLED",),
    type="bool",
    default=False,
    default_doc="off",
    parser=_parse_flag,
    check=_check_bool,
    doc="Every mastrace call becomes a no-op (environment only).",
    accepts="True or False",
    env_accepts=_FLAG_TEXT,
    argument=False,
)
HINTS: Final = Param[bool](
    name="hints",
    env=("MASTRACE_HINTS",),
    type="bool",
    default=True,
    default_doc="on",
    parser=_parse_flag,
    check=_check_bool,
    doc="At exit, one line on stderr when spans were created but `configure()` was never called "
    "(never under pytest or unittest, nor in a notebook or an interactive interpreter).",
    accepts="True or False",
    env_accepts=_FLAG_TEXT,
    argument=False,
)
