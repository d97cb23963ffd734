"""The LLM SDKs' own HTTP retries, made visible on the call they belong to.

The `openai` and `anthropic` SDKs retry a failed request (HTTP 408/409/429/5xx, a dropped
connection) twice by default, inside `create()`: without this, three requests look like one call.
Each retry becomes a `mastrace.http.retry` event on the call's span (the status code that caused it,
the attempt that failed, the delay before the next one), and the span's `mastrace.http.attempts`
counts the requests made (set when there was more than one).

One span per call, not one per attempt: the call span is what rounds count as an LLM call and what
usage is credited to, and the attempts that failed returned nothing to bill. An event keeps the
time and cause of each retry at no cost to calls that never retry.

The hook wraps the SDKs' `_sleep_for_retry` (both their sync and async clients), which every
retry goes through; an SDK without it is left alone. Only SDKs already imported are patched (an
LLM call checks again, so one imported later is patched at its first call): nothing is imported here.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import wrapt

from .. import semconv
from ..tracing._errors import handle_internal_errors

__all__ = ["install", "uninstall"]

_SDKS = ("openai._base_client", "anthropic._base_client")
_LOCK = threading.Lock()
_undo: list[tuple[Any, str, Any]] = []
_patched: set[str] = set()
_current_call: Callable[[], Any] = lambda: None  # noqa: E731  (set by install: the call being made)


def _note(instance: Any, kwargs: dict[str, Any], seconds: float) -> None:
    call = _current_call()
    if call is None:
        return
    response = kwargs.get("response")
    attempt = int(kwargs.get("retries_taken") or 0) + 1
    attrs: dict[str, Any] = {
        semconv.MASTRACE_RETRY_ATTEMPT: attempt,
        semconv.MASTRACE_RETRY_DELAY: round(seconds, 6),
    }
    status = getattr(response, "status_code", None)
    if isinstance(status, int):
        attrs[semconv.HTTP_RESPONSE_STATUS_CODE] = status
    else:
        attrs[semconv.ERROR_TYPE] = "connection_error"
    call.span.add_event(semconv.EVENT_HTTP_RETRY, attrs)
    call.span.set_attribute(semconv.MASTRACE_HTTP_ATTEMPTS, attempt + 1)


def _sync_sleep(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    started = time.perf_counter()
    try:
        return wrapped(*args, **kwargs)
    finally:
        with handle_internal_errors("http retry"):
            _note(instance, kwargs, time.perf_counter() - started)


async def _async_sleep(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    started = time.perf_counter()
    try:
        return await wrapped(*args, **kwargs)
    finally:
        with handle_internal_errors("http retry"):
            _note(instance, kwargs, time.perf_counter() - started)


def install(current_call: Callable[[], Any]) -> None:
    """Wrap the retry hook of each LLM SDK imported so far (cheap when nothing is new).

    Args:
        current_call: Returns the LLM call being made in the current context (with a `span`), or None.
    """
    global _current_call
    _current_call = current_call
    if len(_patched) == len(_SDKS) or not any(n in sys.modules and n not in _patched for n in _SDKS):
        return
    with _LOCK:
        for name in _SDKS:
            module = sys.modules.get(name)
            if module is None or name in _patched:
                continue
            _patched.add(name)
            for owner_name, wrapper in (("SyncAPIClient", _sync_sleep), ("AsyncAPIClient", _async_sleep)):
                owner = getattr(module, owner_name, None)
                original = getattr(owner, "__dict__", {}).get("_sleep_for_retry")
                if owner is None or original is None:
                    continue
                owner._sleep_for_retry = wrapt.FunctionWrapper(original, wrapper)
                _undo.append((owner, "_sleep_for_retry", original))


def uninstall() -> None:
    """Put the SDKs' retry hooks back."""
    with _LOCK:
        for owner, name, original in reversed(_undo):
            setattr(owner, name, original)
        _undo.clear()
        _patched.clear()
