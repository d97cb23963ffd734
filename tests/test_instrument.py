"""`@mastrace.instrument` (`tracing/_instrument.py`): every callable kind, templates, recording, errors."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncGenerator, Callable, Generator
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

import mastrace
from mastrace import semconv
from mastrace.testing import CapturedSpans, capture_spans


class Agent:
    """An agent with one decorated method of every kind."""

    label = "cls-label"

    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id

    @mastrace.instrument("agent.{self.agent_id}.round_{round}")
    def run(self, round: int, round_type: str = "initial_answer") -> str:
        return f"{self.agent_id}:{round}:{round_type}"

    @mastrace.instrument("agent.{self.agent_id}.async_round_{round}")
    async def run_async(self, round: int) -> str:
        await asyncio.sleep(0)
        return f"{self.agent_id}:{round}"

    @mastrace.instrument("agent.{self.agent_id}.stream_{round}")
    def stream(self, round: int) -> Generator[int, None, None]:
        yield round
        yield round + 1

    @mastrace.instrument("agent.{self.agent_id}.astream_{round}")
    async def astream(self, round: int) -> AsyncGenerator[int, None]:
        yield round
        await asyncio.sleep(0)
        yield round + 1

    @mastrace.instrument("classmethod.{cls.label}.{x}")
    @classmethod
    def outer_classmethod(cls, x: int) -> str:
        return f"{cls.label}:{x}"

    @classmethod
    @mastrace.instrument("inner_classmethod.{cls.label}.{x}")
    def inner_classmethod(cls, x: int) -> str:
        return f"{cls.label}:{x}"

    @mastrace.instrument("staticmethod.{x}")
    @staticmethod
    def outer_staticmethod(x: int) -> int:
        return x * 2

    @staticmethod
    @mastrace.instrument("inner_staticmethod.{x}")
    def inner_staticmethod(x: int) -> int:
        return x * 3


def plain(a: int, b: int = 2, *rest: int, c: str = "c", **extra: Any) -> int:
    """Add things up."""
    return a + b + sum(rest) + len(c) + len(extra)


async def coroutine(a: int) -> int:
    await asyncio.sleep(0)
    return a


def generator(n: int) -> Generator[int, None, None]:
    yield from range(n)


async def async_generator(n: int) -> AsyncGenerator[int, None]:
    for i in range(n):
        yield i


async def _collect(agen: AsyncGenerator[int, None]) -> list[int]:
    return [x async for x in agen]


# --- signatures and kinds --------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [plain, coroutine, generator, async_generator])
def test_signature_and_kind_are_preserved(fn: Callable[..., Any]) -> None:
    """The decorated callable keeps its signature, name, docstring and inspect kind."""
    decorated = mastrace.instrument(fn)
    assert inspect.signature(decorated) == inspect.signature(fn)
    assert (decorated.__name__, decorated.__doc__, decorated.__wrapped__) == (fn.__name__, fn.__doc__, fn)
    checks = (inspect.iscoroutinefunction, inspect.isasyncgenfunction, inspect.isgeneratorfunction)
    assert [check(decorated) for check in checks] == [check(fn) for check in checks]


def test_method_signatures_are_preserved() -> None:
    """Methods, classmethods and staticmethods keep their bound signatures and kinds."""
    agent = Agent("a")
    assert (
        str(inspect.signature(agent.run)) == "(round: 'int', round_type: 'str' = 'initial_answer') -> 'str'"
    )
    assert inspect.iscoroutinefunction(agent.run_async)
    assert inspect.isgeneratorfunction(agent.stream)
    assert inspect.isasyncgenfunction(agent.astream)
    assert str(inspect.signature(Agent.outer_classmethod)) == "(x: 'int') -> 'str'"
    assert str(inspect.signature(Agent.outer_staticmethod)) == "(x: 'int') -> 'int'"


# --- name templates --------------------------------------------------------------------------------
def test_default_name_is_the_qualified_name(mastrace_spans: CapturedSpans) -> None:
    """Without a template the span is named after the function's qualified name."""
    assert mastrace.instrument(plain)(1) == plain(1)
    assert mastrace_spans.names() == ["plain"]


