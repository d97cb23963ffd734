"""`LOGFIRE`, the stand-in for the `logfire` module that MassGen is handed while `instrument_massgen()`
is on (by its tracer proxy, and as the `logfire` its MCP backend module imported).

`span()` sends each span, by its name, to the helpers in `_massgen_spans` (session, round, LLM, MCP);
`info()`, `warn()` and the other levels write log records; `instrument_openai()` and
`instrument_anthropic()` turn on mastrace's own SDK integrations; the other `instrument_*` calls do
nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from .. import semconv
from ..tracing._errors import handle_internal_errors
from . import _massgen_turns as turns
from ._massgen_spans import (
    _link_vote,
    _llm,
    _mcp,
    _round,
    _session,
    _span_attributes,
    _state,
    _tool_call,
    _tracer,
)

__all__ = ["LOGFIRE"]

_ROUND_NAME = re.compile(r"agent\.(?P<agent>.+)\.(?:round_(?P<round>\d+)|presentation)$")
_LLM_NAME = re.compile(r"llm\.[^.]+\.(?:stream|create|chat)$")
_MCP_NAME = re.compile(r"mcp\.[^.]+\.[^.]+")
_TOOL_CALL_PREFIX = "mcp_tool."  # MassGen's span around one MCP tool use (its attempts inside)
_LEVELS = {
    "trace": 1,
    "debug": 5,
    "info": semconv.LEVEL_INFO,
    "notice": 10,
    "warn": semconv.LEVEL_WARN,
    "warning": semconv.LEVEL_WARN,
    "error": semconv.LEVEL_ERROR,
    "fatal": 21,
}


class _Logfire:
    """The part of `logfire`'s API MassGen calls, written to mastrace."""

    @contextmanager
    def span(self, msg_template: str, /, **attributes: Any) -> Iterator[Any]:
        name = attributes.pop("_span_name", None) or msg_template
        match = _ROUND_NAME.match(name)
        if name == semconv.SPAN_COORDINATION_SESSION:
            cm: Any = _session(attributes)
        elif match is not None:
            cm = _round(name, match.group("agent"), attributes)
        elif _LLM_NAME.match(name):
            cm = _llm(name, attributes)
        elif _MCP_NAME.fullmatch(name):
            cm = _mcp(name, _span_attributes(msg_template, attributes))
        elif name.startswith(_TOOL_CALL_PREFIX):
            cm = _tool_call(name, _span_attributes(msg_template, attributes))
        else:
            cm = _tracer().span(name, _span_attributes(msg_template, attributes))
        with cm as span:
            yield span

    def _log(self, level: str, msg_template: str, attributes: Mapping[str, Any]) -> None:
        with handle_internal_errors("massgen log record"):
            attrs = _span_attributes(msg_template, attributes)
            attrs.setdefault(semconv.LOGFIRE_MSG, msg_template)
            _link_vote(attrs)
            attrs[semconv.LOGFIRE_LEVEL_NUM] = _LEVELS.get(level, semconv.LEVEL_INFO)
            otel_level = "error" if level in ("error", "fatal") else "info"
            if _state.known and msg_template.startswith("Agent vote:"):
                turns.hold_vote(msg_template, attrs, otel_level)  # counted or discarded later
                return
            if msg_template.startswith("Winner selected:"):
                turns.settle_votes(discarded=False)
            # A mapping, not keywords: MassGen's keys may be any name, `level` and `name` included.
            _tracer()._log(msg_template, attrs, level=otel_level)

    def trace(self, msg_template: str, /, **attributes: Any) -> None:
        self._log("trace", msg_template, attributes)

    def debug(self, msg_template: str, /, **attributes: Any) -> None:
        self._log("debug", msg_template, attributes)

    def info(self, msg_template: str, /, **attributes: Any) -> None:
        self._log("info", msg_template, attributes)

    def notice(self, msg_template: str, /, **attributes: Any) -> None:
        self._log("notice", msg_template, attributes)

    def warn(self, msg_template: str, /, **attributes: Any) -> None:
        self._log("warn", msg_template, attributes)

    warning = warn

    def error(self, msg_template: str, /, **attributes: Any) -> None:
        self._log("error", msg_template, attributes)

    def fatal(self, msg_template: str, /, **attributes: Any) -> None:
        self._log("fatal", msg_template, attributes)

    def instrument_openai(self, client: Any = None, **_: Any) -> None:
        from .openai import instrument_openai

        instrument_openai()

    def instrument_anthropic(self, client: Any = None, **_: Any) -> None:
        from .anthropic import instrument_anthropic

        instrument_anthropic()

    def instrument_google_genai(self, *args: Any, **kwargs: Any) -> None:
        return None

    def instrument_aiohttp_client(self, *args: Any, **kwargs: Any) -> None:
        return None

    def instrument_loguru(self, *args: Any, **kwargs: Any) -> None:
        return None


LOGFIRE = _Logfire()
