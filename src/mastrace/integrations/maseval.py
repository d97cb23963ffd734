"""Trace MASEval benchmark runs: one span per run, per task and per task repetition.

`MastraceCallback` is a MASEval `BenchmarkCallback`. Each repetition span carries what MASEval
collected for that repetition: the configuration snapshot (`mastrace.config`, with volatile
fields such as timestamps removed, and its stable `mastrace.config.hash`), the usage report
(`mastrace.usage`), the evaluation result (`maseval.eval`) and the `TaskExecutionStatus`
(`maseval.status`; anything but `success` also sets an error status and records the error).

Each repetition span is also a run of an experiment for `mastrace compare`: it carries
`mastrace.experiment.task_id`, `.repetition`, `.outcome` (MASEval's status) and `.name` (the
callback's `experiment`, else `configure(experiment=...)`), and every evaluator result becomes
`gen_ai.evaluation.result` events under it: numbers and booleans as scores, texts as labels, any
other value kept as JSON (`mastrace.evaluation.value`).

While a repetition runs, its span is the current span, so spans your agents open (through
mastrace, or any OpenTelemetry instrumentation) nest under it, also with `num_workers > 1` as
long as `mastrace.configure(propagate_threads=True)` (the default) carries the context into
MASEval's thread pool.

Usage totals are not repeated as `gen_ai.usage.*` attributes on these spans: the spans of the
model calls inside already carry them, and summing both would count every token twice.

Example:
    ```python
    import mastrace
    from mastrace.integrations.maseval import MastraceCallback

    mastrace.configure(service_name="my-benchmark")
    benchmark = MyBenchmark(callbacks=[MastraceCallback()], progress_bar=False)
    reports = benchmark.run(tasks, agent_data=config)
    ```
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from .. import semconv
from ..exceptions import ExportError
from ..mixins._experiment import record_under
from ..pipeline._snapshots_on_spans import SnapshotCache
from ..tracing._errors import handle_internal_errors
from ..tracing._state import STATE
from ..tracing._tracer import NoOpSpan, Span, get_tracer

try:
    from maseval import Benchmark, BenchmarkCallback, Task, TaskExecutionStatus
except ImportError as exc:
    raise ExportError(
        "the MASEval integration needs the `maseval` package: pip install 'mastrace[maseval]'"
    ) from exc

__all__ = ["MastraceCallback"]

_SUCCESS = TaskExecutionStatus.SUCCESS.value
_TRACER_NAME = "mastrace.integrations.maseval"
_OpenSpan = Span | NoOpSpan


class MastraceCallback(BenchmarkCallback):  # type: ignore[misc]
    """A MASEval callback that traces the run, each task and each task repetition.

    Spans: `maseval.run` (the benchmark run) → `maseval.task` (`maseval.task.id`) →
    `maseval.repetition` (`maseval.repeat_idx`, `maseval.status`, `mastrace.config`,
    `mastrace.config.hash`, `mastrace.usage`, `maseval.eval`).

    When `fail_on_*_error` makes `Benchmark.run()` raise, MASEval skips the end callbacks; call
    `close()` in a `finally` to end the open spans and restore the caller's context.

    Args:
        record_eval: Put each repetition's evaluation result on its span as `maseval.eval`, and
            each evaluator's values as `gen_ai.evaluation.result` events under it.
        experiment: The experiment's name on the repetition spans (default:
            `configure(experiment=...)`).
    """

    def __init__(self, *, record_eval: bool = True, experiment: str | None = None) -> None:
        super().__init__()
        self.record_eval = record_eval
        self.experiment = experiment
        self._tracer = get_tracer(_TRACER_NAME)
        self._snapshots = SnapshotCache()
        self._lock = threading.RLock()
        self._run: _OpenSpan | None = None
        self._tasks: dict[str, tuple[_OpenSpan, Counter[str]]] = {}
        self._repetitions: dict[tuple[str, int], _OpenSpan] = {}
        self._base: otel_context.Context | None = None
        self._token: object | None = None
        self._run_counts: Counter[str] = Counter()

    # -- MASEval hooks ---------------------------------------------------------------------------
    def on_event(self, event_name: str, **data: Any) -> None:
        """Record a MASEval event as a log-style span under the current span."""
        with handle_internal_errors("maseval on_event"):
            self._tracer.event(
                f"MASEval event: {event_name}",
                **{f"{semconv.MASEVAL_EVENT_PREFIX}{k}": v for k, v in data.items()},
            )

    def on_run_start(self, benchmark: Benchmark) -> None:
        """Open the `maseval.run` span."""
        with self._lock, handle_internal_errors("maseval on_run_start"):
            self.close()
            self._run_counts = Counter()
            attrs = {
                semconv.MASEVAL_BENCHMARK: type(benchmark).__name__,
                semconv.MASEVAL_N_TASK_REPEATS: getattr(benchmark, "n_task_repeats", None),
                semconv.MASEVAL_NUM_WORKERS: getattr(benchmark, "num_workers", None),
                semconv.LOGFIRE_MSG: f"MASEval run: {type(benchmark).__name__}",
            }
            self._run = self._open(semconv.SPAN_MASEVAL_RUN, None, attrs)

    def on_task_start(self, benchmark: Benchmark, task: Task) -> None:
        """Open the `maseval.task` span under the run span."""
        with self._lock, handle_internal_errors("maseval on_task_start"):
            task_id = str(task.id)
            attrs = {
                semconv.MASEVAL_TASK_ID: task_id,
                semconv.MASEVAL_TASK_QUERY: getattr(task, "query", None),
                semconv.LOGFIRE_MSG: f"MASEval task {task_id}",
            }
            self._tasks[task_id] = (self._open(semconv.SPAN_MASEVAL_TASK, self._run, attrs), Counter())

    def on_task_repeat_start(self, benchmark: Benchmark, task: Task, repeat_idx: int) -> None:
        """Open the `maseval.repetition` span and make it current while the repetition runs."""
        with self._lock, handle_internal_errors("maseval on_task_repeat_start"):
            task_id = str(task.id)
            parent = self._tasks.get(task_id, (self._run, None))[0]
            attrs = {
                semconv.MASEVAL_TASK_ID: task_id,
                semconv.MASEVAL_REPEAT_IDX: repeat_idx,
                semconv.MASTRACE_EXPERIMENT_TASK_ID: task_id,
                semconv.MASTRACE_EXPERIMENT_REPETITION: repeat_idx,
                # One conversation per repetition of a task: `<task id>/<repetition>`.
                semconv.GEN_AI_CONVERSATION_ID: f"{task_id}/{repeat_idx}",
                semconv.LOGFIRE_MSG: f"MASEval task {task_id} repetition {repeat_idx}",
            }
            experiment = self.experiment if self.experiment is not None else STATE.experiment
            if experiment is not None:
                attrs[semconv.MASTRACE_EXPERIMENT_NAME] = experiment
            self._repetitions[(task_id, repeat_idx)] = self._open(
                semconv.SPAN_MASEVAL_REPETITION, parent, attrs
            )

    def on_task_repeat_end(self, benchmark: Benchmark, report: dict[str, Any]) -> None:
        """Attach the repetition's config, usage, evaluation and status, and end its span."""
        with self._lock, handle_internal_errors("maseval on_task_repeat_end"):
            task_id, repeat_idx = str(report.get("task_id")), int(report.get("repeat_idx") or 0)
            span = self._repetitions.pop((task_id, repeat_idx), None)
            if span is None:
                return
            status = str(report.get("status") or _SUCCESS)
            self._annotate(span, report, status)
            span.end()
            self._run_counts[status] += 1
            task = self._tasks.get(task_id)
            if task is not None:
                task[1][status] += 1
            self._activate(task[0] if task is not None else self._run)

    def on_task_end(self, benchmark: Benchmark, task: Task, result: dict[str, Any]) -> None:
        """End the `maseval.task` span; it is an error when any of its repetitions failed."""
        with self._lock, handle_internal_errors("maseval on_task_end"):
            entry = self._tasks.pop(str(task.id), None)
            if entry is None:
                return
            span, counts = entry
            _finish_with_counts(span, counts, "repetitions")
            span.end()
            self._activate(self._run)

    def on_run_end(self, benchmark: Benchmark, results: list[dict[str, Any]]) -> None:
        """End the `maseval.run` span with the count of repetitions per status."""
        with self._lock, handle_internal_errors("maseval on_run_end"):
            if self._run is not None:
                self._run.set_attribute(semconv.MASEVAL_STATUS_COUNTS, dict(self._run_counts))
            self.close()

    def close(self, exc: BaseException | None = None) -> None:
        """End every span still open (recording `exc` on them) and restore the caller's context."""
        with self._lock:
            open_spans = [*self._repetitions.values(), *(s for s, _ in self._tasks.values()), self._run]
            self._repetitions.clear()
            self._tasks.clear()
            self._run = None
            for span in open_spans:
                if span is not None:
                    span.end(exc)
            self._restore()

    # -- spans and context -----------------------------------------------------------------------
    def _open(self, name: str, parent: _OpenSpan | None, attrs: Mapping[str, Any]) -> _OpenSpan:
        """Start `name` under `parent` (or the caller's context) and make it the current span."""
        if self._base is None:
            self._base = otel_context.get_current()
        self._activate(parent)
        span = self._tracer.start_span(name, attrs)
        self._activate(span)
        return span

    def _activate(self, span: _OpenSpan | None) -> None:
        if self._base is None:
            return
        otel_span = span.otel_span if span is not None else None
        ctx = trace.set_span_in_context(otel_span, self._base) if otel_span is not None else self._base
        token = otel_context.attach(ctx)
        if self._token is None:  # the first attach remembers what to restore at the end
            self._token = token

    def _restore(self) -> None:
        token, self._token, self._base = self._token, None, None
        if token is not None:
            with handle_internal_errors("maseval restore context"):
                otel_context.detach(token)  # type: ignore[arg-type]

    def _annotate(self, span: _OpenSpan, report: Mapping[str, Any], status: str) -> None:
        span.set_attribute(semconv.MASEVAL_STATUS, status)
        span.set_attribute(semconv.MASTRACE_EXPERIMENT_OUTCOME, status)
        config = report.get("config")
        if isinstance(config, Mapping) and config:
            snapshot = self._snapshots.snapshot(config)
            span.set_json_attribute(semconv.MASTRACE_CONFIG, snapshot.text)
            span.set_attribute(semconv.MASTRACE_CONFIG_HASH, snapshot.hash)
        usage = report.get("usage")
        if isinstance(usage, Mapping):
            span.set_attribute(semconv.MASTRACE_USAGE, {k: v for k, v in usage.items() if k != "metadata"})
        if self.record_eval and report.get("eval") is not None:
            span.set_attribute(semconv.MASEVAL_EVAL, report["eval"])
            _record_evaluations(span, report["eval"])
        if status != _SUCCESS:
            _record_error(span, status, report.get("error"))


