"""Carry the whole `contextvars` context across threads, tasks, generators and processes.

asyncio's `create_task`, `gather` and `to_thread` copy the context already; thread pools,
`threading.Thread` and generators resumed from different tasks do not. The helpers here close
those gaps, and `patch_threads()` installs them globally (undone by `unpatch_threads()`).
"""

from __future__ import annotations

import contextvars
import functools
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping, MutableMapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from opentelemetry import context as otel_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

if TYPE_CHECKING:  # asyncio costs 15-20 ms to import: only `create_task` needs it, and then it is loaded
    import asyncio

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

_PROPAGATOR = TraceContextTextMapPropagator()


def wrap(fn: Callable[P, R]) -> Callable[P, R]:
    """Bind `fn` to the current context, so that it runs there wherever it is called.

    Use it for callbacks handed to code that runs them on another thread or later. Each call
    runs in its own copy of the captured context, so the function may run on several threads at
    once, or call itself, and changes one call makes to context variables do not leak into the next.

    Example:
        >>> import threading, mastrace
        >>> t = threading.Thread(target=mastrace.wrap(lambda: None))
    """
    ctx = contextvars.copy_context()

    @functools.wraps(fn)
    def bound(*args: P.args, **kwargs: P.kwargs) -> R:
        return ctx.copy().run(fn, *args, **kwargs)

    bound.__mastrace_bound__ = True  # type: ignore[attr-defined]
    return bound


def create_task(coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
    """Start `coro` as a task on the running loop, in a copy of the whole current context.

    `asyncio.create_task` already does this; the helper gives code that schedules work through
    other means one call that is known to carry the context (on every supported Python).

    Raises:
        RuntimeError: No event loop is running in this thread.

    Example:
        >>> async def main():
        ...     await mastrace.create_task(asyncio.sleep(0), name="agent_a")  # doctest: +SKIP
    """
    import asyncio

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError("mastrace.create_task() needs a running event loop") from None
    ctx = contextvars.copy_context()
    if sys.version_info >= (3, 11):
        return loop.create_task(coro, name=name, context=ctx)
    # Python 3.10 has no `context=`: a task copies the context current when it is created.
    return ctx.run(loop.create_task, coro, name=name)  # pragma: no cover - Python 3.10


# --- thread propagation --------------------------------------------------------------------------
_original_submit = ThreadPoolExecutor.submit
_original_thread_start = threading.Thread.start
_patched = False


def _submit_with_context(
    self: ThreadPoolExecutor, fn: Callable[..., R], /, *args: Any, **kw: Any
) -> Future[R]:
    if getattr(fn, "__mastrace_bound__", False):
        return _original_submit(self, fn, *args, **kw)
    ctx = contextvars.copy_context()
    return _original_submit(self, ctx.run, fn, *args, **kw)


def _start_with_context(self: threading.Thread) -> None:
    if not getattr(self, "_mastrace_ctx_bound", False):
        ctx = contextvars.copy_context()
        run = self.run
        self.run = lambda: ctx.run(run)  # type: ignore[method-assign]
        self._mastrace_ctx_bound = True  # type: ignore[attr-defined]
    _original_thread_start(self)


def patch_threads() -> None:
    """Make `ThreadPoolExecutor.submit/map` and `threading.Thread` carry the caller's context."""
    global _patched
    if _patched:
        return
    ThreadPoolExecutor.submit = _submit_with_context  # type: ignore[assignment,method-assign]
    threading.Thread.start = _start_with_context  # type: ignore[method-assign]
    _patched = True


def unpatch_threads() -> None:
    """Undo `patch_threads()`."""
    global _patched
    if not _patched:
        return
    # Leave alone whatever another library installed on top of ours since.
    if ThreadPoolExecutor.submit is _submit_with_context:
        ThreadPoolExecutor.submit = _original_submit  # type: ignore[method-assign]
    if threading.Thread.start is _start_with_context:
        threading.Thread.start = _original_thread_start  # type: ignore[method-assign]
    _patched = False


def threads_patched() -> bool:
    """Whether thread propagation is installed."""
    return _patched


# --- running a coroutine or generator step in a fixed context ------------------------------------
class ContextAwaitable(Awaitable[T]):
    """Await `coro` so that every step of it runs inside `ctx`, whichever task awaits it."""

    __slots__ = ("_coro", "_ctx")

    def __init__(self, ctx: contextvars.Context, coro: Coroutine[Any, Any, T] | Awaitable[T]) -> None:
        self._ctx = ctx
        self._coro = coro

    def __await__(self) -> Generator[Any, Any, T]:
        ctx = self._ctx
        it = self._coro.__await__()
        send_value: Any = None
        error: BaseException | None = None
        while True:
            try:
                if error is None:
                    yielded = ctx.run(it.send, send_value)
                else:
                    exc, error = error, None
                    yielded = ctx.run(it.throw, exc)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            try:
                send_value = yield yielded
            except GeneratorExit:
                ctx.run(it.close)
                raise
            except BaseException as exc:
                error = exc


# --- cross-process propagation -------------------------------------------------------------------
def inject_env(env: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Return an environment for a child process that continues the current trace.

    The result is a copy of `env` (default: `os.environ`) with `TRACEPARENT` (and `TRACESTATE`
    when set) describing the current span. A child that calls `mastrace.configure()` picks them up.

    Example:
        >>> import subprocess, sys, mastrace
        >>> subprocess.run([sys.executable, "-c", "pass"], env=mastrace.inject_env())  # doctest: +SKIP
    """
    out = dict(os.environ if env is None else env)
    from ._tracer import repair_current  # imported here: _tracer sits above this module

    repair_current()
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    out.pop("TRACEPARENT", None)
    out.pop("TRACESTATE", None)
    if "traceparent" in carrier:
        out["TRACEPARENT"] = carrier["traceparent"]
        if carrier.get("tracestate"):
            out["TRACESTATE"] = carrier["tracestate"]
    return out


def context_from_env(env: Mapping[str, str] | None = None) -> otel_context.Context | None:
    """Return the OpenTelemetry context described by `TRACEPARENT`, or None when absent or invalid."""
    env = os.environ if env is None else env
    traceparent = env.get("TRACEPARENT")
    if not traceparent:
        return None
    carrier = {"traceparent": traceparent}
    if env.get("TRACESTATE"):
        carrier["tracestate"] = env["TRACESTATE"]
    ctx = _PROPAGATOR.extract(carrier)
    from opentelemetry import trace

    if not trace.get_current_span(ctx).get_span_context().is_valid:
        return None
    return ctx
