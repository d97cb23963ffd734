"""Never break the user, never drop in silence: hostile values keep their span, internal errors stay
inside mastrace unless its own suite asks for them, and every span is stored or counted as dropped."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.trace import Link

import mastrace
from mastrace import ConfigurableMixin, CoordinationMixin, Registry
from mastrace.testing import CapturedSpans


# -- hostile values --------------------------------------------------------------------------------
class RaisingStr:
    def __str__(self) -> str:
        raise RuntimeError("closed handle")

    __repr__ = __str__


class RaisingGetattr:
    """A lazy proxy whose every attribute access fails."""

    def __getattribute__(self, name: str) -> Any:
        raise LookupError(name)


class RaisingClass:
    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise RuntimeError("no class")


class RaisingLen(list[int]):
    def __len__(self) -> int:
        raise ValueError("no len")

    def __iter__(self) -> Any:
        raise ValueError("no iter")


class RaisingEq:
    def __eq__(self, other: object) -> bool:
        raise TypeError("no eq")

    __hash__ = None  # type: ignore[assignment]


class BadMapping(dict[str, Any]):
    def items(self) -> Any:
        raise RuntimeError("items")

    def __iter__(self) -> Any:
        raise RuntimeError("iter")


class BadError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message")


def _cycle() -> list[Any]:
    loop: list[Any] = [1]
    loop.append(loop)
    return loop


ODD = [
    RaisingStr(),
    RaisingGetattr(),
    RaisingClass(),
    RaisingLen(),
    RaisingEq(),
    BadMapping(a=1),
    _cycle(),
    "\ud800",
    "a\udfffb",
    "\x00\x1b[2J\u202e",
    2**200,
    -(2**80),
    math.nan,
    math.inf,
    b"\xff\xfe",
    bytearray(b"abc"),
    {1, 2, (3, 4)},
    frozenset({"x"}),
    {(1, 2): "tuple key", None: "none key", RaisingStr(): "bad key"},
    [RaisingStr(), "\ud800", 2**100],
    (None, None),
    ("mixed", 1, 2.5, None),
    type,
    print,
    object(),
    BadError("x"),
]


def _odd(i: int) -> Any:
    return ODD[i]  # by index: hypothesis describes its strategies with repr(), which these break


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**130), max_value=2**130)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.binary(max_size=10)
    | st.integers(min_value=0, max_value=len(ODD) - 1).map(_odd)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=3)
    ),
    max_leaves=6,
)


# -- markers, not lost spans -----------------------------------------------------------------------
def test_unreadable_values_become_markers(mastrace_spans: CapturedSpans) -> None:
    tracer = mastrace.get_tracer("t")
    with tracer.span("kept", attributes={"a": RaisingGetattr(), "b": RaisingClass(), "ok": 1}) as span:
        span.set_attribute("c", RaisingGetattr())
    attrs = mastrace_spans.attributes("kept")
    assert attrs["ok"] == 1
    assert attrs["a"].startswith("<unreadable: ") or attrs["a"].startswith("<")
    assert attrs["c"].startswith("<")


def test_a_mapping_that_cannot_be_read_keeps_the_span(mastrace_spans: CapturedSpans) -> None:
    tracer = mastrace.get_tracer("t")
    with tracer.span("kept", attributes=BadMapping(a=1)):
        pass
    tracer.event("event kept", **{"x": RaisingStr()})
    assert mastrace_spans.attributes("kept")["mastrace.unreadable_attributes"] == "<unreadable: RuntimeError>"
    assert mastrace_spans.one("event kept") is not None


def test_an_exception_whose_message_raises_is_recorded(mastrace_spans: CapturedSpans) -> None:
    with pytest.raises(BadError), mastrace.get_tracer("t").span("failing"):
        raise BadError("x")
    span = mastrace_spans.one("failing")
    assert span.status.description == "BadError: <unreadable: RuntimeError>"
    assert [e.name for e in span.events] == ["exception"]


def test_hostile_link_attributes_keep_the_span(mastrace_spans: CapturedSpans) -> None:
    tracer = mastrace.get_tracer("t")
    with tracer.span("target") as target:
        pass
    ctx = target.span_context
    assert ctx is not None
    with tracer.span("linking", links=[Link(ctx, {"why": RaisingGetattr(), "n": 2**100})]):  # type: ignore[dict-item]
        pass
    (link,) = mastrace_spans.one("linking").links
    assert link.attributes is not None and link.attributes["n"] == str(2**100)


def test_one_bad_config_field_keeps_the_rest_of_the_snapshot(mastrace_spans: CapturedSpans) -> None:
    class Component(ConfigurableMixin):
        def gather_config(self) -> dict[str, Any]:
            return {**super().gather_config(), "path": "/tmp/\udcff.yaml", "model": "m", "odd": RaisingStr()}

    class Orchestrator(CoordinationMixin):
        def __init__(self, registry: Registry) -> None:
            self.mastrace_registry = registry

    registry = Registry(benchmark=False)
    registry.register("models", "main", Component())
    with Orchestrator(registry).coordination_session("task", ["a"]):
        pass
    config = mastrace_spans.attributes("coordination.session")["mastrace.config"]
    config = json.loads(config) if isinstance(config, str) else config
    (model,) = config["models"].values()
    assert model["model"] == "m" and model["path"] == "/tmp/\ufffd.yaml" and model["odd"].startswith("<")


def test_internal_errors_raise_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    from mastrace.tracing._errors import handle_internal_errors

    with pytest.raises(ZeroDivisionError), handle_internal_errors("asked"):
        1 / 0  # noqa: B018
    monkeypatch.delenv("MASTRACE_RAISE_INTERNAL")
    with handle_internal_errors("not asked"):
        1 / 0  # noqa: B018


def test_a_users_test_suite_is_not_failed_by_mastrace(tmp_path: Path) -> None:
    """A user's pytest run whose test merely runs traced code passes, and nothing of ours is printed."""
    (tmp_path / "test_user.py").write_text(
        textwrap.dedent(
            """
            import mastrace

            class BadError(Exception):
                def __str__(self):
                    raise RuntimeError("no message")

            class Proxy:
                def __getattribute__(self, name):
                    raise LookupError(name)

            def test_traced_code(tmp_path):
                mastrace.configure(local=tmp_path / "store")
                tracer = mastrace.get_tracer("user")
                with tracer.span("work", attributes={"p": Proxy(), "s": "\\ud800"}) as span:
                    span.set_attribute("q", Proxy())
                    tracer.event("note", value=Proxy())
                try:
                    with tracer.span("failing"):
                        raise BadError()
                except BadError:
                    pass
                result = mastrace.force_flush(timeout=10)
                assert result.exported == 3 and result.dropped == 0 and result.failed == 0
                mastrace.shutdown()
            """
        )
    )
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("MASTRACE_", "OTEL_"))}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:phoenix",
            "-W",
            "error:::mastrace",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
    assert "mastrace" not in proc.stdout + proc.stderr


