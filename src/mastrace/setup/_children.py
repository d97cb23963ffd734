"""Workers started with multiprocessing's `spawn` or `forkserver` trace like the process that started them.

A forked child inherits its parent's configured state; a `spawn` or `forkserver` child starts a new
interpreter that has never called `configure()`, so its spans used to be no-ops in silence. When a
process is configured, its settings go into the environment (`CHILD_SETTINGS_ENV`, JSON) that such
children inherit; in a multiprocessing child, the first span of an unconfigured tracer configures
mastrace from them. What cannot pass through the environment (extra exporter objects, custom
scrubbing options, a Logfire token given as an argument) is left out, with one warning that says
to call `configure()` in the worker. `shutdown()` takes the settings out of the environment again.

Spans of such a worker start traces of their own, unless the parent put `mastrace.inject_env()` into
its environment before starting it (then they continue that span). A `forkserver` worker is forked
from a server that kept the environment of the first worker's start, so the settings and the
`TRACEPARENT` a worker follows travel with its `Process` object instead (multiprocessing sends every
worker its parent's process config), read from the environment when the worker starts.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any, Final

from ..exceptions import MastraceWarning
from ..scrubbing._options import ScrubbingOptions
from ..tracing._errors import log_internal_error
from ..tracing._state import CHILD_SETTINGS_ENV

__all__ = ["CHILD_SETTINGS_ENV", "child_settings", "forget", "inherit", "publish"]

_PLAIN: Final = (
    "service_name",
    "otlp",
    "console",
    "sample_rate",
    "propagate_threads",
    "flush_interval",
    "max_queue_size",
    "shutdown_timeout",
    "otlp_exit_timeout",
    "max_row_bytes",
)
_AT_START: Final = (CHILD_SETTINGS_ENV, "TRACEPARENT", "TRACESTATE")
_PROCESS_CONFIG_KEY: Final = "mastrace.environment"


class _EnvironmentAtStart:
    """In the parent's process config; pickled, when a worker starts, as what `_AT_START` names in the
    parent's environment then (a plain dict: the worker needs nothing of mastrace to read it)."""

    def __reduce__(self) -> tuple[type[dict[str, str]], tuple[dict[str, str]]]:
        return dict, ({name: os.environ[name] for name in _AT_START if name in os.environ},)


def child_settings(settings: Any) -> dict[str, Any]:
    """The `configure()` arguments a worker process can be given through its environment, and under
    `"left_out"` what it cannot (named for the warning)."""
    out: dict[str, Any] = {name: getattr(settings, name) for name in _PLAIN}
    left_out: list[str] = []
    out["local"] = str(settings.local) if settings.local is not None else False
    out["retention"] = str(settings.retention) if settings.retention is not None else None
    scrubbing = settings.scrubbing
    if scrubbing is None or scrubbing == ScrubbingOptions():
        out["scrubbing"] = scrubbing is not None
    else:
        left_out.append("custom scrubbing options (default scrubbing applies)")
    if settings.logfire is True:
        out["logfire"] = True
    elif settings.logfire:
        left_out.append("the Logfire token passed as an argument")
    if settings.exporters:
        left_out.append(f"{len(settings.exporters)} extra exporter(s)")
    if left_out:
        out["left_out"] = left_out
    return out


def publish(settings: Any) -> None:
    """Put `settings` in the environment that `spawn` and `forkserver` workers inherit."""
    try:
        os.environ[CHILD_SETTINGS_ENV] = json.dumps(child_settings(settings))
        import multiprocessing.process

        getattr(multiprocessing.process.current_process(), "_config", {})[_PROCESS_CONFIG_KEY] = (
            _EnvironmentAtStart()
        )
    except Exception as exc:  # a worker then traces nothing: never a reason to fail configure()
        log_internal_error("publishing settings for worker processes", exc)


def forget() -> None:
    """Take the settings out of the environment (tracing was shut down)."""
    os.environ.pop(CHILD_SETTINGS_ENV, None)


def inherit(configure: Callable[..., object], at_worker_exit: Callable[[], object]) -> bool:
    """In a multiprocessing worker of a configured process, configure mastrace from the parent's
    settings (once); return whether it did. Called when a tracer finds mastrace unconfigured, with
    `configure` and the flush to run at the worker's exit (handed in: this module does not import
    `configure()`)."""
    multiprocessing = sys.modules.get("multiprocessing")
    if multiprocessing is None or multiprocessing.parent_process() is None:
        return False
    started = getattr(multiprocessing.current_process(), "_config", {}).get(_PROCESS_CONFIG_KEY)
    if isinstance(started, dict):  # sent with the worker's Process object: newer than a forkserver's
        for name in _AT_START:
            if isinstance(started.get(name), str):
                os.environ[name] = started[name]
            else:
                os.environ.pop(name, None)
    text = os.environ.get(CHILD_SETTINGS_ENV)
    if not text:
        return False
    try:
        arguments = json.loads(text)
        left_out = arguments.pop("left_out", [])
        configure(**arguments)
        _flush_at_worker_exit(at_worker_exit)
    except Exception as exc:
        log_internal_error("configuring a worker process from its parent's settings", exc)
        return False
    if left_out:
        warnings.warn(
            "mastrace: this worker process traces with its parent's settings, except "
            f"{', '.join(left_out)}: call configure() in the worker (for example in a Pool initializer) "
            "to set them",
            MastraceWarning,
            stacklevel=2,
        )
    return True


def _flush_at_worker_exit(at_worker_exit: Callable[[], object]) -> None:
    """multiprocessing workers leave through `os._exit`: atexit never runs, its finalizers do."""
    import multiprocessing.util as mp_util

    mp_util.Finalize(None, at_worker_exit, exitpriority=100)
