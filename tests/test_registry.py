"""The component registry: scopes, collection shapes, usage deltas, snapshots, benchmark section."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import mastrace
from mastrace import (
    ConfigError,
    ConfigurableMixin,
    Registry,
    TokenUsage,
    TraceableMixin,
    Usage,
    UsageTrackableMixin,
)
from mastrace.pipeline import _snapshots_on_spans as snapshots

SECTIONS = {
    "metadata",
    "agents",
    "models",
    "tools",
    "simulators",
    "callbacks",
    "environment",
    "user",
    "other",
}


class Component(TraceableMixin, ConfigurableMixin, UsageTrackableMixin):
    def __init__(self, label: str, **settings: Any) -> None:
        self.label = label
        self.settings = settings

    def gather_config(self) -> dict[str, Any]:
        return {**super().gather_config(), "label": self.label, **self.settings}

    def gather_traces(self) -> dict[str, Any]:
        return {**super().gather_traces(), "label": self.label}

    def call(self, tokens: int, cost: float = 0.0) -> TokenUsage:
        usage = TokenUsage(input_tokens=tokens, output_tokens=tokens // 2, cost=cost)
        self.record_usage(usage)
        return usage


class Broken(TraceableMixin, ConfigurableMixin, UsageTrackableMixin):
    def gather_config(self) -> dict[str, Any]:
        raise RuntimeError("config exploded")

    def gather_traces(self) -> dict[str, Any]:
        raise KeyError("traces")

    def gather_usage(self) -> Usage:
        raise ValueError("usage exploded")


class MasevalStyleCounter(UsageTrackableMixin):
    """Overrides gather_usage with its own running total, as MASEval components do."""

    def __init__(self) -> None:
        self.records: list[Usage] = []

    def gather_usage(self) -> Usage:
        return sum(self.records, Usage())


@pytest.fixture
def registry() -> Registry:
    return Registry(benchmark=False)


# --- output shapes -------------------------------------------------------------------------------
def test_collect_all_configs_has_maseval_sections(registry: Registry) -> None:
    """Configs come back under the MASEval sections, with environment and user not nested."""
    registry.register("agents", "solver", Component("a"))
    registry.register("environment", "env", Component("e"))
    registry.register("user", "sim", Component("u"))
    configs = registry.collect_all_configs()
    assert set(configs) == SECTIONS | {"benchmark"}
    assert configs["agents"]["solver"]["label"] == "a"
    assert configs["environment"]["label"] == "e" and configs["user"]["label"] == "u"
    assert configs["metadata"]["total_components"] == 3


def test_registry_name_is_injected_when_missing(registry: Registry) -> None:
    """A component's output gets its registry name unless it names itself."""
    registry.register("tools", "search", Component("s"))
    assert registry.collect_all_traces()["tools"]["search"]["name"] == "search"


def test_unknown_categories_get_their_own_section(registry: Registry) -> None:
    """Categories beyond the standard ones appear as sections of their own; `other` stays for "other"."""
    registry.register("seeding", "gen", Component("g"))
    registry.register("other", "misc", Component("m"))
    traces = registry.collect_all_traces()
    assert traces["seeding"]["gen"]["label"] == "g" and traces["other"]["misc"]["label"] == "m"


def test_failing_gather_becomes_an_error_entry(registry: Registry) -> None:
    """A component whose gather_* raises yields an error entry instead of an exception."""
    registry.register("models", "bad", Broken())
    configs, traces, usage = (
        registry.collect_all_configs(),
        registry.collect_all_traces(),
        registry.collect_all_usage(),
    )
    assert configs["models"]["bad"] == {
        "error": "Failed to gather config: config exploded",
        "error_type": "RuntimeError",
        "component_type": "Broken",
    }
    assert traces["models"]["bad"]["error_type"] == "KeyError"
    assert usage["models"]["bad"]["error_type"] == "ValueError"


def test_collected_output_is_json_serialisable(registry: Registry) -> None:
    """Sets, NaN and arbitrary objects in a config come out as strict JSON."""
    registry.register("tools", "odd", Component("o", tags={"b", "a"}, ratio=float("nan"), obj=object()))
    configs = registry.collect_all_configs()
    json.dumps(configs, allow_nan=False)
    assert configs["tools"]["odd"]["tags"] == ["a", "b"]


def test_benchmark_section_can_be_off_or_extended() -> None:
    """`benchmark=False` leaves the section empty; a mapping adds to the system facts."""
    assert Registry(benchmark=False).collect_all_configs()["benchmark"] == {}
    section = Registry(benchmark={"name": "gaia", "n_task_repeats": 3}).collect_all_configs()["benchmark"]
    assert section["name"] == "gaia" and {"git", "python", "system", "packages"} <= set(section)


