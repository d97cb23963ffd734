"""Send spans to Logfire through the `logfire` SDK (install `mastrace[logfire]`).

`configure_logfire()` runs `logfire.configure()`, which makes Logfire's TracerProvider the global
one; `mastrace.configure()` then adds its own destinations (the local store, OTLP…) to that provider,
so every span goes to Logfire and to them. Logfire reads its usual environment variables:
`LOGFIRE_TOKEN`, `LOGFIRE_BASE_URL`, `LOGFIRE_SEND_TO_LOGFIRE`, …

An application that configured Logfire itself keeps its configuration: `logfire.configure()` is
never called again (`application_configured_logfire()`), since a second call would replace the
provider that holds the application's own span processors. mastrace's destinations are added to
the application's provider, and what Logfire sends is governed by the application's settings.

Spans that mastrace creates through Logfire's provider keep the `logfire.span_type` mastrace gives
them (`log` for `tracer.event()`), which Logfire's own tracer would otherwise force to `span`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any
from urllib.parse import quote, unquote

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanKind
from opentelemetry.util.types import Attributes

from .. import semconv
from ..exceptions import ExportError
from ..scrubbing._shared import SharedScrubber
from ..tracing._errors import warn_once

__all__ = [
    "LogfireTracerProvider",
    "application_configured_logfire",
    "configure_logfire",
    "hook_target",
    "is_logfire_provider",
    "watch_reconfigure",
]

_INSTALL_HINT = "configure(logfire=...) needs the logfire SDK: pip install 'mastrace[logfire]'"
_EVERY_KEY = r"^(?=[\s\S])"  # matches at position 0 of any non-empty string
_RESOURCE_ENV = "OTEL_RESOURCE_ATTRIBUTES"


# Whether the Logfire configuration in force is the one `configure_logfire()` made (True), or the
# application's own (a `logfire.configure()` call mastrace did not make came after it).
_configured_by_mastrace: list[bool] = [False]


def application_configured_logfire() -> bool:
    """Whether the application (not mastrace) configured Logfire, which mastrace must then reuse."""
    return is_logfire_provider(trace.get_tracer_provider()) and not _configured_by_mastrace[0]


def configure_logfire(
    token_or_true: str | bool,
    service_name: str,
    scrubber: SharedScrubber | None,
    *,
    sample_rate: float = 1.0,
    own_otlp_traces: bool = True,
) -> None:
    """Configure the `logfire` SDK so that its TracerProvider becomes the global one.

    Args:
        token_or_true: A Logfire write token, or True to let Logfire find one (`LOGFIRE_TOKEN`).
            With True and no token, nothing is sent to Logfire (its `'if-token-present'`), unless
            `LOGFIRE_SEND_TO_LOGFIRE` says otherwise.
        service_name: The `service.name` Logfire records.
        scrubber: The configuration's one scrubber; Logfire's scrubber applies mastrace's policy
            through it. None turns scrubbing off.
        sample_rate: Fraction of traces kept (Logfire's head sampling).
        own_otlp_traces: Let Logfire add its own OTLP trace exporter when
            `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT` is set. False when mastrace exports OTLP itself,
            so that the collector does not receive every span twice.

    Raises:
        ExportError: The `logfire` package is not installed.
    """
    try:
        import logfire
    except ImportError as exc:
        raise ExportError(_INSTALL_HINT) from exc
    token = None if token_or_true is True else str(token_or_true)
    if token is not None:
        send: bool | str | None = True
    else:  # None lets Logfire read LOGFIRE_SEND_TO_LOGFIRE
        send = None if os.environ.get("LOGFIRE_SEND_TO_LOGFIRE") else "if-token-present"
    otlp = nullcontext() if own_otlp_traces else _without_otlp_traces_exporter()
    with otlp, _scrubbed_resource_attributes(scrubber):
        logfire.configure(
            token=token,
            send_to_logfire=send,  # type: ignore[arg-type]
            service_name=service_name,
            console=False,
            scrubbing=_logfire_scrubbing(logfire, scrubber),
            sampling=logfire.SamplingOptions(head=sample_rate),
        )
    if scrubber is not None:
        from ._logfire_safe_keys import scrub_logfire_safe_keys

        scrub_logfire_safe_keys(logfire, scrubber)
    _configured_by_mastrace[0] = True


@contextmanager
def _without_otlp_traces_exporter() -> Iterator[None]:
    """Set `OTEL_TRACES_EXPORTER=none` while Logfire reads it, unless the application set it."""
    if os.environ.get("OTEL_TRACES_EXPORTER") is not None:
        yield
        return
    os.environ["OTEL_TRACES_EXPORTER"] = "none"
    try:
        yield
    finally:
        os.environ.pop("OTEL_TRACES_EXPORTER", None)


@contextmanager
def _scrubbed_resource_attributes(scrubber: SharedScrubber | None) -> Iterator[None]:
    """Scrub `OTEL_RESOURCE_ATTRIBUTES` while Logfire builds its resource from it.

    Logfire's scrubber looks at span attributes only; the resource it sends with every batch comes
    from this variable (`key=value,…`, values percent-encoded), so a secret there is scrubbed here.
    """
    raw = os.environ.get(_RESOURCE_ENV)
    if scrubber is None or not raw:
        yield
        return
    pairs = [item.split("=", 1) for item in raw.split(",") if "=" in item]
    attributes = {unquote(k.strip()): unquote(v.strip()) for k, v in pairs}
    cleaned, paths = scrubber.get().scrub_attributes(attributes, ("resource",))
    if not paths:
        yield
        return
    os.environ[_RESOURCE_ENV] = ",".join(
        f"{quote(k, safe='')}={quote(str(v), safe='')}" for k, v in cleaned.items()
    )
    try:
        yield
    finally:
        os.environ[_RESOURCE_ENV] = raw


def _logfire_scrubbing(logfire: Any, shared: SharedScrubber | None) -> Any:
    """Logfire's ScrubbingOptions that hand every attribute to mastrace's scrubber.

    Logfire's scrubber matches its patterns on keys and values and, on a match, calls the callback
    instead of redacting when the callback returns a value. A pattern that matches at the start of
    every key makes it call back for each top-level attribute of spans, events and links, so
    mastrace's policy (secret keys, secret shapes inside values, safe keys such as `input_tokens`)
    decides what Logfire receives, and a secret is never echoed in a redaction note.
    """
    if shared is None:
        return False

    def callback(match: Any) -> Any:
        scrubber = shared.get()  # built by the first span's export, not by configure()
        path = tuple(match.path)
        value = match.value
        if path and isinstance(path[-1], str) and match.pattern_match.string == path[-1]:
            cleaned = scrubber.scrub_attributes({path[-1]: value}, path[:-1])[0][path[-1]]
        else:
            cleaned = scrubber.scrub_value(value, path)
        return value if cleaned is None else cleaned

    return logfire.ScrubbingOptions(extra_patterns=[_EVERY_KEY], callback=callback)


_watching: list[bool] = []


def watch_reconfigure(after: Callable[[], None]) -> None:
    """Call `after` each time `logfire.configure()` runs again (once installed, for the process).

    A later `logfire.configure()` (MassGen calls it in its own setup) swaps the SDK provider inside
    Logfire's proxy: the processor mastrace added to the old one would see no more spans, and
    everything after would miss mastrace's destinations while `force_flush()` still said complete.
    """
    if _watching:
        return
    try:
        import logfire
    except ImportError:
        return
    original = logfire.configure

    def configure(*args: Any, **kwargs: Any) -> Any:
        _configured_by_mastrace[0] = False  # configure_logfire() sets it back for its own call
        result = original(*args, **kwargs)
        try:
            after()
        except Exception:  # never let logfire's own configure fail because of mastrace
            warn_once("logfire.rehook", "mastrace: could not re-attach to Logfire's new provider")
        return result

    logfire.configure = configure
    _watching.append(True)


def is_logfire_provider(provider: object) -> bool:
    """Whether `provider` is the TracerProvider that `logfire.configure()` installs."""
    return type(provider).__module__.startswith("logfire.")


def hook_target(provider: object) -> object:
    """The SDK provider a span processor really lands on (Logfire swaps it on each `configure()`)."""
    return getattr(provider, "provider", provider) if is_logfire_provider(provider) else provider


class LogfireTracerProvider(trace.TracerProvider):
    """Logfire's provider, handing out tracers that keep mastrace's `logfire.span_type`."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: Attributes = None,
    ) -> trace.Tracer:
        # is_span_tracer=False is what Logfire uses for its own logs: it leaves span_type alone.
        inner = self.provider.get_tracer(
            instrumenting_module_name,
            instrumenting_library_version,
            schema_url,
            attributes,
            is_span_tracer=False,
        )
        return _SpanTypeTracer(inner)


class _SpanTypeTracer(trace.Tracer):
    """Sets `logfire.span_type = "span"` unless the span already says what it is."""

    def __init__(self, inner: trace.Tracer) -> None:
        self._inner = inner

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> trace.Span:
        attrs = dict(attributes) if attributes else {}
        attrs.setdefault(semconv.LOGFIRE_SPAN_TYPE, "span")
        return self._inner.start_span(
            name, context, kind, attrs, links, start_time, record_exception, set_status_on_exception
        )

    @contextmanager
    def start_as_current_span(  # type: ignore[override]
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[trace.Span]:
        span = self.start_span(
            name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
        )
        with trace.use_span(
            span,
            end_on_exit=end_on_exit,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        ) as current:
            yield current
