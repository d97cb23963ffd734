"""An export thread's warm-up: the first-use work of its first batch, done before that batch.

Once an export thread is prepared (the transform imported, the scrubber built), its first real
export still did work no later export does: the resource scrubbed and encoded once (both cached by
identity), every attribute key matched against the secret names once (cached), the thread's own
Hyperscan scratch space cloned, the store encoder's rarer paths run for the first time. `warm_up`
does that work on sample spans that go through the real transform and the exporter's encoder
(`warm_up(spans)`, when it has one: the local store's) and reach nothing else: no exporter's
`export`, no queue, no count. What it leaves behind are the caches a real span would have filled;
what a span looks like when it leaves does not change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import Status, StatusCode

from .. import semconv
from ..scrubbing._engine import Scrubber

__all__ = ["sample_spans", "warm_up"]

_SCOPE = "mastrace"


def sample_spans(resource: Resource, *, secrets: bool = True) -> list[ReadableSpan]:
    """Two finished spans shaped like an application's, made by an SDK provider of their own (no
    processor, not the global one): a root with ordinary attributes, and a child with a JSON document
    and an exception, and (with `secrets`) a secret-named key and a secret-shaped value. Empty when
    the SDK is disabled (`OTEL_SDK_DISABLED`): its spans record nothing."""
    provider = TracerProvider(resource=resource, sampler=ALWAYS_ON, shutdown_on_exit=False)
    tracer = provider.get_tracer(_SCOPE)
    root = tracer.start_span(
        semconv.SPAN_COORDINATION_SESSION,
        context=Context(),  # not the application's current span, whatever this thread inherited
        attributes={
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OP_INVOKE_AGENT,
            semconv.GEN_AI_AGENT_ID: "agent_a",
            semconv.GEN_AI_REQUEST_MODEL: "gpt-4o-mini",
            semconv.GEN_AI_REQUEST_TEMPERATURE: 0.7,
            semconv.GEN_AI_REQUEST_STREAM: False,
            semconv.GEN_AI_RESPONSE_FINISH_REASONS: ("stop",),
            semconv.GEN_AI_USAGE_INPUT_TOKENS: 128,
            semconv.MASSGEN_ROUND: 1,
            "task": "Summarise what the other agents found, in two sentences.",
        },
    )
    attributes: dict[str, str] = {semconv.MASTRACE_CONFIG: '{"model": "gpt-4o-mini", "retries": [1]}'}
    if secrets:
        attributes[semconv.MASTRACE_CONFIG] = '{"model": "gpt-4o-mini", "api_key": "warm-up-value-0"}'
        attributes["api_key"] = "warm-up-value-0"
        attributes["command"] = "run --password=warm-up-value-0"
    with_parent = tracer.start_span(
        "Tool execution: search", context=trace.set_span_in_context(root, Context()), attributes=attributes
    )
    with_parent.add_event(  # as `record_exception` puts it, with no path of this machine in it
        "exception",
        {
            semconv.EXCEPTION_TYPE: "RuntimeError",
            semconv.EXCEPTION_MESSAGE: "the tool gave up",
            semconv.EXCEPTION_STACKTRACE: 'Traceback (most recent call last):\n  File "t.py"\nRuntimeError',
        },
    )
    with_parent.set_status(Status(StatusCode.ERROR, "warm-up failed on purpose"))
    with_parent.end()
    root.end()
    return [span for span in (with_parent, root) if isinstance(span, ReadableSpan)]


def warm_up(
    transform: Callable[[ReadableSpan], ReadableSpan],
    scrubber: Scrubber | None,
    resource: Resource,
    encode: Callable[[Sequence[ReadableSpan]], object] | None = None,
    busy: Callable[[], bool] = lambda: False,
) -> None:
    """Run the sample spans (with the spans' real `resource`) through `transform` and `encode` (the
    exporter's encoder, which must write nothing), and match every attribute key mastrace's own spans
    use against the secret names. Run it on the export thread: Hyperscan's scratch space is per thread.
    Returns early, between steps, once `busy()` says real work waits: a warm-up never delays a span."""
    # A scrubbing callback is the application's code: it must see only its own spans' secrets.
    secrets = scrubber is not None and scrubber._callback is None
    spans = []
    for span in sample_spans(resource, secrets=secrets):
        if busy():
            return
        spans.append(transform(span))
    if encode is not None and not busy():
        encode(spans)
    if scrubber is not None:
        for key in _KEYS:
            if busy():
                return
            scrubber.key_match(key)


_KEYS: tuple[str, ...] = tuple(
    value
    for name, value in vars(semconv).items()
    if name.isupper() and isinstance(value, str) and "." in value and " " not in value
)
"""The attribute keys of `semconv` (the spans mastrace's own code makes carry these)."""
