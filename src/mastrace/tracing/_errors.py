"""Internal error handling: telemetry failures never reach user code.

`handle_internal_errors` wraps every span hook, decorator wrapper, snapshot and export. It logs the
failure (once per call site) and lets the user's code carry on. Only when the environment variable
`MASTRACE_RAISE_INTERNAL=1` asks for it (mastrace's own test suite sets it) is the error re-raised,
so that mastrace's bugs fail mastrace's tests; a user's test suite is never failed by them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

logger = logging.getLogger("mastrace")

_reported: set[str] = set()


RAISE_INTERNAL_ENV = "MASTRACE_RAISE_INTERNAL"


def raise_internal() -> bool:
    """Whether internal errors are re-raised: only when `MASTRACE_RAISE_INTERNAL=1`."""
    return os.environ.get(RAISE_INTERNAL_ENV) == "1"


def unreadable(exc: BaseException) -> str:
    """The marker that stands for a value that raised when read: `<unreadable: RuntimeError>`."""
    try:
        name = type(exc).__name__
    except Exception:  # pragma: no cover - a metaclass that breaks __name__
        name = "error"
    return f"<unreadable: {name}>"


def text_of(value: object) -> str:
    """`str(value)`, or the `unreadable` marker when that raises."""
    try:
        return str(value)
    except Exception as exc:
        return unreadable(exc)


def log_internal_error(where: str, exc: BaseException) -> None:
    """Log an internal failure once per `where`; re-raise it when `MASTRACE_RAISE_INTERNAL=1`."""
    if raise_internal():
        raise exc
    if where in _reported:
        return
    _reported.add(where)
    logger.warning(
        "mastrace: internal error in %s (your code still runs; further errors here are not logged)",
        where,
        exc_info=exc,
    )


@contextmanager
def handle_internal_errors(where: str) -> Iterator[None]:
    """Run a block of telemetry code so that its failure never reaches the caller."""
    try:
        yield
    except Exception as exc:
        log_internal_error(where, exc)


def warn_once(key: str, message: str) -> None:
    """Log `message` at WARNING level the first time `key` is seen."""
    if key in _reported:
        return
    _reported.add(key)
    logger.warning(message)


def reset_reported() -> None:
    """Forget which errors were already reported (for tests)."""
    _reported.clear()
