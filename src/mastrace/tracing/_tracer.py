"""The tracer facade: `get_tracer()`, `tracer.span(...)`, `tracer.event(...)` and the no-op path.

A `Span` is its own context manager (sync and async) and the handle you set attributes on. It
attaches itself to the OpenTelemetry context directly through the context variable, so that
leaving it in another context than the one it entered (a generator resumed by another task) is
handled quietly: the span ends, the context is restored, and the event is counted, never logged
as "Failed to detach context".
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from types import TracebackType
from typing import Any, Literal

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from .. import semconv
from ._errors import handle_internal_errors, log_internal_error, text_of, unreadable
from ._otel_private import RUNTIME_CONTEXT_VAR, SPAN_KEY
from ._snapshot import coerce_value, json_schema
from ._state import STATE, bump, span_lost

__all__ = ["NOOP_SPAN", "NoOpSpan", "Span", "Tracer", "get_tracer"]

_SPAN_KEY = SPAN_KEY
_VAR = RUNTIME_CONTEXT_VAR  # the SDK's default runtime context keeps the current Context in one ContextVar

_EMPTY = Context()
# A span exited in another context than the one it entered leaves that context pointing at it, and
# a context can only be changed from inside. So remember it (id -> (stale context, context to
# restore)) and repair it the next time a span starts there. Bounded: oldest entries are dropped.
_STALE: dict[int, tuple[Context, Context]] = {}
_MAX_STALE = 1024
_LEVELS = {
    "debug": 5,
    "info": semconv.LEVEL_INFO,
    "warn": semconv.LEVEL_WARN,
    "warning": semconv.LEVEL_WARN,
    "error": semconv.LEVEL_ERROR,
}


def coerce_attribute(value: Any) -> tuple[AttributeValue | None, bool]:
    """Turn any value into a valid OpenTelemetry attribute value. Never raises.

    Returns the value and whether it was encoded as a JSON string. `None` is dropped. The same
    coercion the export path applies, so a value is encoded once, here, on the caller's thread. A
    value that raises when read (a lazy proxy, a closed handle) becomes `<unreadable: ErrorType>`.
    """
    try:
        return coerce_value(value)
    except Exception as exc:
        return unreadable(exc), False


_TEXTS_ONLY = {str}


def _clean_attributes(
    attributes: Mapping[str, Any],
    valid: Mapping[str, AttributeValue] | None = None,
) -> tuple[dict[str, AttributeValue], dict[str, str] | None]:
    """Valid attribute values, and the JSON text of each value that was encoded as JSON. Never raises.

    `valid` holds attributes mastrace built itself, valid as they are: the result is `{**valid,
    **attributes}` with only `attributes` checked, and a key of `attributes` whose value is None
    (or becomes None) absent, as if the two had been merged before the check.
    """
    out: dict[str, AttributeValue] = dict(valid) if valid else {}
    json_texts: dict[str, str] | None = None
    try:
        items = list(attributes.items())
    except Exception as exc:  # a mapping that cannot be read: say so rather than lose the span
        out[semconv.MASTRACE_UNREADABLE] = unreadable(exc)
        return out, None
    for key, value in items:
        if type(key) is not str:
            key = text_of(key)
        t = type(value)
        if t is str or t is int or t is float or t is bool:
            out[key] = value
            continue
        if t is tuple and set(map(type, value)) == _TEXTS_ONLY:  # finish reasons, ids: valid as they are
            out[key] = value
            continue
        coerced, is_json = coerce_attribute(value)
        if coerced is None:
            if valid:
                out.pop(key, None)
            continue
        out[key] = coerced
        if is_json:
            (json_texts := json_texts or {})[key] = coerced  # type: ignore[assignment]
    return out, json_texts


class ValidAttributes(dict[str, AttributeValue]):
    """Attributes mastrace's own code built: valid OpenTelemetry values as they are (strings,
    numbers, booleans, tuples of strings, JSON text), which `Span._end_with` sets without a coercion
    pass. `json` maps the keys whose values are JSON text to that text (for `logfire.json_schema`).

    Made with `valid_attributes()`. A stream's finish hook that returns one hands it to the stream,
    which adds its own end attributes to it."""

    __slots__ = ("json",)

    json: dict[str, str] | None


def valid_attributes(
    attributes: Mapping[str, AttributeValue], json: dict[str, str] | None
) -> ValidAttributes:
    """`attributes` (valid as they are) as `ValidAttributes`, `json` the keys holding JSON text."""
    out = ValidAttributes(attributes)  # the C constructor: no `__init__` of its own
    out.json = json
    return out


def _to_link(link: Any) -> Link | None:
    if type(link) is SpanContext:  # the usual link (a recorded answer's context), without ABC checks
        return Link(link)
    if isinstance(link, Link):
        if link.attributes:  # a link's attributes are user values like any other
            attributes, _ = _clean_attributes(link.attributes)
            return Link(link.context, attributes)
        return link
    if isinstance(link, SpanContext):
        return Link(link)
    if isinstance(link, (Span, NoOpSpan)):
        ctx = link.span_context
        return Link(ctx) if ctx is not None and ctx.is_valid else None
    if isinstance(link, trace.Span):
        return Link(link.get_span_context())
    return None


def _links(given: Any) -> list[Link]:
    """The valid links among `given` (one link or a sequence). Never raises."""
    t = type(given)
    if (
        t is not list
        and t is not tuple
        and isinstance(given, (Link, SpanContext, Span, NoOpSpan, trace.Span))
    ):
        given = (given,)  # one link passed on its own
    links = []
    try:
        for item in given:
            try:
                link = _to_link(item)
            except Exception:
                continue
            if link is not None:
                links.append(link)
    except Exception:  # not iterable, or an iterator that fails: keep what was read
        pass
    return links


def _remember_stale(ctx: Context, restore: Context) -> None:
    if len(_STALE) >= _MAX_STALE:
        with suppress(KeyError, RuntimeError, StopIteration):  # another thread changed it meanwhile
            del _STALE[next(iter(_STALE))]
    _STALE[id(ctx)] = (ctx, restore)


def _repair(var: contextvars.ContextVar[Context], parent: Context) -> Context:
    """The context a new span should start in, when the current one belongs to an ended span."""
    entry = _STALE.get(id(parent))
    while entry is not None and entry[0] is parent:
        parent = entry[1]
        var.set(parent)
        entry = _STALE.get(id(parent))
    return parent


def attach_span(span: trace.Span) -> object:
    """Make `span` the current span; returns the token `opentelemetry.context.detach` takes.

    What `context.attach(trace.set_span_in_context(span))` does, through the context variable
    directly, as `Span.start` does: an LLM call makes its span current around every SDK call.
    """
    var = _VAR
    if var is None:  # pragma: no cover - a custom runtime context
        return otel_context.attach(trace.set_span_in_context(span))
    return var.set(Context({**var.get(), _SPAN_KEY: span}))


def repair_current() -> None:
    """If the current context belongs to a span that ended elsewhere, restore its parent now.

    mastrace repairs such a context whenever it starts a span there; code that reads the current
    span without starting one (propagation into a child process) calls this first.
    """
    var = _VAR
    if _STALE and var is not None:
        _repair(var, var.get())


_STATUS = {"ok": StatusCode.OK, "error": StatusCode.ERROR, "unset": StatusCode.UNSET}


class Span:
    """A span being recorded: a context manager (sync or async) and the handle to annotate it.

    Created by `Tracer.span()`; the OpenTelemetry span starts on `__enter__` and ends on
    `__exit__`. An exception leaving the block is recorded and sets the status to error.
    """

    __slots__ = (
        "_attrs",
        "_ctx",
        "_ended",
        "_json_keys",
        "_kind",
        "_links",
        "_mono",
        "_name",
        "_otel",
        "_span",
        "_t0",
        "_token",
        "_valid",
    )

    def __init__(
        self,
        otel_tracer: trace.Tracer,
        name: str,
        attributes: Mapping[str, Any] | None,
        kind: SpanKind | None,
        links: Sequence[Any] | None,
        valid: Mapping[str, AttributeValue] | None = None,
    ) -> None:
        self._otel = otel_tracer
        self._name = name
        self._attrs = attributes
        # Attributes mastrace built itself, valid as they are: they skip the coercion pass (`attributes`
        # are the user's, and win over them, as `{**valid, **attributes}`).
        self._valid = valid
        self._kind = kind
        self._links = links
        self._span: trace.Span | None = None
        self._ended: trace.Span | None = None  # kept so that an ended span can still be linked to
        self._token: contextvars.Token[Context] | None = None
        self._ctx: Context | None = None
        self._json_keys: dict[str, str] | None = None  # key -> JSON text, for logfire.json_schema
        # The start on the wall clock and on the monotonic clock: the end is the start plus the
        # monotonic time elapsed, so that a wall clock set back meanwhile cannot make it negative.
        self._t0 = 0
        self._mono = 0

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self, *, attach: bool = True, start_time: int | None = None) -> Span:
        """Start the span now (or at `start_time`, in ns since the epoch); with `attach`, make it
        the current span (what `__enter__` does)."""
        if self._span is not None:
            return self
        attrs: Mapping[str, AttributeValue] | None = self._valid
        if self._attrs:
            attrs, self._json_keys = _clean_attributes(self._attrs, attrs)
        links = None
        if self._links:
            links = _links(self._links)
        if type(self._name) is not str:
            self._name = text_of(self._name)
        var = _VAR
        if var is not None:
            parent = var.get()
            if _STALE:
                parent = _repair(var, parent)
        else:  # pragma: no cover - a custom runtime context
            parent = otel_context.get_current()
        if start_time is None:
            start_time = time.time_ns()
            self._mono = time.perf_counter_ns()
        self._t0 = start_time
        span = self._otel.start_span(
            self._name, parent, self._kind or SpanKind.INTERNAL, attrs, links, start_time
        )
        self._span = span
        if attach:
            ctx = Context({**parent, _SPAN_KEY: span})
            self._ctx = ctx
            self._token = var.set(ctx) if var is not None else otel_context.attach(ctx)
        return self

    def __enter__(self) -> Span:
        # try/except rather than `with handle_internal_errors(...)`: this runs for every span, and a
        # generator-based context manager would cost more than the rest of the wrapper.
        try:
            return self.start()
        except Exception as exc:
            if self._span is None:
                span_lost()
            log_internal_error("span start", exc)
            return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.end(exc)
        except Exception as error:
            log_internal_error("span end", error)

    async def __aenter__(self) -> Span:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def end(self, exc: BaseException | None = None, *, end_time: int | None = None) -> None:
        """End the span (once; later calls do nothing) and restore the context it replaced."""
        span = self._span
        if span is None:
            self._detach()
            return
        self._span = None
        self._ended = span
        try:
            if exc is not None and not isinstance(exc, GeneratorExit):
                self._record_error(span, exc)
            if self._json_keys:
                span.set_attribute(semconv.LOGFIRE_JSON_SCHEMA, json_schema(self._json_keys))
        finally:  # whatever failed above, the span ends and is exported
            if end_time is None and self._mono:
                end_time = self._t0 + (time.perf_counter_ns() - self._mono)
            try:
                span.end(end_time)
            finally:
                self._detach()

    def _detach(self) -> None:
        token = self._token
        if token is None:
            return
        self._token = None
        var = _VAR
        if var is None:  # pragma: no cover
            otel_context.detach(token)
            return
        current = var.get()
        if current is not self._ctx and self._ctx is not None:
            inner = current.get(_SPAN_KEY)
            if isinstance(inner, trace.Span) and inner.is_recording():
                # Exited before a span opened inside it (generators closed late): the inner span stays
                # current until it ends; then the context it restores, ours, is repaired to our parent.
                bump("out_of_order_exits")
                old = token.old_value
                _remember_stale(self._ctx, _EMPTY if old is contextvars.Token.MISSING else old)
                return
        try:
            var.reset(token)
            if _STALE:
                _repair(var, var.get())
        except ValueError:
            # Left in another context than the one it entered (a generator resumed by another
            # task, a handle passed between threads). Restore the parent here if we are current,
            # and let the entering context be repaired when it next starts a span.
            bump("cross_context_exits")
            old = token.old_value
            restore = _EMPTY if old is contextvars.Token.MISSING else old
            if var.get() is self._ctx:
                var.set(restore)
            if self._ctx is not None:
                _remember_stale(self._ctx, restore)
        except RuntimeError:  # token already used
            bump("cross_context_exits")

    @staticmethod
    def _record_error(span: trace.Span, exc: BaseException) -> None:
        message = text_of(exc)
        try:
            span.record_exception(exc, escaped=True)
        except Exception:  # an exception whose message or traceback cannot be read
            span.add_event(
                "exception",
                {
                    semconv.EXCEPTION_TYPE: type(exc).__name__,
                    semconv.EXCEPTION_MESSAGE: message,
                    semconv.EXCEPTION_ESCAPED: True,
                },
            )
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {message}"))

    # -- annotation -------------------------------------------------------------------------------
    def set_attribute(self, key: str, value: Any) -> None:
        """Set one attribute. Any value is accepted: non-primitive values become JSON strings."""
        span = self._span
        if span is None:
            return
        t = type(value)
        if t is str or t is int or t is float or t is bool:
            span.set_attribute(key, value)
            return
        with handle_internal_errors("set_attribute"):
            coerced, is_json = coerce_attribute(value)
            if coerced is None:
                return
            span.set_attribute(key, coerced)
            if is_json:
                if self._json_keys is None:
                    self._json_keys = {}
                self._json_keys[key] = coerced  # type: ignore[assignment]

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        """Set several attributes at once (one call into the SDK; any values, as `set_attribute`)."""
        span = self._span
        if span is None or not attributes:
            return
        try:  # not `handle_internal_errors`: a generator context manager costs ~1 µs per call here
            clean, json_keys = _clean_attributes(attributes)
            span.set_attributes(clean)
            if json_keys:
                if self._json_keys is None:
                    self._json_keys = {}
                self._json_keys.update(json_keys)
        except Exception as exc:
            log_internal_error("set_attributes", exc)

    def _set_valid_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        """Set attributes already known to be valid OTel values (strings, numbers, booleans), as
        mastrace's own code builds them: no coercion pass."""
        span = self._span
        if span is not None:
            span.set_attributes(attributes)

    def _end_with(self, attributes: Mapping[str, Any], exc: BaseException | None = None) -> None:
        """Set `attributes` and end the span, with `logfire.json_schema` in the same call into the
        SDK (`set_attributes` then `end` make two): what an LLM call does as its stream ends."""
        span = self._span
        if span is not None and attributes:
            try:
                clean: dict[str, AttributeValue]
                if type(attributes) is ValidAttributes:  # built by mastrace, handed over: no coercion pass
                    clean, json_keys = attributes, attributes.json
                else:
                    clean, json_keys = _clean_attributes(attributes)
                keys = self._json_keys
                if json_keys:
                    keys = self._json_keys = {**keys, **json_keys} if keys else json_keys
                if keys:
                    clean[semconv.LOGFIRE_JSON_SCHEMA] = json_schema(keys)
                span.set_attributes(clean)
                self._json_keys = None  # declared: `end` has nothing left to add
            except Exception as error:
                log_internal_error("set_attributes", error)
        self.end(exc)

    def set_json_attribute(self, key: str, text: str) -> None:
        """Set an attribute whose value is already JSON text (an object or array).

        Use it for a snapshot serialised once and attached to many spans: nothing is re-encoded,
        and the key is declared in `logfire.json_schema` so Logfire renders it as an object.
        """
        span = self._span
        if span is None:
            return
        span.set_attribute(key, text)
        if self._json_keys is None:
            self._json_keys = {}
        self._json_keys[key] = text

    def _declare_json(self, key: str, text: str) -> None:
        """Declare an attribute the span started with as JSON text (for `logfire.json_schema`), as
        `set_json_attribute` does for one set later."""
        if self._span is None:
            return
        if self._json_keys is None:
            self._json_keys = {}
        self._json_keys[key] = text

    def add_event(
        self, name: str, attributes: Mapping[str, Any] | None = None, timestamp: int | None = None
    ) -> None:
        """Add a timestamped event to the span."""
        span = self._span
        if span is None:
            return
        with handle_internal_errors("add_event"):
            attrs = _clean_attributes(attributes)[0] if attributes else None
            span.add_event(name, attrs, timestamp)

    def record_exception(self, exc: BaseException, attributes: Mapping[str, Any] | None = None) -> None:
        """Record an exception as an event on the span (the status is not changed)."""
        span = self._span
        if span is None:
            return
        with handle_internal_errors("record_exception"):
            attrs = _clean_attributes(attributes)[0] if attributes else None
            span.record_exception(exc, attrs)

    def set_status(
        self, status: StatusCode | Literal["ok", "error", "unset"], description: str | None = None
    ) -> None:
        """Set the span status: `"ok"`, `"error"` (with a description) or `"unset"`."""
        span = self._span
        if span is None:
            return
        with handle_internal_errors("set_status"):
            code = _STATUS[status] if isinstance(status, str) else status
            if description is not None and type(description) is not str:
                description = text_of(description)
            span.set_status(Status(code, description if code is StatusCode.ERROR else None))

    # -- introspection ----------------------------------------------------------------------------
    @property
    def span_context(self) -> SpanContext | None:
        """The OpenTelemetry span context (trace and span ids), or None before the span starts.

        It stays available after the span ends, for links and for `inject_env`-style propagation.
        """
        span = self._span if self._span is not None else self._ended
        return span.get_span_context() if span is not None else None

    @property
    def otel_span(self) -> trace.Span | None:
        """The underlying OpenTelemetry span while it is recording."""
        return self._span

    @property
    def name(self) -> str:
        """The span name."""
        return self._name

    def is_recording(self) -> bool:
        """Whether the span is started, not ended, and sampled."""
        return self._span is not None and self._span.is_recording()


