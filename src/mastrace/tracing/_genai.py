"""What every GenAI span shares: the content capture switch, request parameters, the server.

Content capture: whether the content of LLM calls (messages, tool arguments and results) goes onto
spans. Off by default: prompts and answers may hold personal data. Three switches, strongest first:

1. the `capture_content=` argument of an `instrument_<sdk>()` call (for that SDK only);
2. `mastrace.configure(capture_content=...)`, which itself reads `MASTRACE_CAPTURE_CONTENT`, else
   `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` (the OpenTelemetry GenAI instrumentations'
   variable), when the argument is not passed;
3. before `configure()` runs, those two variables directly.

Ids and names of tool calls are not content: they are recorded either way.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Callable, Mapping
from typing import Any

from .. import semconv
from ..exceptions import ConfigError
from ..usage import field_of
from . import _params
from ._errors import warn_once
from ._state import STATE

__all__ = [
    "REQUEST_PARAMETERS",
    "Conversation",
    "LastSeen",
    "capture_enabled",
    "conversation",
    "current_conversation_id",
    "request_attributes",
    "server_of",
]


class Conversation:
    """The conversation of a coordination session: its id while the session is open, None after.

    A session that ends in another context than the one it began in (MassGen opens its session in
    one task and closes it in another) cannot reset the variable where it was set; clearing the
    shared holder keeps code that runs there later from carrying an ended session's id.
    """

    __slots__ = ("id",)

    def __init__(self, conversation_id: str) -> None:
        self.id: str | None = conversation_id


conversation: contextvars.ContextVar[Conversation | None] = contextvars.ContextVar(
    "mastrace_conversation", default=None
)
"""The conversation of the coordination session around the code (set by the session)."""


def current_conversation_id() -> str | None:
    """The conversation id of the open coordination session around the code, if any."""
    held = conversation.get()
    return None if held is None else held.id


_PRIMITIVE = (str, int, float, bool)
# Parameters that carry content whatever the SDK or framework (system prompts, instructions, the
# input of the Responses and completions APIs, Gemini's contents): never a request attribute, even
# as plain text. With capture on they reach the span through the conventions' content attributes.
_CONTENT_PARAMETERS = frozenset(
    {"messages", "system", "instructions", "input", "prompt", "suffix", "contents", "documents"}
)


def capture_enabled(explicit: bool | None = None) -> bool:
    """The content capture switch in force for a call (see the module docstring)."""
    if explicit is not None:
        return explicit
    configured = STATE.capture_content
    if configured is not None:
        return configured
    try:
        return bool(_params.resolve(_params.CAPTURE_CONTENT, _params.UNSET, os.environ))
    except ConfigError as exc:  # raised by configure(); at call time, content stays off
        warn_once("capture-content-env", f"mastrace: {exc}; content is not captured")
        return False


# --- request parameters -----------------------------------------------------------------------------
def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _strings(value: Any) -> list[str] | None:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _choices(value: Any) -> int | None:
    count = _count(value)
    return count if count is not None and count != 1 else None  # the conventions: only when != 1


def _output_type(value: Any) -> str | None:
    kind = field_of(value, "type") if isinstance(value, Mapping) else None
    if kind in ("json_object", "json_schema"):
        return "json"
    if kind == "text":
        return "text"
    return "json" if isinstance(value, type) else None  # a pydantic model class (structured output)


def _text_value(value: Any) -> str | None:
    return value if isinstance(value, str) else None


# Request parameters the conventions name: parameter -> (attribute, conversion).
REQUEST_PARAMETERS: Mapping[str, tuple[str, Callable[[Any], Any]]] = {
    "max_tokens": (semconv.GEN_AI_REQUEST_MAX_TOKENS, _count),
    "max_completion_tokens": (semconv.GEN_AI_REQUEST_MAX_TOKENS, _count),
    "temperature": (semconv.GEN_AI_REQUEST_TEMPERATURE, _number),
    "top_p": (semconv.GEN_AI_REQUEST_TOP_P, _number),
    "top_k": (semconv.GEN_AI_REQUEST_TOP_K, _number),
    "frequency_penalty": (semconv.GEN_AI_REQUEST_FREQUENCY_PENALTY, _number),
    "presence_penalty": (semconv.GEN_AI_REQUEST_PRESENCE_PENALTY, _number),
    "seed": (semconv.GEN_AI_REQUEST_SEED, _count),
    "n": (semconv.GEN_AI_REQUEST_CHOICE_COUNT, _choices),
    "stop": (semconv.GEN_AI_REQUEST_STOP_SEQUENCES, _strings),
    "stop_sequences": (semconv.GEN_AI_REQUEST_STOP_SEQUENCES, _strings),
    "response_format": (semconv.GEN_AI_OUTPUT_TYPE, _output_type),
    "service_tier": (semconv.OPENAI_REQUEST_SERVICE_TIER, _text_value),
}


def request_attributes(kwargs: Mapping[str, Any], skipped: frozenset[str]) -> dict[str, Any]:
    """The attributes of a call's parameters: the conventions' keys where they name one, the
    other primitive parameters under `mastrace.request.<name>`; content and SDK plumbing skipped."""
    out: dict[str, Any] = {}
    for key, value in kwargs.items():
        if key in skipped or value is None or key in _CONTENT_PARAMETERS:
            continue
        known = REQUEST_PARAMETERS.get(key)
        if known is not None:
            converted = known[1](value)
            if converted is not None:
                out[known[0]] = converted
        elif isinstance(value, _PRIMITIVE):
            out[semconv.MASTRACE_REQUEST_PREFIX + key] = value
    return out


class LastSeen:
    """A function of one value, remembered for the last value seen (compared by identity).

    A client's base URL is the same object on every call, and reading it (`str()` of an
    `httpx.URL`, its host and port) costs a few microseconds per call; the URL objects and strings
    it is used for are immutable, so the same object always gives the same answer.
    """

    __slots__ = ("_function", "_last")

    def __init__(self, function: Callable[[Any], Any]) -> None:
        self._function = function
        self._last: tuple[Any, Any] | None = None

    def __call__(self, value: Any) -> Any:
        last = self._last  # one read: another thread may replace it meanwhile, never tear it
        if last is not None and last[0] is value:
            return last[1]
        result = self._function(value)
        self._last = (value, result)
        return result


def server_of(url: Any) -> tuple[str | None, int | None]:
    """`server.address` and `server.port` of a base URL (an `httpx.URL`, or text)."""
    if url is None:
        return None, None
    host = getattr(url, "host", None)
    if host is None:
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(str(url))
            host, port, scheme = parts.hostname, parts.port, parts.scheme
        except ValueError:
            return None, None
    else:
        port, scheme = getattr(url, "port", None), getattr(url, "scheme", "")
    if not host:
        return None, None
    return str(host), port or (80 if scheme == "http" else 443)
