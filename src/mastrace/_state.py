"""Process-wide state that the hot path reads: one object, swapped whole by `configure()`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import TracerProvider


@dataclass
class State:
    """What the tracer facade needs to create spans. `provider is None` means no-op."""

    provider: TracerProvider | None = None
    generation: int = 0
    counters: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


STATE = State()


def bump(counter: str, n: int = 1) -> None:
    """Increment a diagnostic counter (cheap, best effort under threads)."""
    STATE.counters[counter] = STATE.counters.get(counter, 0) + n