class NoOpSpan:
    """The span handle mastrace hands out when it is not configured or is disabled.

    Every method does nothing; it is a singleton, so the no-op path allocates nothing.
    """

    __slots__ = ()

    def __enter__(self) -> NoOpSpan:
        return self

    def __exit__(self, *args: object) -> None:
        return None

    async def __aenter__(self) -> NoOpSpan:
        return self

    async def __aexit__(self, *args: object) -> None:
        return None

    def start(self, *, attach: bool = True, start_time: int | None = None) -> NoOpSpan:
        return self

    def end(self, exc: BaseException | None = None, *, end_time: int | None = None) -> None:
        return None

    def set_attribute(self, key: str, value: Any) -> None:
        return None

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        return None

    def _set_valid_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        return None

    def _end_with(self, attributes: Mapping[str, Any], exc: BaseException | None = None) -> None:
        return None

    def set_json_attribute(self, key: str, text: str) -> None:
        return None

    def add_event(
        self, name: str, attributes: Mapping[str, Any] | None = None, timestamp: int | None = None
    ) -> None:
        return None

    def record_exception(self, exc: BaseException, attributes: Mapping[str, Any] | None = None) -> None:
        return None

    def set_status(self, status: Any, description: str | None = None) -> None:
        return None

    @property
    def span_context(self) -> None:
        return None

    @property
    def otel_span(self) -> None:
        return None

    @property
    def name(self) -> str:
        return ""

    def is_recording(self) -> bool:
        return False