# --- registration rules --------------------------------------------------------------------------
def test_register_returns_the_component_and_is_idempotent(registry: Registry) -> None:
    """Registering returns the component, and registering it again under the same key is harmless."""
    model = Component("m")
    assert registry.register("models", "main", model) is model
    registry.register("models", "main", model)
    assert registry.collect_all_configs()["metadata"]["total_components"] == 1


def test_one_component_cannot_take_two_keys(registry: Registry) -> None:
    """Registering a component under a second key raises ConfigError (a ValueError)."""
    model = Component("m")
    registry.register("models", "main", model)
    with pytest.raises(ConfigError, match="already registered as 'models:main'"):
        registry.register("models", "other", model)


def test_components_that_gather_nothing_are_refused(registry: Registry) -> None:
    """An object with no gather_* method cannot be registered."""
    with pytest.raises(ConfigError, match="gather_traces"):
        registry.register("tools", "plain", object())


def test_clear_forgets_registrations_but_keeps_usage_totals(registry: Registry) -> None:
    """`clear()` empties the current scope; the running totals survive."""
    model = Component("m")
    with registry.scope():
        registry.register("models", "main", model)
        model.call(10)
        registry.collect_all_usage()
        registry.clear()
        assert registry.collect_all_configs()["models"] == {}
    assert registry.usage.input_tokens == 10  # type: ignore[attr-defined]


# --- scopes --------------------------------------------------------------------------------------
def test_scope_registrations_are_invisible_outside_and_forgotten_after(registry: Registry) -> None:
    """What a scope registers is seen only inside it (beside the root's), and dropped when it closes."""
    registry.register("agents", "root_agent", Component("r"))
    with registry.scope():
        registry.register("agents", "scoped", Component("s"))
        assert set(registry.collect_all_configs()["agents"]) == {"root_agent", "scoped"}
    assert set(registry.collect_all_configs()["agents"]) == {"root_agent"}


def test_current_is_the_innermost_scoped_registry_else_the_default(registry: Registry) -> None:
    """`Registry.current()` finds the registry whose scope is active, else the process default."""
    assert Registry.current() is Registry.default()
    with registry.scope():
        assert Registry.current() is registry
    assert Registry.current() is Registry.default()


def test_worker_threads_started_under_a_scope_see_it(registry: Registry) -> None:
    """A thread pool worker (context propagated by mastrace) registers into the caller's scope."""
    with mastrace.testing.capture_spans(), registry.scope(), ThreadPoolExecutor(2) as pool:
        pool.submit(registry.register, "tools", "from_thread", Component("t")).result()
        thread = threading.Thread(
            target=mastrace.wrap(lambda: registry.register("tools", "t2", Component("x")))
        )
        thread.start()
        thread.join()
        assert set(registry.collect_all_configs()["tools"]) == {"from_thread", "t2"}


def test_tasks_started_under_a_scope_see_it(registry: Registry) -> None:
    """An asyncio task created inside a scope registers into that scope."""

    async def main() -> set[str]:
        with registry.scope():
            await asyncio.create_task(asyncio.to_thread(registry.register, "tools", "async", Component("a")))
            return set(registry.collect_all_configs()["tools"])

    assert asyncio.run(main()) == {"async"}


# --- usage ---------------------------------------------------------------------------------------
def test_collect_all_usage_reports_the_delta_since_the_previous_collection(registry: Registry) -> None:
    """A component reused across collections is reported once per call, never twice."""
    model = Component("m")
    with registry.scope():
        registry.register("models", "main", model)
        model.call(10)
        first = registry.collect_all_usage()["models"]["main"]
        model.call(4)
        second = registry.collect_all_usage()["models"]["main"]
    assert (first["input_tokens"], second["input_tokens"]) == (10, 4)
    assert (first["category"], first["component_name"]) == ("models", "main")
    assert registry.usage_by_component["models:main"].input_tokens == 14  # type: ignore[attr-defined]


def test_overridden_gather_usage_is_reported_as_a_difference(registry: Registry) -> None:
    """A MASEval-style running total is turned into per-collection deltas."""
    counter = MasevalStyleCounter()
    with registry.scope():
        registry.register("tools", "api", counter)
        counter.records.append(Usage(cost=1.0, units={"calls": 1}))
        first = registry.collect_all_usage()["tools"]["api"]
        counter.records.append(Usage(cost=2.0, units={"calls": 1}))
        second = registry.collect_all_usage()["tools"]["api"]
    assert (first["cost"], second["cost"]) == (1.0, 2.0)
    assert registry.usage.cost == 3.0


