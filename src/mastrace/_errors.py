"""Internal error handling: telemetry failures never reach user code.

`handle_internal_errors` wraps every span hook, decorator wrapper, snapshot and export. Outside
tests it logs the failure (once per call site) and lets the user's code carry on; under pytest it
re-raises so that our own bugs fail our own tests.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

logger = logging.getLogger("mastrace")

_reported: set[str] = set()


def _under_pytest() -> bool:
    return "pytest" in sys.modules and os.environ.get("MASTRACE_RAISE_INTERNAL", "1") != "0"


def log_internal_error(where: str, exc: BaseException) -> None:
    """Log an internal failure once per `where`; re-raise it when running under pytest."""
    if _under_pytest():
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