def _record_evaluations(span: _OpenSpan, results: Any) -> None:
    """Each evaluator's values as evaluation events under the repetition's span."""
    parent = span.span_context
    if parent is None:
        return
    if isinstance(results, Mapping):
        results = [results]
    if not isinstance(results, (list, tuple)):
        return
    dicts = [(i, r) for i, r in enumerate(results) if isinstance(r, Mapping)]
    seen = Counter(str(k) for _, r in dicts for k in r)
    for index, result in dicts:
        for key, value in result.items():
            name = str(key) if seen[str(key)] == 1 else f"{index}.{key}"
            evaluator = f"evaluator[{index}]"
            if isinstance(value, (bool, int, float)):
                record_under(parent, name, score=value, evaluator=evaluator)
            elif isinstance(value, str):
                record_under(parent, name, label=value, evaluator=evaluator)
            elif value is not None:
                record_under(parent, name, evaluator=evaluator, value=value)


def _record_error(span: _OpenSpan, status: str, error: Any) -> None:
    error = error if isinstance(error, Mapping) else {}
    error_type = str(error.get("error_type") or status)
    message = str(error.get("error_message") or "")
    span.set_attribute(semconv.ERROR_TYPE, error_type)
    if message:
        span.set_attribute(semconv.MASEVAL_ERROR_MESSAGE, message)
    span.add_event(
        "exception",
        {
            semconv.EXCEPTION_TYPE: error_type,
            semconv.EXCEPTION_MESSAGE: message,
            semconv.EXCEPTION_STACKTRACE: str(error.get("traceback") or ""),
        },
    )
    span.set_status("error", f"{status}: {error_type}: {message}" if message else f"{status}: {error_type}")


def _finish_with_counts(span: _OpenSpan, counts: Counter[str], what: str) -> None:
    span.set_attribute(semconv.MASEVAL_STATUS_COUNTS, dict(counts))
    failed = sum(n for status, n in counts.items() if status != _SUCCESS)
    if failed:
        span.set_status("error", f"{failed} of {sum(counts.values())} {what} failed")