def test_usage_outside_any_scope_uses_gather_usage_differences(registry: Registry) -> None:
    """In the root scope, default components are reported as differences of their totals."""
    model = Component("m")
    registry.register("models", "main", model)
    model.call(6)
    assert registry.collect_all_usage()["models"]["main"]["input_tokens"] == 6
    model.call(1)
    assert registry.collect_all_usage()["models"]["main"]["input_tokens"] == 1


def test_usage_collected_in_a_scope_is_not_collected_again_at_the_root(registry: Registry) -> None:
    """A component registered both in a scope and at the root is never counted twice."""
    model = Component("m")
    registry.register("models", "main", model)
    with registry.scope():
        registry.register("models", "main", model)
        model.call(10)
        assert registry.collect_all_usage()["models"]["main"]["input_tokens"] == 10
    model.call(3)
    assert registry.collect_all_usage()["models"]["main"]["input_tokens"] == 3
    assert registry.usage.input_tokens == 13  # type: ignore[attr-defined]


def test_maseval_shaped_loop_keeps_repetitions_apart() -> None:
    """Tasks × repetitions on 8 threads sharing one model: no registration or usage crosses repetitions."""
    registry = Registry(benchmark=False)
    shared_model = Component("shared", temperature=0.0)
    start_together = threading.Barrier(8, timeout=30)
    jobs = list(itertools.product(range(4), range(6)))

    def repetition(index: int, task: int, rep: int) -> dict[str, Any]:
        with registry.scope():
            registry.register("models", "main", shared_model)
            registry.register("agents", "solver", Component(f"agent-{task}-{rep}"))
            registry.register("environment", "env", Component(f"env-{task}"))
            if index < 8:
                start_together.wait()  # the first eight repetitions overlap for sure
            made = [shared_model.call(tokens=task * 100 + rep + i, cost=0.001) for i in range(25)]
            return {
                "task": task,
                "rep": rep,
                "made": made,
                "configs": registry.collect_all_configs(),
                "traces": registry.collect_all_traces(),
                "usage": registry.collect_all_usage(),
            }

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda job: repetition(job[0], *job[1]), enumerate(jobs)))

    for r in results:
        assert set(r["configs"]["agents"]) == {"solver"}
        assert r["configs"]["agents"]["solver"]["label"] == f"agent-{r['task']}-{r['rep']}"
        assert r["traces"]["environment"]["label"] == f"env-{r['task']}"
        own = r["usage"]["models"]["main"]
        assert own["input_tokens"] == sum(u.input_tokens for u in r["made"])
        assert own["output_tokens"] == sum(u.output_tokens for u in r["made"])
        assert own["cost"] == pytest.approx(0.001 * 25)
    all_calls = [u for r in results for u in r["made"]]
    expected_input = sum(u.input_tokens for u in all_calls)
    assert registry.usage.input_tokens == expected_input  # type: ignore[attr-defined]
    assert registry.usage_by_component["models:main"].input_tokens == expected_input  # type: ignore[attr-defined]
    assert registry.usage.cost == pytest.approx(0.001 * len(all_calls))
    assert shared_model.gather_usage().input_tokens == expected_input  # type: ignore[attr-defined]


# --- configuration snapshots ---------------------------------------------------------------------
def test_snapshot_is_canonical_json_with_a_sha256_prefix_hash(registry: Registry) -> None:
    """The snapshot text is sorted compact JSON without timestamps; the hash is its SHA-256 prefix."""
    registry.register("models", "main", Component("m", temperature=0.2))
    snap = registry.config_snapshot()
    doc = json.loads(snap.text)
    assert "metadata" not in doc and "gathered_at" not in doc["models"]["main"]
    assert snap.text == json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    del doc["benchmark"]  # the process facts are in the snapshot, not in the hash
    hashed = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert snap.hash == hashlib.sha256(hashed.encode()).hexdigest()[:16]


def test_equal_configurations_hash_alike_and_changes_hash_differently(registry: Registry) -> None:
    """Two scopes with equal configs share a hash; a changed setting changes it."""
    hashes = []
    for temperature in (0.2, 0.2, 0.7):
        with registry.scope():
            registry.register("models", "main", Component("m", temperature=temperature))
            hashes.append(registry.config_snapshot().hash)
    assert hashes[0] == hashes[1] != hashes[2]


