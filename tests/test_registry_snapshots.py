"""Configuration snapshots gathered again only when the registrations or a component changed."""

from __future__ import annotations

import dataclasses
import json
import threading
from typing import Any, ClassVar

import pytest

from mastrace import ConfigurableMixin, CoordinationMixin, Registry, StaticPricing, semconv
from mastrace.mixins import gather
from mastrace.testing import CapturedSpans


@dataclasses.dataclass
class Sampling:
    temperature: float = 0.2
    stop: list[str] = dataclasses.field(default_factory=list)


class Backend(ConfigurableMixin):
    def __init__(self) -> None:
        self.model = "gpt-4o-mini"
        self.sampling = Sampling()
        self.headers = {"x-team": "a"}
        self.client = object()  # not configuration: left out, compared by identity


def _other_backend() -> Backend:
    backend = Backend()
    backend.model = "gpt-4o"
    return backend


class Agent(ConfigurableMixin):
    def __init__(self, agent_id: str, backend: Backend) -> None:
        self.agent_id = agent_id
        self.backend = backend
        self.tools = ["search"]


class HandWritten:
    """A `gather_config()` of its own, reading state held elsewhere: gathered every time."""

    settings: ClassVar[dict[str, Any]] = {"mode": "fast"}

    def gather_config(self) -> dict[str, Any]:
        return dict(self.settings)


class Orchestrator(CoordinationMixin):
    def __init__(self, registry: Registry) -> None:
        self.mastrace_registry = registry