def test_template_uses_defaults_positionals_and_kwargs(mastrace_spans: CapturedSpans) -> None:
    """Template fields are filled from positional args, keyword args and defaults alike."""
    traced = mastrace.instrument("plain.{a}.{b}.{c}.{rest}.{extra}")(plain)
    traced(1)
    traced(1, 5, 7, c="xy", k=1)
    traced(a=3, c="z")
    assert mastrace_spans.names() == ["plain.1.2.c.().{}", "plain.1.5.xy.(7,).{'k': 1}", "plain.3.2.z.().{}"]


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda a: a.run(1), "agent.agent_a.round_1"),
        (lambda a: a.run(round=2, round_type="voting"), "agent.agent_a.round_2"),
        (lambda a: Agent.run(a, 3), "agent.agent_a.round_3"),
        (lambda a: Agent.outer_classmethod(4), "classmethod.cls-label.4"),
        (lambda a: a.outer_classmethod(5), "classmethod.cls-label.5"),
        (lambda a: Agent.inner_classmethod(6), "inner_classmethod.cls-label.6"),
        (lambda a: Agent.outer_staticmethod(7), "staticmethod.7"),
        (lambda a: a.outer_staticmethod(8), "staticmethod.8"),
        (lambda a: Agent.inner_staticmethod(9), "inner_staticmethod.9"),
        (lambda a: a.inner_staticmethod(10), "inner_staticmethod.10"),
    ],
    ids=[
        "method",
        "method-kwargs",
        "method-via-class",
        "classmethod",
        "classmethod-via-instance",
        "classmethod-inner",
        "staticmethod",
        "staticmethod-via-instance",
        "staticmethod-inner",
        "staticmethod-inner-via-instance",
    ],
)
def test_method_templates_bind_self_and_cls(
    call: Callable[[Agent], Any], expected: str, mastrace_spans: CapturedSpans
) -> None:
    """`self` and `cls` fields resolve however a method, classmethod or staticmethod is called."""
    call(Agent("agent_a"))
    assert mastrace_spans.names() == [expected]


def test_method_results_are_unchanged(mastrace_spans: CapturedSpans) -> None:
    """Decorated methods of each kind return what the undecorated body returns."""
    agent = Agent("a")
    assert agent.run(1) == "a:1:initial_answer"
    assert Agent.outer_classmethod(2) == "cls-label:2"
    assert Agent.inner_staticmethod(3) == 9
    assert asyncio.run(agent.run_async(4)) == "a:4"
    assert list(agent.stream(5)) == [5, 6]
    assert asyncio.run(_collect(agent.astream(7))) == [7, 8]
    assert mastrace_spans.names() == [
        "agent.a.round_1",
        "classmethod.cls-label.2",
        "inner_staticmethod.3",
        "agent.a.async_round_4",
        "agent.a.stream_5",
        "agent.a.astream_7",
    ]


def test_unknown_template_parameter_raises_at_decoration() -> None:
    """A template naming a parameter the function lacks raises ConfigError when decorating."""
    with pytest.raises(mastrace.ConfigError, match="agent_id"):
        mastrace.instrument("agent.{agent_id}")(plain)


def test_positional_template_field_raises_at_decoration() -> None:
    """A bare `{}` field raises ConfigError when decorating."""
    with pytest.raises(mastrace.ConfigError, match="positional"):
        mastrace.instrument("agent.{}")(plain)


def test_unknown_parameter_error_is_a_value_error() -> None:
    """ConfigError is a ValueError, so callers that catch ValueError catch it too."""
    with pytest.raises(ValueError):
        mastrace.instrument("x.{nope}")(coroutine)


# --- each kind records one span ---------------------------------------------------------------------
def test_coroutine_span_covers_the_await(mastrace_spans: CapturedSpans) -> None:
    """An instrumented coroutine opens its span when awaited and returns the result."""
    traced = mastrace.instrument("co.{a}")(coroutine)
    pending = traced(5)
    assert mastrace_spans.names() == []
    assert asyncio.run(pending) == 5
    assert mastrace_spans.names() == ["co.5"]


def test_generator_span_covers_the_iteration(mastrace_spans: CapturedSpans) -> None:
    """An instrumented generator yields everything and records one completed span."""
    assert list(mastrace.instrument("gen.{n}")(generator)(3)) == [0, 1, 2]
    assert mastrace_spans.attributes("gen.3")[semconv.MASTRACE_STREAM_COMPLETED] is True


def test_async_generator_span_covers_the_iteration(mastrace_spans: CapturedSpans) -> None:
    """An instrumented async generator yields everything and records one completed span."""
    assert asyncio.run(_collect(mastrace.instrument("agen.{n}")(async_generator)(3))) == [0, 1, 2]
    assert mastrace_spans.attributes("agen.3")[semconv.MASTRACE_STREAM_COMPLETED] is True


