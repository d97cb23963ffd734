"""Process-wide state that the hot path reads: one object, swapped whole by `configure()`."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider


@dataclass
class State:
    """What the tracer facade needs to create spans. `provider is None` means no-op."""

    provider: TracerProvider | None = None
    generation: int = 0
    # Spans handed out as no-ops because mastrace was not configured, and whether `configure()`
    # ever set up recording in this process: together they decide the exit hint (see `_hints`).
    noop_spans: int = 0
    configured: bool = False
    counters: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    # `configure(capture_content=...)`; None until configured (the environment decides then).
    capture_content: bool | None = None
    # `configure(experiment=...)`: the default experiment of `experiment_run()`.
    experiment: str | None = None
    # `configure(repetition=...)`: the repetition this process runs (root spans, MassGen turns).
    repetition: int | None = None
    # Told about each span that could not be created or ended: the pipeline counts it as dropped.
    on_lost: Callable[[int], None] | None = None
    # In a process started by a configured one (multiprocessing's spawn or forkserver): configures
    # mastrace from the parent's settings the first time a tracer finds it unconfigured (once).
    inherit: Callable[[], bool] | None = None


STATE = State()

CHILD_SETTINGS_ENV = "MASTRACE_CHILD_SETTINGS"
"""The settings a configured process leaves its spawn/forkserver workers (see `setup._children`).

`import mastrace` arms the inheritance when this variable is set (`setup.arm_inheritance`): the
state itself imports nothing of mastrace."""


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
