"""`@mastrace.instrument`: one wrapper per callable kind, built on `wrapt`.

`wrapt` keeps signatures, `inspect` results and method binding intact (functions, methods,
classmethods, staticmethods). The span name template is checked when decorating and filled from
the bound arguments on each call: `"agent.{self.agent_id}.round_{round}"`.
"""

from __future__ import annotations

import contextvars
import inspect
import string
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, overload

import wrapt

from .. import semconv
from ..exceptions import ConfigError
from ._errors import log_internal_error
from ._streams import TracedAsyncGenerator, TracedGenerator
from ._tracer import NOOP_SPAN, Tracer, _noop, get_tracer

F = TypeVar("F", bound=Callable[..., Any])


class _Namer:
    """Fills a name template from a call's arguments without `inspect.Signature.bind` (too slow)."""

    def __init__(self, fn: Callable[..., Any], template: str) -> None:
        self.template = template
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
        roots = {f.split(".", 1)[0].split("[", 1)[0] for f in fields}
        if "" in roots:
            raise ConfigError(
                f"span name template {template!r}: positional fields {{}} are not supported; "
                "name the parameter, e.g. {round}"
            )
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        names = {p.name for p in params}
        unknown = sorted(roots - names)
        if unknown:
            raise ConfigError(
                f"span name template {template!r} of {getattr(fn, '__qualname__', fn)!r} names "
                f"{', '.join(unknown)}, which is not a parameter; parameters are: "
                f"{', '.join(p.name for p in params) or '(none)'}"
            )
        self.static = not fields
        self.positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self.var_positional = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), None)
        self.var_keyword = next((p.name for p in params if p.kind is p.VAR_KEYWORD), None)
        self.keywords = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        self.defaults: dict[str, Any] = {p.name: p.default for p in params if p.default is not p.empty}
        if self.var_positional is not None:
            self.defaults[self.var_positional] = ()

    def arguments(
        self, instance: Any, bound_method: bool, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> dict[str, Any]:
        values = dict(self.defaults)
        names = self.positional
        if bound_method and names:
            values[names[0]] = instance
            names = names[1:]
        values.update(zip(names, args, strict=False))
        if self.var_positional is not None and len(args) > len(names):
            values[self.var_positional] = args[len(names) :]
        if self.var_keyword is None:
            values.update(kwargs)
            return values
        # Like `Signature.bind`: keywords that match no parameter are grouped under `**name`.
        extra = {}
        for key, value in kwargs.items():
            if key in self.keywords:
                values[key] = value
            else:
                extra[key] = value
        values[self.var_keyword] = extra
        return values

    def name(self, values: Mapping[str, Any]) -> str:
        try:
            return self.template.format_map(values)
        except Exception as exc:
            log_internal_error(f"span name template {self.template!r}", exc)
            return self.template


def _kind(fn: Any) -> str:
    target = fn.__func__ if isinstance(fn, (classmethod, staticmethod)) else fn
    if inspect.isasyncgenfunction(target):
        return "async_gen"
    if inspect.isgeneratorfunction(target):
        return "gen"
    if inspect.iscoroutinefunction(target):
        return "async"
    return "sync"


@overload
def instrument(name_template: F) -> F: ...
@overload
def instrument(
    name_template: str | None = None,
    *,
    attributes: Mapping[str, Any] | None = None,
    record_args: bool = False,
    record_return: bool = False,
    tracer: Tracer | None = None,
) -> Callable[[F], F]: ...


def instrument(
    name_template: Any = None,
    *,
    attributes: Mapping[str, Any] | None = None,
    record_args: bool = False,
    record_return: bool = False,
    tracer: Tracer | None = None,
) -> Any:
    """Trace every call of a function, method, coroutine or (async) generator.

    The span covers the call; for a generator it covers the whole iteration, and the generator's
    body keeps the span as its current span across yields, whichever task pulls the items.

    Args:
        name_template: The span name, with `{param}` fields filled from the call's arguments
            (attribute access allowed: `{self.agent_id}`). Default: the function's qualified name.
        attributes: Constant attributes for every span.
        record_args: Record the call's arguments as the `mastrace.args` JSON attribute.
        record_return: Record the return value as `mastrace.return` (not for generators).
        tracer: The tracer to use (default `mastrace.get_tracer()`).

    Raises:
        ConfigError: The template names a parameter the function does not have.

    Example:
        >>> import mastrace
        >>> class Agent:
        ...     agent_id = "agent_a"
        ...     @mastrace.instrument("agent.{self.agent_id}.round_{round}")
        ...     async def run_round(self, round: int) -> str:
        ...         return "answer"
    """
    if callable(name_template) and not isinstance(name_template, str):
        return instrument()(name_template)

    def decorator(fn: F) -> F:
        target = fn.__func__ if isinstance(fn, (classmethod, staticmethod)) else fn
        namer = _Namer(target, name_template or getattr(target, "__qualname__", "function"))
        kind = _kind(fn)
        static_attrs = dict(attributes) if attributes else None
        needs_args = record_args or not namer.static

        t = tracer if tracer is not None else get_tracer()  # tracers are cached and follow reconfigures

        def open_span(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            if not needs_args:  # a fixed name: `Tracer.span` alone (it skips all work when unconfigured)
                return t.span(namer.template, static_attrs)
            if t._otel_tracer() is None:  # not configured: skip all work
                _noop()
                return NOOP_SPAN
            values = None
            if needs_args:
                # wrapt passes the instance (or class) of a bound call, including `Cls.method(obj, ...)`,
                # where `wrapped` is a partial rather than a bound method; a staticmethod gets None.
                values = namer.arguments(instance, instance is not None, args, kwargs)
            name = namer.template if namer.static else namer.name(values or {})
            attrs = static_attrs
            if record_args and values is not None:
                # The span starts later (on entry or first item): the arguments go in as initial attributes.
                shown = {k: v for k, v in values.items() if k not in ("self", "cls")}
                attrs = {**(static_attrs or {}), semconv.MASTRACE_ARGS: shown}
            return t.span(name, attrs)

        if kind == "sync":

            @wrapt.decorator
            def sync_wrapper(
                wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
            ) -> Any:
                # try/except rather than `_safe_open` or a context manager: this runs on every call.
                try:
                    span = open_span(wrapped, instance, args, kwargs)
                except Exception as exc:
                    log_internal_error("instrument", exc)
                    span = NOOP_SPAN
                with span:
                    result = wrapped(*args, **kwargs)
                    if record_return and span is not NOOP_SPAN:
                        span.set_attribute(semconv.MASTRACE_RETURN, result)
                    return result

            return sync_wrapper(fn)  # type: ignore[return-value]

        if kind == "async":

            @wrapt.decorator
            async def async_wrapper(
                wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
            ) -> Any:
                # The span opens when the coroutine starts, not when it is created.
                try:
                    span = open_span(wrapped, instance, args, kwargs)
                except Exception as exc:
                    log_internal_error("instrument", exc)
                    span = NOOP_SPAN
                with span:
                    result = await wrapped(*args, **kwargs)
                    if record_return and span is not NOOP_SPAN:
                        span.set_attribute(semconv.MASTRACE_RETURN, result)
                    return result

            return async_wrapper(fn)  # type: ignore[return-value]

        stream_cls = TracedGenerator if kind == "gen" else TracedAsyncGenerator

        @wrapt.decorator
        def gen_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            span = _safe_open(open_span, wrapped, instance, args, kwargs)
            inner = wrapped(*args, **kwargs)
            if span is NOOP_SPAN:
                return inner
            return stream_cls(inner, contextvars.copy_context(), lambda: span)

        return gen_wrapper(fn)  # type: ignore[return-value]

    return decorator


def _safe_open(open_span: Callable[..., Any], *args: Any) -> Any:
    # try/except rather than `with handle_internal_errors(...)`: this runs on every call.
    try:
        return open_span(*args)
    except Exception as exc:
        log_internal_error("instrument", exc)
        return NOOP_SPAN
