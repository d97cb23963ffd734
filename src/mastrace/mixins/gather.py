"""MASEval's gathering mixins: traces, configuration and usage of a component.

A component that inherits them can be registered with a `mastrace.Registry`, which collects
`gather_traces()`, `gather_config()` and `gather_usage()` from every registered component. The
method names and output shapes are MASEval's, so MASEval components register unchanged.

`ConfigurableMixin.gather_config()` records, by default, the component's public instance attributes
whose values are plain data (see `config_values`), so a changed model, temperature or prompt shows
in `mastrace diff` with no code; `config_attributes` and `config_exclude` narrow it.

Example:
    >>> from mastrace import ConfigurableMixin, TokenUsage, UsageTrackableMixin
    >>> class Model(ConfigurableMixin, UsageTrackableMixin):
    ...     def __init__(self, model_id: str, temperature: float = 0.7) -> None:
    ...         self.model_id = model_id
    ...         self.temperature = temperature
    ...     def chat(self, prompt: str) -> str:
    ...         self.record_usage(TokenUsage(input_tokens=12, output_tokens=3))
    ...         return "ok"
    >>> model = Model("gpt-4o")
    >>> {k: v for k, v in model.gather_config().items() if k != "gathered_at"}
    {'model_id': 'gpt-4o', 'temperature': 0.7, 'type': 'Model'}
    >>> _ = model.chat("hi")
    >>> model.gather_usage().input_tokens
    12
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from datetime import datetime
from typing import Any, ClassVar

from ..usage import Usage, credit_usage
from ._config_values import config_inputs, config_values

__all__ = ["ConfigurableMixin", "TraceableMixin", "UsageTrackableMixin"]

# Mixins have no __init__ (MASEval's have none either), so per-instance state is created on
# first use; this lock makes that creation safe when two threads get there together.
_INIT_LOCK = threading.Lock()


def _base_record(obj: object) -> dict[str, Any]:
    return {"type": type(obj).__name__, "gathered_at": datetime.now().isoformat()}


class TraceableMixin:
    """Gives a component `gather_traces()`: its execution data as a JSON-serialisable dict."""

    def gather_traces(self) -> dict[str, Any]:
        """Return this component's execution traces.

        The base implementation returns `type` (the class name) and `gathered_at` (ISO
        timestamp); extend it with `{**super().gather_traces(), ...}`.
        """
        return _base_record(self)


class ConfigurableMixin:
    """Gives a component `gather_config()`: its configuration as a JSON-serialisable dict.

    Attributes:
        config_attributes: The attributes `gather_config()` records; None (the default) for every
            public instance attribute holding plain data. Names listed here are read even when
            private or properties.
        config_exclude: Attributes never recorded (runtime state such as a message history).
    """

    config_attributes: ClassVar[Collection[str] | None] = None
    config_exclude: ClassVar[Collection[str]] = ()

    def gather_config(self) -> dict[str, Any]:
        """Return this component's configuration.

        By default: its public instance attributes (names not starting with `_`) whose values are
        plain data — numbers, text, booleans, None, enums, dates, paths, bytes, dataclasses,
        pydantic models, and lists, tuples, sets and dicts of those, encoded as in config
        snapshots — plus `type` (the class name) and `gathered_at` (ISO timestamp). Other
        objects (clients, locks, callables) are left out; a nested `ConfigurableMixin` records
        its own `gather_config()`; a secret-named attribute (`api_key`, `password`, …) is recorded
        as `[Scrubbed due to '<name>']`. Narrow it with `config_attributes` or `config_exclude`,
        or extend it with `{**super().gather_config(), "extra": ...}`. Record static settings, not
        runtime state, so unchanged configurations hash alike.
        """
        return {**config_values(self, self.config_attributes, self.config_exclude), **_base_record(self)}

    # What the result is made from (`gathered_at` aside): a registry gathers the configuration again
    # only when one of these changed (`pipeline/_config_state.py`). An override carries no mark, so a
    # component that overrides `gather_config()` is gathered for every snapshot.
    gather_config.__mastrace_config_inputs__ = lambda self: config_inputs(  # type: ignore[attr-defined]
        self, self.config_attributes, self.config_exclude
    )


class UsageTrackableMixin:
    """Gives a component `record_usage()` and `gather_usage()`.

    Call `record_usage()` for every billable call. The record is added to the component's total
    (`gather_usage()`), credited to the enclosing agent round and coordination session, and to
    the registry scope active where the call happened, which is what keeps per-repetition usage
    exact when one component is shared by repetitions running at the same time.

    A subclass may instead override `gather_usage()` (MASEval style); the registry then reports
    the difference since its previous collection.
    """

    _mastrace_usage_lock: threading.Lock
    _mastrace_usage_total: Usage

    def _mastrace_usage_state(self) -> threading.Lock:
        lock = getattr(self, "_mastrace_usage_lock", None)
        if lock is None:
            with _INIT_LOCK:
                lock = getattr(self, "_mastrace_usage_lock", None)
                if lock is None:
                    self._mastrace_usage_total = Usage()
                    lock = self._mastrace_usage_lock = threading.Lock()
        return lock

    def record_usage(self, usage: Usage) -> None:
        """Record the usage of one call made by this component.

        Args:
            usage: A `Usage` or `TokenUsage` (or any object with a compatible `to_dict()`).
        """
        record = Usage.coerce(usage)
        with self._mastrace_usage_state():
            self._mastrace_usage_total = self._mastrace_usage_total + record
        credit_usage(record, self)

    def gather_usage(self) -> Usage:
        """Return the total usage recorded by this component so far."""
        with self._mastrace_usage_state():
            return self._mastrace_usage_total

    gather_usage.__mastrace_records_usage__ = True  # type: ignore[attr-defined]