def test_nested_calls_nest_spans(mastrace_spans: CapturedSpans) -> None:
    """An instrumented function called from another one becomes its child span."""
    inner = mastrace.instrument("inner")(plain)

    @mastrace.instrument("outer")
    def outer() -> int:
        return inner(1)

    outer()
    assert mastrace_spans.parent_of(mastrace_spans.one("inner")) is mastrace_spans.one("outer")


# --- recording -------------------------------------------------------------------------------------
def test_record_args_excludes_self(mastrace_spans: CapturedSpans) -> None:
    """`record_args=True` records the bound arguments, defaults included, without `self`."""

    class Worker:
        @mastrace.instrument("work", record_args=True)
        def work(self, job: str, retries: int = 3) -> None:
            return None

    Worker().work("parse")
    assert mastrace_spans.attributes("work")[semconv.MASTRACE_ARGS] == {"job": "parse", "retries": 3}


def test_record_return_records_the_result(mastrace_spans: CapturedSpans) -> None:
    """`record_return=True` records the return value of sync and async functions."""
    mastrace.instrument("sync", record_return=True)(plain)(1)
    asyncio.run(mastrace.instrument("async", record_return=True)(coroutine)(7))
    assert mastrace_spans.attributes("sync")[semconv.MASTRACE_RETURN] == plain(1)
    assert mastrace_spans.attributes("async")[semconv.MASTRACE_RETURN] == 7


def test_without_recording_no_args_or_return(mastrace_spans: CapturedSpans) -> None:
    """By default neither arguments nor the return value are recorded."""
    mastrace.instrument("quiet")(plain)(1)
    attrs = mastrace_spans.attributes("quiet")
    assert semconv.MASTRACE_ARGS not in attrs and semconv.MASTRACE_RETURN not in attrs


def test_constant_attributes_on_every_span(mastrace_spans: CapturedSpans) -> None:
    """`attributes=` are set on every span the decorator records."""
    traced = mastrace.instrument("tagged", attributes={semconv.MASSGEN_BACKEND: "openai"})(plain)
    traced(1)
    traced(2)
    assert [s.attributes[semconv.MASSGEN_BACKEND] for s in mastrace_spans.by_name("tagged")] == ["openai"] * 2  # type: ignore[index]


def test_custom_tracer_sets_the_scope(mastrace_spans: CapturedSpans) -> None:
    """`tracer=` records the spans under that tracer's instrumentation scope."""
    mastrace.instrument("scoped", tracer=mastrace.get_tracer("my_agents"))(plain)(1)
    scope = mastrace_spans.one("scoped").instrumentation_scope
    assert scope is not None and scope.name == "my_agents"


# --- exceptions ------------------------------------------------------------------------------------
class Boom(Exception):
    """A distinctive exception."""


def _raise(exc: BaseException) -> None:
    raise exc


async def _raise_async(exc: BaseException) -> None:
    await asyncio.sleep(0)
    raise exc


def _raise_gen(exc: BaseException) -> Generator[int, None, None]:
    yield 1
    raise exc


async def _raise_agen(exc: BaseException) -> AsyncGenerator[int, None]:
    yield 1
    raise exc


def _drive(kind: str, fn: Callable[..., Any], exc: BaseException) -> None:
    if kind == "sync":
        fn(exc)
    elif kind == "async":
        asyncio.run(fn(exc))
    elif kind == "gen":
        list(fn(exc))
    else:
        asyncio.run(_collect(fn(exc)))


@pytest.mark.parametrize(
    ("kind", "fn"), [("sync", _raise), ("async", _raise_async), ("gen", _raise_gen), ("agen", _raise_agen)]
)
def test_exceptions_propagate_unchanged_and_mark_error(
    kind: str, fn: Callable[..., Any], mastrace_spans: CapturedSpans
) -> None:
    """The very exception object reaches the caller and the span is ERROR with an exception event."""
    exc = Boom("nope")
    with pytest.raises(Boom) as info:
        _drive(kind, mastrace.instrument("failing")(fn), exc)
    assert info.value is exc
    span = mastrace_spans.one("failing")
    assert span.status.status_code is StatusCode.ERROR
    assert [e.attributes["exception.type"] for e in span.events] == [f"{__name__}.Boom"]  # type: ignore[index]


def test_template_failure_at_call_time_never_breaks_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside strict test mode, a field that fails to format falls back to the template; the call runs."""
    monkeypatch.setenv("MASTRACE_RAISE_INTERNAL", "0")
    traced = mastrace.instrument("round.{agent.missing}")(lambda agent: agent.agent_id)
    with capture_spans() as spans:
        assert traced(Agent("x")) == "x"
    assert spans.names() == ["round.{agent.missing}"]
