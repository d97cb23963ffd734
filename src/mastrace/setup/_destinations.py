"""The destinations `configure()` sends spans (and GenAI metrics) to, built from its settings: the
local store, OTLP, the console, the application's own exporters, and the metrics derived from LLM
call spans. Each gets the span transform (limits, then scrubbing) on its export thread."""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.resources import Resource

from ..pipeline._pipeline import Destination

if TYPE_CHECKING:
    from ..scrubbing._shared import SharedScrubber
    from ._settings import Settings

__all__ = ["REMOTE_QUEUE_WITH_STORE", "build", "new_instance_id", "resource"]

_INSTANCE_ID = uuid.uuid4().hex


def new_instance_id() -> None:
    """A forked child is a service instance of its own."""
    global _INSTANCE_ID
    _INSTANCE_ID = uuid.uuid4().hex


def resource(settings: Settings) -> Resource:
    """The resource of the spans and metrics `configure()` sets up."""
    return Resource.create(
        {
            "service.name": settings.service_name,
            "service.instance.id": _INSTANCE_ID,
            "process.pid": os.getpid(),
        }
    )


REMOTE_QUEUE_WITH_STORE = 16_384
"""Spans an OTLP destination queues at most when a local store is on (~50 MB at ~3 KB a span)."""


def build(
    settings: Settings, scrubber: SharedScrubber | None, spans_resource: Sequence[Resource] = ()
) -> list[Destination]:
    """Every destination the settings name, built (and failing on a bad path or a missing extra)
    before `configure()` changes anything; `scrubber` is the configuration's one scrubber (None: no
    scrubbing). `spans_resource` holds the resource the spans will carry once `configure()` knows it
    (the export threads warm up with it; while it is empty, with one like it)."""
    limits = settings.limits
    # The scrubber and the transform are imported and built on an export thread as soon as it
    # starts (`Destination(prepare=...)`), right after `configure()`: the rule table's compilation
    # and the `hyperscan` import (0.1-5 s, by load) are over before the first batch, not paid by it.
    built: list[tuple[Callable[..., Any], Any]] = []
    lock = threading.Lock()

    def prepare() -> tuple[Callable[..., Any], Any]:
        if not built:
            with lock:
                if not built:
                    from ..pipeline._transform import prepare_span

                    built.append((prepare_span, scrubber.get() if scrubber is not None else None))
        return built[0]

    def transform(span: Any) -> Any:
        prepare_span, scrubber = built[0] if built else prepare()
        return prepare_span(span, scrubber, limits)

    # Then, once the spans that ended meanwhile are exported, each export thread does the first-use
    # work of its first batch on sample spans (`pipeline._warm`): caches filled, its own scratch space.
    # (An exporter's own first-use work is done only for those mastrace wrote: the local store's
    # encoder. An application's exporter is never handed a span that is not one.)
    def warm_up_for(
        encode: Callable[[Sequence[Any]], object] | None = None,
    ) -> Callable[[Callable[[], bool]], None]:
        def warm_up(busy: Callable[[], bool]) -> None:
            from ..pipeline._warm import warm_up

            warm_resource = spans_resource[0] if spans_resource else resource(settings)
            warm_up(transform, prepare()[1], warm_resource, encode, busy)

        return warm_up

    common: dict[str, Any] = {
        "max_queue": settings.max_queue_size,
        "interval": settings.flush_interval,
        "synchronous": settings.synchronous,
    }
    spans: dict[str, Any] = {**common, "prepare": prepare}
    out: list[Destination] = []
    if settings.local is not None:
        from ..store._writer import LocalStoreExporter

        # strict=False: an unwritable folder is one warning and counted failures, not an exception
        # in the application; the other destinations keep working.
        store = LocalStoreExporter(
            settings.local, strict=False, max_row_bytes=settings.max_row_bytes, retention=settings.retention
        )
        out.append(Destination("local", store, transform, warm_up=warm_up_for(store.warm_up), **spans))
    if settings.otlp:
        from ..exporters.otlp import build_otlp_exporter, guard_otlp_exporter

        exporter = guard_otlp_exporter(build_otlp_exporter(settings.otlp), settings.otlp)
        if settings.local is not None:  # what the collector took live, `mastrace push` will not resend
            from ..exporters.otlp import AckRecorder, destination_key
            from ..store._replay import acked_path

            writer = f"{socket.gethostname()}-{os.getpid()}"
            key = destination_key(settings.otlp)
            exporter = AckRecorder(exporter, acked_path(settings.local, key, writer), endpoint=key)
        remote = dict(spans)
        if settings.local is not None:
            # The store holds every span: a collector that hangs must not make the process hold
            # hundreds of MB of them too. What does not fit is counted as dropped; `push` sends it.
            remote["max_queue"] = min(settings.max_queue_size, REMOTE_QUEUE_WITH_STORE)
        destination = Destination("otlp", exporter, transform, warm_up=warm_up_for(), **remote)
        destination.exit_budget = settings.otlp_exit_timeout
        out.append(destination)
    if settings.console:
        from ..exporters.console import ConsoleExporter

        out.append(Destination("console", ConsoleExporter(), transform, warm_up=warm_up_for(), **spans))
    for i, exporter in enumerate(settings.exporters):
        name = f"{type(exporter).__name__}#{i}"
        out.append(Destination(name, exporter, transform, warm_up=warm_up_for(), **spans))
    metrics = _metrics_destination(settings, common)
    if metrics is not None:
        out.append(metrics)
    return out


def _metrics_destination(settings: Settings, common: dict[str, Any]) -> Destination | None:
    """The GenAI metrics, derived from LLM call spans on their own thread, when anything receives
    them: the OTLP endpoint, Logfire, or a MeterProvider the application set (see `genai_metrics`)."""
    from ..tracing._otel_private import meter_provider_is_set

    providers: list[Any] = []
    owned: list[Any] = []
    if settings.otlp:
        from ..exporters.genai_metrics import build_otlp_meter_provider

        owned.append(build_otlp_meter_provider(settings.otlp, resource(settings)))
    if settings.logfire or meter_provider_is_set():
        from opentelemetry import metrics

        providers.append(metrics.get_meter_provider())  # Logfire's once it is configured
    if not providers and not owned:
        return None
    from ..exporters.genai_metrics import GenAIMetricsExporter

    exporter = GenAIMetricsExporter([*owned, *providers], owned, exit_budget=settings.otlp_exit_timeout)
    destination = Destination("genai-metrics", exporter, **common)
    destination.counted = False
    destination.exit_budget = settings.otlp_exit_timeout
    return destination