NOOP_SPAN = NoOpSpan()


class Tracer:
    """Creates mastrace spans. Get one with `mastrace.get_tracer()`.

    A tracer made before `configure()` starts recording as soon as `configure()` runs.
    """

    __slots__ = ("_gen", "_otel", "name", "version")

    def __init__(self, name: str = "mastrace", version: str | None = None) -> None:
        self.name = name
        self.version = version
        self._otel: trace.Tracer | None = None
        self._gen = -1

    def _otel_tracer(self) -> trace.Tracer | None:
        state = STATE
        if self._gen != state.generation:
            provider = state.provider
            if provider is None and state.inherit is not None:
                inherit, state.inherit = state.inherit, None
                if inherit():
                    provider = state.provider
            self._otel = provider.get_tracer(self.name, self.version) if provider is not None else None
            self._gen = state.generation
        return self._otel

    def span(
        self,
        name: str,
        attributes: Mapping[str, Any] | None = None,
        *,
        kind: SpanKind | None = None,
        links: Sequence[Any] | None = None,
    ) -> Span | NoOpSpan:
        """Return a span to use as `with tracer.span(...) as span:` (or `async with`).

        Args:
            name: The span name, e.g. `"coordination.session"`. Keep it low-cardinality.
            attributes: Initial attributes; any value is accepted (see `Span.set_attribute`).
            kind: The OpenTelemetry span kind (default internal).
            links: Spans to link to: mastrace spans, OpenTelemetry spans, span contexts or links.

        Example:
            >>> import mastrace
            >>> tracer = mastrace.get_tracer()
            >>> with tracer.span("coordination.session", attributes={"massgen.task": "demo"}) as span:
            ...     span.set_attribute("massgen.outcome", "vote")
        """
        otel = self._otel if self._gen == STATE.generation else self._otel_tracer()
        if otel is None:
            _noop()
            return NOOP_SPAN
        return Span(otel, name, attributes, kind, links)

    def _span(
        self,
        name: str,
        valid: Mapping[str, AttributeValue],
        attributes: Mapping[str, Any] | None = None,
        *,
        kind: SpanKind | None = None,
        links: Sequence[Any] | None = None,
    ) -> Span | NoOpSpan:
        """`span()` for mastrace's own code: `valid` holds the attributes it built, valid
        OpenTelemetry values as they are (strings, numbers, booleans, tuples of strings; no None),
        which skip the coercion pass; `attributes` (the user's values) are coerced and win."""
        otel = self._otel if self._gen == STATE.generation else self._otel_tracer()
        if otel is None:
            _noop()
            return NOOP_SPAN
        return Span(otel, name, attributes, kind, links, valid)

    def event(self, name: str, *, level: str = "info", **attributes: Any) -> None:
        """Record a zero-duration, log-style span under the current span.

        It carries `logfire.span_type = "log"` and `logfire.msg`, so Logfire shows it as a log.

        Example:
            >>> mastrace.get_tracer().event("Coordination event: winner_selected", winner="agent_a")
        """
        try:  # not `handle_internal_errors`: a generator context manager costs more, on every event
            self._log(name, attributes, level=level)
        except Exception as exc:
            log_internal_error("event", exc)

    def _log(
        self,
        name: str,
        attributes: Mapping[str, Any],
        *,
        level: str = "info",
        links: Sequence[Any] | None = None,
        valid: Mapping[str, AttributeValue] | None = None,
    ) -> SpanContext | None:
        """Record a zero-duration log span (what `event` does); returns its context, for links.

        `valid` (mastrace's own attributes, valid as they are) go before `attributes`, unchecked."""
        own: dict[str, AttributeValue] = {
            semconv.LOGFIRE_SPAN_TYPE: "log",
            semconv.LOGFIRE_MSG: name,
            semconv.LOGFIRE_LEVEL_NUM: _LEVELS.get(level, semconv.LEVEL_INFO),
        }
        user: Mapping[str, Any] | None = attributes
        if type(name) is not str:  # the user's, coerced as theirs are
            del own[semconv.LOGFIRE_MSG]
            user = {semconv.LOGFIRE_MSG: name, **attributes}
        if valid:
            own.update(valid)
        span = self._span(name, own, user or None, links=links)
        try:
            span.start(attach=False)
        except Exception as exc:
            if isinstance(span, Span) and span.otel_span is None:
                span_lost()
            log_internal_error("start_span", exc)
            return None
        otel_span = span.otel_span
        if otel_span is None:
            return None
        if level == "error":
            otel_span.set_status(Status(StatusCode.ERROR, name))
        ctx = span.span_context
        span.end(end_time=getattr(otel_span, "start_time", None) or time.time_ns())
        return ctx

    def start_span(
        self,
        name: str,
        attributes: Mapping[str, Any] | None = None,
        *,
        kind: SpanKind | None = None,
        links: Sequence[Any] | None = None,
    ) -> Span | NoOpSpan:
        """Start a span that is not made current; call `.end()` on it yourself."""
        span = self.span(name, attributes, kind=kind, links=links)
        try:
            return span.start(attach=False)
        except Exception as exc:
            if isinstance(span, Span) and span.otel_span is None:
                span_lost()
            log_internal_error("start_span", exc)
            return NOOP_SPAN


def _noop() -> None:
    """Count a span handed out as a no-op before `configure()` (for the exit hint: never called, or
    called too late); spans after `shutdown()` are not counted."""
    state = STATE
    if state.configured:
        return
    if not state.noop_spans:
        from ._hints import first_noop_span

        first_noop_span()
    state.noop_spans += 1


_TRACERS: dict[tuple[str, str | None], Tracer] = {}


def get_tracer(name: str = "mastrace", version: str | None = None) -> Tracer:
    """Return the tracer for a component (cached per name).

    Example:
        >>> import mastrace
        >>> tracer = mastrace.get_tracer("my_agents")
    """
    key = (name, version)
    tracer = _TRACERS.get(key)
    if tracer is None:
        tracer = _TRACERS[key] = Tracer(name, version)
    return tracer


def current_span_context() -> SpanContext | None:
    """The span context of the current span, or None when there is none."""
    repair_current()
    ctx = trace.get_current_span().get_span_context()
    return ctx if ctx.is_valid else None


def _iter_links(links: Iterable[Any]) -> list[Link]:  # used by mixins
    return [lk for lk in map(_to_link, links) if lk is not None]
