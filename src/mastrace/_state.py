"""Process-wide state that the hot path reads: one object, swapped whole by `configure()`."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
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
    # Told about each span that could not be created or ended: the pipeline counts it as dropped.
    on_lost: Callable[[int], None] | None = None
    # In a process started by a configured one (multiprocessing's spawn or forkserver): configures
    # mastrace from the parent's settings the first time a tracer finds it unconfigured (once).
    inherit: Callable[[], bool] | None = None


STATE = State()


def bump(counter: str, n: int = 1) -> None:
    """Increment a diagnostic counter (cheap, best effort under threads)."""
    STATE.counters[counter] = STATE.counters.get(counter, 0) + n


def span_lost(n: int = 1) -> None:
    """Count `n` spans lost inside mastrace (never created, or never ended) as dropped."""
    bump("spans_lost", n)
    on_lost = STATE.on_lost
    if on_lost is not None:
        with suppress(Exception):  # counting must not fail the caller
            on_lost(n)