@pytest.fixture
def gathered(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the components whose default `gather_config()` ran, in order."""
    calls: list[str] = []
    real = gather.config_values

    def counting(obj: object, *args: Any) -> Any:
        calls.append(getattr(obj, "agent_id", type(obj).__name__))
        return real(obj, *args)

    monkeypatch.setattr(gather, "config_values", counting)
    return calls


@pytest.fixture
def setup() -> tuple[Registry, Agent, Backend]:
    registry = Registry(benchmark={"name": "unit"})
    backend = Backend()
    agent = Agent("agent_a", backend)
    registry.register("backends", "openai", backend)
    registry.register("agents", "agent_a", agent)
    return registry, agent, backend


def test_an_unchanged_registry_is_not_gathered_again(
    setup: tuple[Registry, Agent, Backend], gathered: list[str]
) -> None:
    """Repeated snapshots and hashes of unchanged components gather each configuration once."""
    registry, _, _ = setup
    first = registry.config_snapshot()
    count = len(gathered)
    assert count == 3  # the backend, the agent, and the backend again inside the agent
    for _ in range(5):
        assert registry.config_snapshot() is first
        assert registry.config_hash() == first.hash  # type: ignore[union-attr]
    assert len(gathered) == count


def test_the_hash_and_then_the_snapshot_share_one_gathering(
    setup: tuple[Registry, Agent, Backend], gathered: list[str]
) -> None:
    """`config_hash()` (before the process facts are known) and a later `config_snapshot()` gather once."""
    registry, _, _ = setup
    digest = registry.config_hash()
    snap = registry.config_snapshot()
    assert snap is not None and snap.hash == digest
    assert len(gathered) == 3


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda a, b: setattr(b, "model", "gpt-4o"), id="attribute reassigned"),
        pytest.param(lambda a, b: b.headers.update({"x-team": "b"}), id="dict changed in place"),
        pytest.param(lambda a, b: a.tools.append("browse"), id="list changed in place"),
        pytest.param(lambda a, b: setattr(b.sampling, "temperature", 0.9), id="dataclass field"),
        pytest.param(lambda a, b: b.sampling.stop.append("END"), id="list inside a dataclass"),
        pytest.param(lambda a, b: setattr(a, "backend", _other_backend()), id="nested component replaced"),
        pytest.param(lambda a, b: setattr(a, "seed_note", "new attribute"), id="attribute added"),
        pytest.param(lambda a, b: delattr(a, "tools"), id="attribute removed"),
    ],
)
def test_a_changed_component_gives_a_new_snapshot(
    setup: tuple[Registry, Agent, Backend], change: Any
) -> None:
    """Any change to what a component's configuration is made from is gathered and shows."""
    registry, agent, backend = setup
    before = registry.config_snapshot()
    change(agent, backend)
    after = registry.config_snapshot()
    assert after is not None and before is not None
    assert after.text != before.text
    expected = registry._snapshots.snapshot(registry.collect_all_configs())  # gathered afresh
    assert after == expected


def test_an_equal_text_rebuilt_is_not_a_change(
    setup: tuple[Registry, Agent, Backend], gathered: list[str]
) -> None:
    """An attribute set again to an equal immutable value does not make the registry gather again."""
    registry, agent, _ = setup
    first = registry.config_snapshot()
    count = len(gathered)
    agent.agent_id = "".join(["agent", "_a"])  # equal text, another object
    assert registry.config_snapshot() is first
    assert len(gathered) == count


def test_changed_registrations_give_a_new_snapshot(setup: tuple[Registry, Agent, Backend]) -> None:
    """Registering, replacing or clearing components, or entering a scope, gathers again."""
    registry, _, _ = setup
    base = registry.config_snapshot()
    registry.register("agents", "agent_b", Agent("agent_b", Backend()))
    added = registry.config_snapshot()
    assert added is not None and base is not None and "agent_b" in json.loads(added.text)["agents"]
    with registry.scope():
        registry.register("tools", "calc", Agent("calc", Backend()))
        scoped = registry.config_snapshot()
        assert scoped is not None and "calc" in json.loads(scoped.text)["tools"]
    registry.register("agents", "agent_b", Agent("agent_b2", Backend()))  # same key, new component
    replaced = registry.config_snapshot()
    assert replaced is not None and json.loads(replaced.text)["agents"]["agent_b"]["agent_id"] == "agent_b2"
    registry.clear()
    cleared = registry.config_snapshot()
    assert cleared is not None and json.loads(cleared.text)["agents"] == {}


def test_a_scope_sees_a_change_to_the_root_registrations(setup: tuple[Registry, Agent, Backend]) -> None:
    """A snapshot taken in a scope is gathered again when a component is registered at the root."""
    registry, _, _ = setup
    with registry.scope():
        before = registry.config_snapshot()
        # Registered from a thread that entered no scope: at the root, which the scope reads through.
        late = threading.Thread(target=registry.register, args=("tools", "late", Agent("late", Backend())))
        late.start()
        late.join()
        after = registry.config_snapshot()
    assert before is not None and after is not None
    assert "late" in json.loads(after.text)["tools"] and "late" not in json.loads(before.text)["tools"]


def test_a_hand_written_gather_config_is_gathered_every_time() -> None:
    """A component that does not say what its configuration is made from is never taken as unchanged."""
    registry = Registry(benchmark=False)
    component = HandWritten()
    registry.register("other", "hand", component)
    first = registry.config_snapshot()
    HandWritten.settings = {"mode": "slow"}  # state held outside the component
    try:
        second = registry.config_snapshot()
    finally:
        HandWritten.settings = {"mode": "fast"}
    assert first is not None and second is not None
    assert json.loads(first.text)["other"]["hand"]["mode"] == "fast"
    assert json.loads(second.text)["other"]["hand"]["mode"] == "slow"


def test_static_pricing_is_watched_through_its_table(gathered: list[str]) -> None:
    """A backend holding `StaticPricing` stays cacheable, and a changed price shows."""
    registry = Registry(benchmark=False)
    backend = Backend()
    backend.cost_calculator = StaticPricing({"m": {"input": 1.0, "output": 2.0}})  # type: ignore[attr-defined]
    registry.register("backends", "b", backend)
    first = registry.config_snapshot()
    registry.config_snapshot()
    assert len(gathered) == 1
    backend.cost_calculator._prices["m"]["input"] = 3.0  # type: ignore[attr-defined]
    second = registry.config_snapshot()
    assert first is not None and second is not None and second.hash != first.hash


def test_sessions_over_unchanged_components_gather_once(
    mastrace_spans: CapturedSpans, setup: tuple[Registry, Agent, Backend], gathered: list[str]
) -> None:
    """Three sessions gather the configuration once and carry one snapshot; a change shows on the next."""
    registry, _, backend = setup
    orch = Orchestrator(registry)
    for _ in range(3):
        with orch.coordination_session("t", ["agent_a"]):
            pass
    assert len(gathered) == 3  # one gathering: backend, agent, and the backend inside the agent
    backend.model = "gpt-4o"
    with orch.coordination_session("t", ["agent_a"]):
        pass
    sessions = mastrace_spans.by_name("coordination.session")
    configs = [s.attributes[semconv.MASTRACE_CONFIG] for s in sessions]  # type: ignore[index]
    hashes = [s.attributes[semconv.MASTRACE_CONFIG_HASH] for s in sessions]  # type: ignore[index]
    assert configs[0] == configs[1] == configs[2] != configs[3]
    assert hashes[0] == hashes[1] == hashes[2] != hashes[3]
    assert json.loads(configs[3])["backends"]["openai"]["model"] == "gpt-4o"  # type: ignore[arg-type]
    assert len(gathered) == 6
