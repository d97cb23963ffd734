"""Experiments on spans: which run is which task and repetition, and evaluation results.

`experiment_run()` opens one run of an experiment as its own trace (a root `experiment.run` span
with the experiment name, task id, repetition index, configuration snapshot and hash, and outcome),
so code that runs many tasks in one process gives one trace per run. `record_evaluation()` records
a score as the GenAI conventions' `gen_ai.evaluation.result` event: a zero-duration log-style span
under the evaluated run, in the current run or, from another process later, in the trace given.
"""

from __future__ import annotations

import contextvars
import random
from collections.abc import Mapping
from types import TracebackType
from typing import Any, NamedTuple

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from opentelemetry.util.types import AttributeValue

from .. import semconv
from ..pipeline._snapshots_on_spans import SnapshotCache
from ..tracing._errors import handle_internal_errors, log_internal_error
from ..tracing._state import STATE
from ..tracing._tracer import NoOpSpan, Span, get_tracer

__all__ = ["ExperimentRun", "experiment_run", "record_evaluation", "record_under"]

_TRACER = "mastrace.experiment"
_SNAPSHOTS = SnapshotCache()
_CURRENT: contextvars.ContextVar[ExperimentRun | None] = contextvars.ContextVar(
    "mastrace_experiment_run", default=None
)


class ExperimentRun:
    """One run of an experiment: use as `with mastrace.experiment_run(task=...) as run:`.

    Entering starts a new trace whose root span, `experiment.run`, is current inside the block
    (linked to the span that was current before, if any). Leaving ends it with its outcome:
    `success`, `error` when the block raised, or what `set_outcome()` said.
    """

    def __init__(
        self,
        task: str,
        repetition: int | None,
        experiment: str | None,
        config: Mapping[str, Any] | None,
        attributes: Mapping[str, Any] | None,
    ) -> None:
        self.task = str(task)
        self.repetition = int(repetition) if repetition is not None else STATE.repetition or 0
        self.experiment = experiment if experiment is not None else STATE.experiment
        self._config = config
        self._attributes = dict(attributes or {})
        self._span: Span | NoOpSpan | None = None
        self._outcome: str | None = None
        self._tokens: (
            tuple[contextvars.Token[otel_context.Context] | None, contextvars.Token[ExperimentRun | None]]
            | None
        ) = None

    @property
    def span(self) -> Span | NoOpSpan | None:
        """The run's root span (None before entering)."""
        return self._span

    @property
    def trace_id(self) -> str | None:
        """The run's trace id as 32 hex digits (give it to `record_evaluation` in another process)."""
        ctx = self._span.span_context if self._span is not None else None
        return None if ctx is None else format(ctx.trace_id, "032x")

    def set_outcome(self, outcome: str) -> None:
        """Say how the run ended (`success`, `error`, or your own word); the last call wins."""
        self._outcome = str(outcome)

    def record_evaluation(
        self,
        name: str,
        *,
        score: float | bool | None = None,
        label: str | None = None,
        explanation: str | None = None,
        evaluator: str | None = None,
        evaluator_version: str | None = None,
        evaluator_type: str | None = None,
    ) -> None:
        """Record an evaluation result of this run (see `mastrace.record_evaluation`)."""
        ctx = self._span.span_context if self._span is not None else None
        who = _Evaluator(evaluator, evaluator_version, evaluator_type)
        _record(name, score, label, explanation, who, None, ctx)

    def _root_attributes(self) -> tuple[dict[str, AttributeValue], dict[str, Any], str | None]:
        """The root span's own attributes (valid as they are), the user's (coerced, and winning),
        and the snapshot's JSON text when a configuration was given (put on the span as it is,
        declared as JSON: never parsed and encoded again)."""
        own: dict[str, AttributeValue] = {
            semconv.MASTRACE_EXPERIMENT_TASK_ID: self.task,
            semconv.MASTRACE_EXPERIMENT_REPETITION: self.repetition,
            semconv.LOGFIRE_MSG: f"Experiment run: task {self.task} repetition {self.repetition}",
        }
        user = dict(self._attributes)
        if type(self.experiment) is str:
            own[semconv.MASTRACE_EXPERIMENT_NAME] = self.experiment
        elif self.experiment is not None:  # the user's value, coerced as theirs are
            user.setdefault(semconv.MASTRACE_EXPERIMENT_NAME, self.experiment)
        config_text: str | None = None
        if self._config is not None:
            snap = _SNAPSHOTS.snapshot(self._config)
            config_text = own[semconv.MASTRACE_CONFIG] = snap.text
            own[semconv.MASTRACE_CONFIG_HASH] = snap.hash
        if semconv.MASTRACE_CONFIG in user:
            config_text = None
        return own, user, config_text

    def __enter__(self) -> ExperimentRun:
        previous = trace.get_current_span()
        links = [previous] if previous.get_span_context().is_valid else None
        # try/except rather than `handle_internal_errors` (a generator context manager) on every run.
        own: dict[str, AttributeValue] = {}
        user: dict[str, Any] = {}
        config_text: str | None = None
        try:
            own, user, config_text = self._root_attributes()
        except Exception as exc:
            log_internal_error("experiment run attributes", exc)
        # A new trace: the run's root has no parent, whatever span is current around it.
        # (With no span current, it is a root already: nothing to attach.)
        detach_token: contextvars.Token[otel_context.Context] | None = None
        if links is not None:
            detach_token = otel_context.attach(trace.set_span_in_context(trace.INVALID_SPAN))
        span = get_tracer(_TRACER)._span(semconv.SPAN_EXPERIMENT_RUN, own, user or None, links=links)
        span.__enter__()
        if config_text is not None and isinstance(span, Span):
            span._declare_json(semconv.MASTRACE_CONFIG, config_text)
        self._span = span
        self._tokens = (detach_token, _CURRENT.set(self))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        span, tokens, self._tokens = self._span, self._tokens, None
        if span is None or tokens is None:
            return
        outcome = self._outcome or (semconv.OUTCOME_ERROR if exc is not None else semconv.OUTCOME_SUCCESS)
        if isinstance(span, Span):  # the outcome and the end in one call into the SDK
            try:
                span._end_with({semconv.MASTRACE_EXPERIMENT_OUTCOME: outcome}, exc)
            except Exception as error:
                log_internal_error("span end", error)
        else:
            span.__exit__(exc_type, exc, tb)
        detach_token, run_token = tokens
        try:
            _CURRENT.reset(run_token)
            if detach_token is not None:
                otel_context.detach(detach_token)
        except Exception as exc:
            log_internal_error("experiment run context", exc)

    async def __aenter__(self) -> ExperimentRun:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)


