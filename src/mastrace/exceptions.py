"""Errors raised by mastrace.

Only misuse raises, and it raises early. Failures on the telemetry path (a span hook, an
exporter, a snapshot) never reach your code: they are counted and logged once instead.

Hierarchy::

    MastraceError
    ├── ConfigError (also ValueError)   bad arguments to configure(), a bad @instrument template
    ├── StoreError                      the local store cannot be opened or queried
    └── ExportError                     an exporter could not be built (missing extra, bad endpoint)

    MastraceWarning (UserWarning)       something was ignored or degraded, once per cause
"""

from __future__ import annotations

__all__ = ["ConfigError", "ExportError", "MastraceError", "MastraceWarning", "StoreError"]


class MastraceError(Exception):
    """Base class of every error mastrace raises."""


class ConfigError(MastraceError, ValueError):
    """An argument to `configure()`, `@instrument` or another entry point is invalid."""


class StoreError(MastraceError):
    """The local store could not be opened, read or queried."""


class ExportError(MastraceError):
    """An exporter could not be created (for example a missing optional dependency)."""


class MastraceWarning(UserWarning):
    """Something mastrace was asked to do was ignored or degraded."""