def test_unchanged_snapshot_is_serialised_once(registry: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    """Repeating a snapshot of unchanged components calls the serialiser no more."""
    calls: list[Any] = []
    real = snapshots._serialise
    monkeypatch.setattr(snapshots, "_serialise", lambda value: calls.append(value) or real(value))
    model, agent = Component("m", temperature=0.2), Component("a")
    registry.register("models", "main", model)
    registry.register("agents", "solver", agent)
    first = registry.config_snapshot()
    assert len(calls) == 3  # two components and the benchmark section
    assert registry.config_snapshot() == first
    assert len(calls) == 3
    model.settings["temperature"] = 0.9
    assert registry.config_snapshot().hash != first.hash
    assert len(calls) == 4  # only the changed component


def test_snapshot_sees_nested_changes_to_a_returned_dict(registry: Registry) -> None:
    """Mutating a nested dict a component returns again is detected (the cache keeps its own copy)."""
    params = {"retries": 1}
    registry.register("tools", "t", Component("t", params=params))
    before = registry.config_snapshot().hash
    params["retries"] = 2
    assert registry.config_snapshot().hash != before


def test_the_same_configuration_object_mutated_between_runs_gets_a_new_snapshot() -> None:
    """An experiment passes one dict run after run: an unchanged one is not serialised again, a change
    in place (at any depth) is seen, and a value that cannot be copied is never taken as unchanged."""
    cache = snapshots.SnapshotCache()
    config: dict[str, Any] = {"agents": {"a": {"model": "m", "tools": ["x"]}}, "task_id": "t1"}
    first = cache.snapshot(config)
    assert cache.snapshot(config) is first
    config["agents"]["a"]["tools"].append("y")
    second = cache.snapshot(config)
    assert second.hash != first.hash and '"y"' in second.text
    config["task_id"] = "t2"  # per run: a new text, the same hash
    third = cache.snapshot(config)
    assert third.hash == second.hash and '"t2"' in third.text
    assert cache.snapshot({"agents": {"a": {"model": "m", "tools": ["x"]}}, "task_id": "t1"}) == first

    class Uncopyable:
        def __init__(self, value: int) -> None:
            self.value = value

        def __deepcopy__(self, memo: Any) -> Any:
            raise TypeError("no copies")

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Uncopyable) and other.value == self.value

        __hash__ = None  # type: ignore[assignment]

        def __repr__(self) -> str:
            return f"Uncopyable({self.value})"

    thing = Uncopyable(1)
    held = {"agents": {"a": {"thing": thing}}}
    before = cache.snapshot(held)
    thing.value = 2
    after = cache.snapshot(held)
    assert "Uncopyable(2)" in after.text and after.hash != before.hash


def test_nested_scopes_of_one_registry_count_usage_once() -> None:
    """Usage recorded in an inner scope is collected there, and not again by the enclosing scope."""

    class Model(ConfigurableMixin, UsageTrackableMixin):
        pass

    registry = Registry(benchmark=False)
    model = Model()
    with registry.scope():
        registry.register("models", "m", model)
        with registry.scope():
            registry.register("models", "m", model)
            model.record_usage(TokenUsage(input_tokens=100))
            inner = registry.collect_all_usage()["models"]["m"]
        outer = registry.collect_all_usage()["models"]["m"]
    assert inner["input_tokens"] == 100
    assert outer.get("input_tokens", 0) == 0
    assert registry.usage.input_tokens == 100


# -- read-through --------------------------------------------------------------------------------
def test_root_registrations_are_seen_in_every_scope_and_scope_ones_stay_private() -> None:
    from mastrace import ConfigurableMixin

    class Named(ConfigurableMixin):
        def __init__(self, label: str) -> None:
            self.label = label

        def gather_config(self) -> dict[str, Any]:
            return {**super().gather_config(), "label": self.label}

    registry = Registry(benchmark=False)
    shared = registry.register("models", "main", Named("shared"))  # e.g. built in a benchmark's __init__
    with registry.scope():
        registry.register("tools", "search", Named("rep1"))
        inside = registry.collect_all_configs()
        assert inside["models"]["main"]["label"] == "shared"
        assert inside["tools"]["search"]["label"] == "rep1"
        with registry.scope():  # a sibling repetition sees the shared model, not rep1's tool
            assert "search" not in registry.collect_all_configs().get("tools", {})
        registry.register("models", "main", Named("override"))  # a scope may override a key
        assert registry.collect_all_configs()["models"]["main"]["label"] == "override"
    outside = registry.collect_all_configs()
    assert outside["models"]["main"]["label"] == "shared" and "search" not in outside.get("tools", {})
    assert shared.label == "shared"
