"""The one hint mastrace prints on its own: spans were created but `configure()` was never called,
or was called only after them.

Without `configure()` every span is a no-op, by design (libraries can be instrumented without
forcing tracing on their users). Forgetting it in a program is then silent, so at exit a process
that created no-op spans and never configured mastrace says so, once, on stderr; one that
configured mastrace after creating some says how many were not recorded.

It stays quiet where nobody asked for it: under pytest or `python -m unittest` (a user's test
suite), in an interactive interpreter or a notebook, with `MASTRACE_DISABLED=1`, and whenever
`MASTRACE_HINTS=0`.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

from ._state import STATE

__all__ = ["first_noop_span", "hint_text", "should_hint"]

_TOP = (__package__ or "mastrace").split(".")[0]  # the package users import (`mastrace`)
_registered = threading.Lock()
_done = False


def first_noop_span() -> None:
    """Called by the tracer the first time it hands out a no-op span: arm the hint at exit."""
    global _done
    with _registered:
        if _done:
            return
        _done = True
    atexit.register(_at_exit)


def _interactive() -> bool:
    if hasattr(sys, "ps1") or sys.flags.interactive:
        return True
    return any(name in sys.modules for name in ("IPython", "ipykernel"))


def _testing() -> bool:
    if "pytest" in sys.modules or "PYTEST_CURRENT_TEST" in os.environ:
        return True
    argv0 = sys.argv[0] if sys.argv else ""
    return "unittest" in os.path.basename(argv0) or argv0.endswith("-m unittest")


def should_hint() -> bool:
    """Whether the exit hint is due: no-op spans were made before mastrace was configured (or it
    never was), and nothing here asks for silence."""
    if not STATE.noop_spans:
        return False
    from . import _params

    try:
        if not _params.resolve(_params.HINTS, _params.UNSET, os.environ):
            return False
        if _params.resolve(_params.DISABLED, _params.UNSET, os.environ):
            return False
    except Exception:  # a malformed variable: say nothing rather than fail at exit
        return False
    return not (_testing() or _interactive())


def hint_text() -> str:
    """The hint: how many spans were not recorded, why, and what to do."""
    n = STATE.noop_spans
    if STATE.configured:
        return (
            f"mastrace: {n:,} span(s) were not recorded because they were created before "
            f"{_TOP}.configure() was called; call it once at start, before any span "
            "(or run the program with `mastrace run -- ...`). Set MASTRACE_HINTS=0 to silence this."
        )
    return (
        f"mastrace: {n:,} span(s) were not recorded because {_TOP}.configure() was never called in "
        "this process; call it once at start (or run the program with `mastrace run -- ...`). "
        "Set MASTRACE_HINTS=0 to silence this."
    )


def _at_exit() -> None:
    try:
        if should_hint():
            print(hint_text(), file=sys.stderr)
    except Exception:  # never let exit fail because of a hint
        pass