def experiment_run(
    task: str,
    *,
    repetition: int | None = None,
    experiment: str | None = None,
    config: Mapping[str, Any] | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> ExperimentRun:
    """One run of an experiment (one task, one repetition) as its own trace.

    Args:
        task: The task's id: runs of one configuration on one task are its repetitions.
        repetition: The repetition index (0, 1, ...); default: `configure(repetition=...)` /
            `MASTRACE_REPETITION` / `mastrace run --repetition N`, else 0.
        experiment: The experiment's name (default: `configure(experiment=...)` /
            `MASTRACE_EXPERIMENT`).
        config: The run's configuration: put on the root span as `mastrace.config`, with its hash
            `mastrace.config.hash`, which leaves out what varies per task or repetition (task ids,
            repetition indices, derived seeds, timestamps, temporary paths).
        attributes: More attributes for the root span.

    Example:
        >>> import mastrace
        >>> for task in ["t1", "t2"]:  # doctest: +SKIP
        ...     for rep in range(3):
        ...         with mastrace.experiment_run(task, repetition=rep, config={"model": "m"}) as run:
        ...             run.record_evaluation("exact_match", score=True)
    """
    return ExperimentRun(task, repetition, experiment, config, attributes)


def _score(score: float | bool | None) -> tuple[float | None, bool]:
    if score is None:
        return None, False
    if isinstance(score, bool):
        return (1.0 if score else 0.0), True
    if isinstance(score, (int, float)):
        return float(score), False
    raise TypeError(f"score must be a number or a boolean, not {type(score).__name__}")


def _parse_id(text: str, digits: int, what: str) -> int:
    value = text.strip().lower()
    if len(value) != digits or any(c not in "0123456789abcdef" for c in value) or not int(value, 16):
        raise ValueError(f"{what} must be {digits} hex digits, not {text!r}")
    return int(value, 16)


def record_evaluation(
    name: str,
    *,
    score: float | bool | None = None,
    label: str | None = None,
    explanation: str | None = None,
    evaluator: str | None = None,
    evaluator_version: str | None = None,
    evaluator_type: str | None = None,
    trace_id: str | None = None,
    span_id: str | None = None,
) -> None:
    """Record an evaluation result as a `gen_ai.evaluation.result` event of a run.

    The event is a zero-duration log-style span with `gen_ai.evaluation.name`,
    `gen_ai.evaluation.score.value` (a boolean becomes 1.0 or 0.0, with the label `pass`/`fail`
    unless one is given), `gen_ai.evaluation.score.label`, `gen_ai.evaluation.explanation`, and the
    evaluator's name, version and type (`mastrace.evaluation.evaluator`, `.evaluator.version`,
    `.evaluator.type`: e.g. `code`, `llm_judge`, `human`). It goes under the current
    `experiment_run()` (else the current span); with `trace_id` (and optionally the run span's
    `span_id`), under that run in another trace: a judge run later, in another process, attaches its
    scores to the runs it judges.

    Raises:
        TypeError: `score` is neither a number nor a boolean.
        ValueError: `trace_id` is not 32 hex digits, or `span_id` not 16.
    """
    parent: SpanContext | None = None
    if trace_id is not None:
        tid = _parse_id(trace_id, 32, "trace_id")
        sid = _parse_id(span_id, 16, "span_id") if span_id is not None else random.getrandbits(64) or 1
        parent = SpanContext(tid, sid, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    elif span_id is not None:
        raise ValueError("span_id needs its trace_id")
    else:
        run = _CURRENT.get()
        if run is not None and run.span is not None:
            parent = run.span.span_context
    who = _Evaluator(evaluator, evaluator_version, evaluator_type)
    _record(name, score, label, explanation, who, None, parent)


def record_under(
    parent: SpanContext,
    name: str,
    *,
    score: float | bool | None = None,
    label: str | None = None,
    evaluator: str | None = None,
    value: Any = None,
) -> None:
    """An evaluation event under the span `parent` (for integrations); a `value` that is not a
    score nor a label is kept as JSON in `mastrace.evaluation.value`. Never raises."""
    with handle_internal_errors("record evaluation"):
        extra = {semconv.MASTRACE_EVALUATION_VALUE: value} if value is not None else None
        if isinstance(score, float) and score != score:  # NaN: no score
            score = None
        _record(name, score, label, None, _Evaluator(evaluator), extra, parent)


class _Evaluator(NamedTuple):
    name: str | None
    version: str | None = None
    kind: str | None = None


def _record(
    name: str,
    score: float | bool | None,
    label: str | None,
    explanation: str | None,
    evaluator: _Evaluator,
    extra: Mapping[str, Any] | None,
    parent: SpanContext | None,
) -> None:
    value, boolean = _score(score)
    if boolean and label is None:
        label = "pass" if score else "fail"
    shown = label if value is None else f"{value:g}" + (f" ({label})" if label is not None else "")
    # All built here, valid as they are (texts, a float, a boolean): no coercion pass.
    attrs: dict[str, AttributeValue] = {
        semconv.GEN_AI_EVALUATION_NAME: str(name),
        semconv.LOGFIRE_MSG: f"Evaluation {name}: {shown}",
    }
    if value is not None:
        attrs[semconv.GEN_AI_EVALUATION_SCORE_VALUE] = value
    if boolean:
        attrs[semconv.MASTRACE_EVALUATION_BOOLEAN] = True
    if label is not None:
        attrs[semconv.GEN_AI_EVALUATION_SCORE_LABEL] = str(label)
    if explanation is not None:
        attrs[semconv.GEN_AI_EVALUATION_EXPLANATION] = str(explanation)
    for key, given in (
        (semconv.MASTRACE_EVALUATION_EVALUATOR, evaluator.name),
        (semconv.MASTRACE_EVALUATION_EVALUATOR_VERSION, evaluator.version),
        (semconv.MASTRACE_EVALUATION_EVALUATOR_TYPE, evaluator.kind),
    ):
        if given is not None:
            attrs[key] = str(given)
    try:
        token = None
        # Under another span than the current one (inside a run, the run is usually current).
        if parent is not None and trace.get_current_span().get_span_context() != parent:
            token = otel_context.attach(trace.set_span_in_context(NonRecordingSpan(parent)))
        try:
            get_tracer(_TRACER)._log(semconv.GEN_AI_EVALUATION_RESULT, extra or {}, valid=attrs)
        finally:
            if token is not None:
                otel_context.detach(token)
    except Exception as exc:
        log_internal_error("record_evaluation", exc)
