"""MASEval's gathering mixins: traces, configuration and usage of a component.

A component that inherits them can be registered with a `mastrace.Registry`, which collects
`gather_traces()`, `gather_config()` and `gather_usage()` from every registered component. The
method names and output shapes are MASEval's, so MASEval components register unchanged.

Example:
    >>> from mastrace import ConfigurableMixin, TokenUsage, UsageTrackableMixin
    >>> class Model(ConfigurableMixin, UsageTrackableMixin):
    ...     def __init__(self, model_id: str) -> None:
    ...         self.model_id = model_id
    ...     def gather_config(self):
    ...         return {**super().gather_config(), "model_id": self.model_id}
    ...     def chat(self, prompt: str) -> str:
    ...         self.record_usage(TokenUsage(input_tokens=12, output_tokens=3))
    ...         return "ok"
    >>> model = Model("gpt-4o")
    >>> _ = model.chat("hi")
    >>> model.gather_usage().input_tokens
    12
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

from ..usage import Usage, credit_usage

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
    """Gives a component `gather_config()`: its configuration as a JSON-serialisable dict."""

    def gather_config(self) -> dict[str, Any]:
        """Return this component's configuration.

        The base implementation returns `type` (the class name) and `gathered_at` (ISO
        timestamp); extend it with `{**super().gather_config(), "temperature": self.temperature}`.
        Return static settings, not runtime state, so unchanged configurations hash alike.
        """
        return _base_record(self)


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