# -- the count: created == stored + dropped --------------------------------------------------------
class Component(ConfigurableMixin):
    def __init__(self, value: Any) -> None:
        self.value = value

    def gather_config(self) -> dict[str, Any]:
        return {**super().gather_config(), "field": self.value}


class Orchestrator(CoordinationMixin):
    def __init__(self, registry: Registry) -> None:
        self.mastrace_registry = registry


def _placements(tracer: mastrace.Tracer, value: Any) -> int:
    """Put `value` in 8 placements; return how many spans were created (9: a link has a target)."""
    with tracer.span("attributes", attributes={"v": value, "nested": {"v": value}}):
        pass
    with tracer.span("set_attribute") as span:
        span.set_attribute("v", value)
        span.set_attributes({"w": value})
    tracer.event("event", v=value)
    with tracer.span("link target") as target:
        pass
    ctx = target.span_context
    links = [Link(ctx, {"v": value})] if ctx is not None else []
    with tracer.span("link", links=links):
        pass
    try:
        with tracer.span("exception"):
            raise ValueError(value)
    except ValueError:
        pass
    with tracer.span("status") as span:
        span.set_status("error", value)
    with tracer.span(value):  # the span name
        pass
    registry = Registry(benchmark=False)
    registry.register("models", "main", Component(value))
    with Orchestrator(registry).coordination_session("config", ["a"]):
        pass
    return 9


def _stored(store: Path) -> int:
    segments = sorted((store / "segments").rglob("*.ndjson"))
    assert segments
    return sum(1 for f in segments for line in f.read_bytes().splitlines() if line.strip())


def test_no_hostile_value_loses_a_span_uncounted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Property: over 1,000+ hostile values in 8 placements, created == stored + counted-dropped.

    Internal errors are not raised here, as in a user's process: what fails must still be counted.
    """
    monkeypatch.setenv("MASTRACE_RAISE_INTERNAL", "0")
    store = tmp_path / "store"
    mastrace.configure(local=store, service_name="fuzz")
    tracer = mastrace.get_tracer("fuzz")
    created = 0
    examples = 0

    @settings(
        max_examples=1_100,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(VALUES)
    def run(value: Any) -> None:
        nonlocal created, examples
        examples += 1
        created += _placements(tracer, value)

    run()
    result = mastrace.force_flush(timeout=60)
    mastrace.shutdown()
    stored = _stored(store)
    assert examples >= 1_000 and created == 9 * examples
    assert result.complete and result.failed == 0
    assert created == stored + result.dropped, (created, stored, result)
    assert result.dropped == 0  # and in fact none is lost


def test_coordination_records_with_hostile_labels_never_raise(
    mastrace_spans: CapturedSpans, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer label that cannot be a key (a list) reaches no caller as an error (as in a user's process,
    where internal errors are not raised): the records that can be made are made."""
    monkeypatch.delenv("MASTRACE_RAISE_INTERNAL")

    class Orchestrator(CoordinationMixin):
        pass

    orchestrator = Orchestrator()
    with orchestrator.coordination_session("task", ["a", "b"]):
        orchestrator.record_answer("a", ["not", "hashable"])  # type: ignore[arg-type]
        orchestrator.record_vote("b", "a", ["not", "hashable"])  # type: ignore[arg-type]
        orchestrator.record_winner("a", ["not", "hashable"])  # type: ignore[arg-type]
        orchestrator.record_final_answer("a")
    assert mastrace_spans.by_name("Final answer from a")
