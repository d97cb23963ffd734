"""Span categories and value formatting shared by the tree, the report and the HTML view."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any, Final

from .. import semconv

__all__ = [
    "AGENT_SPAN_SQL",
    "EVENT_PREFIXES",
    "RECORD_SPAN_SQL",
    "TOOL_SPAN_SQL",
    "format_duration",
    "format_number",
    "format_value",
    "is_error",
    "span_category",
    "utc_clock",
]

# Prefixes of the zero-duration coordination records (Logfire logs in MassGen).
EVENT_PREFIXES: Final = (
    "Coordination event:",
    "Agent answer:",
    "Agent vote:",
    "Winner selected:",
    "Final answer from ",
)

# SQL predicates over `span_name`, used by every set-based query so that all sections agree.
AGENT_SPAN_SQL: Final = (
    f"(span_name LIKE '{semconv.SPAN_AGENT_PREFIX}%.round_%' "
    f"OR span_name LIKE '{semconv.SPAN_AGENT_PREFIX}%.presentation')"
)
TOOL_SPAN_SQL: Final = f"(span_name LIKE '{semconv.SPAN_MCP_PREFIX}%' OR span_name LIKE 'Tool execution:%')"
RECORD_SPAN_SQL: Final = (
    "(span_name LIKE 'Coordination event:%' OR span_name LIKE 'Agent answer:%' "
    "OR span_name LIKE 'Agent vote:%' OR span_name LIKE 'Winner selected:%' "
    "OR span_name LIKE 'Final answer%')"
)

CATEGORIES: Final = ("session", "agent", "llm", "tool", "event", "error", "other")


def is_error(row: dict[str, Any]) -> bool:
    """Whether a span row ended in error: error status, a recorded exception, or error level."""
    return bool(
        row.get("otel_status_code") == "ERROR"
        or row.get("is_exception")
        or (row.get("level") or 0) >= semconv.LEVEL_ERROR
    )


def span_category(name: str, span_type: str | None = None, error: bool = False) -> str:
    """The display category of a span: session, agent, llm, tool, event, error or other.

    Errors win over every other category so that a failed tool call stands out.
    """
    if error:
        return "error"
    if name == semconv.SPAN_COORDINATION_SESSION:
        return "session"
    if name.startswith(semconv.SPAN_AGENT_PREFIX) and (".round_" in name or name.endswith(".presentation")):
        return "agent"
    if name.startswith(semconv.SPAN_LLM_PREFIX):
        return "llm"
    if name.startswith((semconv.SPAN_MCP_PREFIX, "Tool execution:")):
        return "tool"
    if span_type == "log" or name.startswith(EVENT_PREFIXES):
        return "event"
    return "other"


def format_duration(seconds: float | None) -> str:
    """A short human duration: `850µs`, `12.3ms`, `1.24s`, `2m05s`."""
    if seconds is None:
        return "-"
    if seconds < 0.001:
        return f"{seconds * 1e6:.0f}µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f}ms"
    if seconds < 60:
        return f"{seconds:.2f}s"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m{rest:04.1f}s"


UNKNOWN_COST = "—"


def format_cost(value: float | None, unknown_models: Sequence[str] = (), *, signed: bool = False) -> str:
    """A cost in USD with enough digits to be non-zero: `$0.00018`, `$0.0289`, `$12.35`.

    Three significant digits below one dollar, cents above; `-` for None. A cost that includes
    calls without a known price shows the known part and names the unpriced models
    (`$0.0369 + unpriced: house-model-c`); with no known part it is unknown, `—` with the models
    named, never `$0`; so is one that is not a number (NaN or infinite, as a sender or a
    calculator may record).
    """
    if unknown_models:
        models = ", ".join(unknown_models)
        if value is None or not math.isfinite(value) or value == 0:
            return f"{UNKNOWN_COST} (no price for {models})"
        return f"{format_cost(value, signed=signed)} + unpriced: {models}"
    if value is None:
        return "-"
    if not math.isfinite(value):
        return UNKNOWN_COST
    sign = "-" if value < 0 else ("+" if signed and value > 0 else "")
    amount = abs(value)
    if amount == 0:
        return f"{sign}$0"
    if amount >= 1:
        return f"{sign}${amount:,.2f}"
    digits = max(2, 2 - math.floor(math.log10(amount)))  # three significant digits
    text = f"{amount:.{digits}f}".rstrip("0")
    if len(text.split(".")[1]) < 2:
        text = f"{amount:.2f}"
    return f"{sign}${text}"


def format_number(value: float | int | None, digits: int = 0) -> str:
    """Thousands-separated number; `-` for None."""
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def format_value(value: Any, limit: int = 60) -> str:
    """A compact one-line rendering of an attribute value, shortened to `limit` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def utc_clock(epoch_us: int | None, with_ms: bool = True) -> str:
    """`HH:MM:SS(.mmm)` in UTC for a microsecond epoch timestamp."""
    if epoch_us is None:
        return "-"
    moment = datetime.fromtimestamp(epoch_us / 1e6, tz=timezone.utc)
    return moment.strftime("%H:%M:%S.%f")[:-3] if with_ms else moment.strftime("%H:%M:%S")
