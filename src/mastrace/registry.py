"""The component registry: collect traces, configurations and usage from registered components.

Same method names and output shapes as MASEval's benchmark registry. Each `collect_all_*()`
returns a dict with `metadata`, `agents`, `models`, `tools`, `simulators`, `callbacks`,
`environment` and `user` (one component each, not nested), `other`, any further category used at
registration, and for configurations a `benchmark` section (git, python, system, packages).

Registrations live in a *scope*. `with registry.scope():` opens a fresh one for the current
context; tasks and propagated threads started inside it see it; leaving it forgets its
registrations. Outside any scope, a registry uses its own root scope, and what is registered there
is seen from every scope too (read-through), while a scope's own registrations stay private to it.

Usage semantics:

- `collect_all_usage()` reports, per component, the usage *since the previous collection* (a
  delta), so a model adapter reused across repetitions is never counted twice. Inside a scope,
  usage a component records with `record_usage()` is counted for the scope where the call ran,
  which stays exact when repetitions share a component concurrently. A component that overrides
  `gather_usage()` is reported as the difference from its value at the previous collection.
- `usage` and `usage_by_component` are running totals of every delta collected so far, across
  all scopes; `clear()` does not reset them.

Example:
    >>> import mastrace
    >>> registry = mastrace.Registry(benchmark=False)
    >>> with registry.scope():
    ...     _ = registry.register("tools", "search", mastrace.ConfigurableMixin())
    ...     sorted(registry.collect_all_configs()["tools"])
    ['search']
"""

from __future__ import annotations

import contextvars
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any, ClassVar

from .exceptions import ConfigError
from .pipeline._config_state import ConfigState
from .pipeline._snapshots_on_spans import ConfigSnapshot, SnapshotCache
from .setup._benchmark_info import benchmark_info, benchmark_info_ready, git_info, prefetch_benchmark_info
from .tracing._snapshot import JsonValue, to_json_value
from .usage import Usage, pop_sink, push_sink

__all__ = ["Registry", "benchmark_info", "git_info"]

STANDARD_CATEGORIES = ("agents", "models", "tools", "simulators", "callbacks")
DIRECT_CATEGORIES = ("environment", "user")


# -- scopes --------------------------------------------------------------------------------------


class _Ledger:
    """Usage recorded by each component while a scope is active, since its last collection."""

    def __init__(self, registry: Registry) -> None:
        self.label: str | None = None
        self.registry = registry
        self._lock = threading.Lock()
        self._entries: dict[int, tuple[object, Usage]] = {}

    def add(self, usage: Usage, source: object = None, label: str | None = None) -> None:
        if source is None:
            return
        with self._lock:
            entry = self._entries.get(id(source))
            previous = entry[1] if entry is not None and entry[0] is source else Usage()
            self._entries[id(source)] = (source, previous + usage)

    def take(self, component: object) -> Usage:
        with self._lock:
            entry = self._entries.pop(id(component), None)
        return entry[1] if entry is not None and entry[0] is component else Usage()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


class _Scope:
    """The registrations of one registry in one scope."""

    def __init__(self, registry: Registry, *, root: bool = False) -> None:
        self.registry = registry
        self.root = root
        self.lock = threading.Lock()
        self.components: dict[str, object] = {}
        self.keys_by_id: dict[int, str] = {}
        self.ledger = _Ledger(registry)
        # Bumped whenever the registrations change; with a `ConfigState`, what tells a configuration
        # snapshot of this scope to be gathered again.
        self.version = 0
        self.configs: _GatheredConfigs | None = None


class _GatheredConfigs:
    """A scope's gathered configurations, their snapshot and hash, and what they were gathered from."""

    __slots__ = ("configs", "full", "hash", "state", "versions")

    def __init__(self, versions: tuple[int, int], state: ConfigState, configs: dict[str, Any]) -> None:
        self.versions = versions
        self.state = state
        self.configs = configs  # the component sections, without `benchmark`
        self.hash: str | None = None
        self.full: ConfigSnapshot | None = None  # with the `benchmark` section


# Active scopes of the current context, innermost last (one variable; see `usage._SINKS`).
_ACTIVE: contextvars.ContextVar[tuple[_Scope, ...]] = contextvars.ContextVar(
    "mastrace_registry_scopes", default=()
)


class Registry:
    """Collects traces, configurations and usage from registered components (MASEval-compatible).

    Args:
        benchmark: Include the `benchmark` section in `collect_all_configs()`: True for git,
            python, system and packages (gathered once per process); a mapping to add your own
            benchmark-level settings to that; False to leave the section empty.
    """

    _default: ClassVar[Registry | None] = None
    _default_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, *, benchmark: bool | Mapping[str, Any] = True) -> None:
        self._root = _Scope(self, root=True)
        self._benchmark_extra: dict[str, JsonValue] | None = None
        if isinstance(benchmark, Mapping):
            self._benchmark_extra = to_json_value(dict(benchmark))  # type: ignore[assignment]
        self._with_system_info = benchmark is not False
        self._usage_lock = threading.Lock()
        self._usage_total: Usage = Usage()
        self._usage_by_component: dict[str, Usage] = {}
        self._baselines: dict[int, tuple[Callable[[], object | None], Usage]] = {}
        self._snapshots = SnapshotCache()
        if self._with_system_info:
            prefetch_benchmark_info()

    # -- scopes ----------------------------------------------------------------------------------
    @classmethod
    def current(cls) -> Registry:
        """The registry of the innermost active scope, else the process-wide default registry."""
        active = _ACTIVE.get()
        if active:
            return active[-1].registry
        return cls.default()

    @classmethod
    def default(cls) -> Registry:
        """The process-wide registry used when no scope is active."""
        registry = cls._default
        if registry is None:
            with cls._default_lock:
                registry = cls._default
                if registry is None:
                    registry = cls._default = cls()
        return registry

    @contextmanager
    def scope(self) -> Iterator[Registry]:
        """Open a fresh, empty set of registrations for this context (a task repetition).

        Example:
            >>> registry = mastrace.Registry(benchmark=False)
            >>> with registry.scope():
            ...     _ = registry.register("models", "main", mastrace.ConfigurableMixin())
        """
        scope = _Scope(self)
        token = _ACTIVE.set((*_ACTIVE.get(), scope))
        # A nested scope of this registry takes over crediting from the enclosing one.
        sink_token = push_sink(
            scope.ledger, replaces=lambda sink: isinstance(sink, _Ledger) and sink.registry is self
        )
        try:
            yield self
        finally:
            pop_sink(sink_token, scope.ledger)
            try:
                _ACTIVE.reset(token)
            except (ValueError, RuntimeError):  # left in another context: drop just this scope
                _ACTIVE.set(tuple(s for s in _ACTIVE.get() if s is not scope))

    def _scope(self) -> _Scope:
        for scope in reversed(_ACTIVE.get()):
            if scope.registry is self:
                return scope
        return self._root

    # -- registration ----------------------------------------------------------------------------
    def register(self, category: str, name: str, component: Any) -> Any:
        """Register a component for trace, config and usage collection in the current scope.

        Args:
            category: `agents`, `models`, `tools`, `simulators`, `callbacks`, `environment`,
                `user`, `other`, or any other name (it becomes its own section).
            name: The component's name within the category.
            component: Anything with `gather_traces()`, `gather_config()` and/or `gather_usage()`.

        Returns:
            The component, for chaining.

        Raises:
            ConfigError: The component gathers nothing, or is already registered under another key.
        """
        if not any(
            callable(getattr(component, m, None)) for m in ("gather_traces", "gather_config", "gather_usage")
        ):
            raise ConfigError(
                f"cannot register {type(component).__name__} as {category}:{name}: it has no "
                "gather_traces(), gather_config() or gather_usage() (use the mastrace mixins)"
            )
        key = f"{category}:{name}"
        scope = self._scope()
        with scope.lock:
            existing = scope.keys_by_id.get(id(component))
            if existing is not None and scope.components.get(existing) is component:
                if existing != key:
                    raise ConfigError(
                        f"component is already registered as {existing!r}; it cannot also be "
                        f"registered as {key!r}"
                    )
                return component
            replaced = scope.components.get(key)
            if replaced is not None:
                scope.keys_by_id.pop(id(replaced), None)
            scope.components[key] = component
            scope.keys_by_id[id(component)] = key
            scope.version += 1
        return component

    def clear(self) -> None:
        """Forget the current scope's registrations (running usage totals are kept)."""
        scope = self._scope()
        with scope.lock:
            scope.components.clear()
            scope.keys_by_id.clear()
            scope.version += 1
        scope.ledger.clear()

    def _registered(self, method: str) -> tuple[_Scope, list[tuple[str, str, object]]]:
        scope = self._scope()
        with scope.lock:
            items = list(scope.components.items())
            own_ids = set(scope.keys_by_id)
        if not scope.root:
            # Read-through: what was registered outside any scope (a model built in a benchmark's
            # `__init__`) is seen in every scope, unless the scope registered that key or component.
            root = self._root
            with root.lock:
                inherited = [
                    (key, c)
                    for key, c in root.components.items()
                    if key not in scope.components and id(c) not in own_ids
                ]
            items = inherited + items
        out = [(*key.split(":", 1), c) for key, c in items if callable(getattr(c, method, None))]
        return scope, out  # type: ignore[return-value]

    # -- collection ------------------------------------------------------------------------------
    def collect_all_traces(self) -> dict[str, Any]:
        """Collect `gather_traces()` from every registered component of the current scope."""
        _, items = self._registered("gather_traces")
        return self._collect(items, "traces", lambda c: c.gather_traces())

    def collect_all_configs(self) -> dict[str, Any]:
        """Collect `gather_config()` from every registered component, plus the `benchmark` section."""
        out = self._component_configs()
        out["benchmark"] = self._benchmark_section()
        return out

    def _component_configs(self) -> dict[str, Any]:
        _, items = self._registered("gather_config")
        return self._collect(items, "config", lambda c: c.gather_config())

    def collect_all_usage(self) -> dict[str, Any]:
        """Collect each component's usage since the previous collection, and add it to the totals."""
        scope, items = self._registered("gather_usage")
        deltas: dict[str, Usage] = {}

        def gather(category: str, name: str, component: object) -> JsonValue:
            delta = self._delta(scope, component)
            if delta.category is None:
                delta.category = category
            if delta.component_name is None:
                delta.component_name = name
            deltas[f"{category}:{name}"] = delta
            return delta.to_dict()

        out = self._collect_with(items, "usage", gather, inject_name=False)
        with self._usage_lock:
            for key, delta in deltas.items():
                self._usage_total = self._usage_total + delta
                previous = self._usage_by_component.get(key)
                self._usage_by_component[key] = delta if previous is None else previous + delta
        return out

    @property
    def usage(self) -> Usage:
        """Running total of every usage delta collected so far."""
        with self._usage_lock:
            return self._usage_total

    @property
    def usage_by_component(self) -> dict[str, Usage]:
        """Running totals per registry key (`"models:main_model"`)."""
        with self._usage_lock:
            return dict(self._usage_by_component)

    def config_snapshot(self, *, wait: bool = True) -> ConfigSnapshot | None:
        """The current scope's configurations as canonical JSON plus a stable hash (cached).

        The configurations are gathered again only when the registrations changed or a component
        changed since the last snapshot: components whose `gather_config()` is
        `ConfigurableMixin`'s are compared by the attributes it records (nested values and
        components included), and a component with a `gather_config()` of its own is gathered
        every time (it may read state held anywhere).

        Args:
            wait: With False, return None instead of waiting while the process-level `benchmark`
                section is still being gathered on its background thread.
        """
        if not wait and self._with_system_info and not benchmark_info_ready():
            return None
        gathered = self._gathered()
        if gathered is None:
            return self._snapshots.snapshot(self.collect_all_configs())
        full = gathered.full
        if full is None:
            full = self._snapshots.snapshot({**gathered.configs, "benchmark": self._benchmark_section()})
            gathered.full = full
            gathered.hash = full.hash
        return full

    def config_hash(self) -> str:
        """The current scope's configuration hash, never waiting: the hash leaves the process-level
        `benchmark` section out (see `ConfigSnapshot`), so it is known before that section is.
        Gathered again only when something changed, as for `config_snapshot()`."""
        gathered = self._gathered()
        if gathered is None:
            return self._snapshots.snapshot(self._component_configs()).hash
        if gathered.hash is None:
            gathered.hash = self._snapshots.snapshot(gathered.configs).hash
        return gathered.hash

    def _gathered(self) -> _GatheredConfigs | None:
        """The current scope's gathered configurations, gathered again only if something changed;
        None when some component cannot be told unchanged (then the caller gathers as usual)."""
        scope = self._scope()
        versions = (scope.version, -1 if scope.root else self._root.version)
        gathered = scope.configs
        if gathered is not None and gathered.versions == versions and gathered.state.unchanged():
            return gathered
        _, items = self._registered("gather_config")
        state = ConfigState.capture(c for _, _, c in items)  # before gathering: a change meanwhile shows
        if state is None:
            scope.configs = None
            return None
        gathered = _GatheredConfigs(
            versions, state, self._collect(items, "config", lambda c: c.gather_config())
        )
        scope.configs = gathered
        return gathered

    # -- internals -------------------------------------------------------------------------------
    def _delta(self, scope: _Scope, component: object) -> Usage:
        # Only the inherited `UsageTrackableMixin.gather_usage` is known to mean "what record_usage() saw".
        if not scope.root and getattr(
            getattr(type(component), "gather_usage", None), "__mastrace_records_usage__", False
        ):
            delta = scope.ledger.take(component)
            with self._usage_lock:  # advance the baseline too, so a root-scope collection skips it
                self._baselines[id(component)] = (self._ref(component), self._baseline(component) + delta)
            return delta
        current = Usage.coerce(component.gather_usage())  # type: ignore[attr-defined]
        with self._usage_lock:
            previous = self._baseline(component)
            self._baselines[id(component)] = (self._ref(component), current)
        return current - previous

    def _baseline(self, component: object) -> Usage:
        entry = self._baselines.get(id(component))
        return entry[1] if entry is not None and entry[0]() is component else Usage()

    def _ref(self, component: object) -> Callable[[], object | None]:
        key = id(component)
        try:
            return weakref.ref(component, lambda _: self._baselines.pop(key, None))
        except TypeError:  # not weak-referenceable: keep it alive with its baseline
            return lambda: component

    def _collect(
        self, items: list[tuple[str, str, object]], what: str, gather: Callable[[Any], Any]
    ) -> dict[str, Any]:
        return self._collect_with(
            items, what, lambda cat, name, c: to_json_value(gather(c)), inject_name=True
        )

    def _collect_with(
        self,
        items: list[tuple[str, str, object]],
        what: str,
        gather: Callable[[str, str, Any], JsonValue],
        *,
        inject_name: bool,
    ) -> dict[str, Any]:
        out: dict[str, Any] = {
            "metadata": {
                "timestamp": datetime.now().isoformat(),
                "thread_id": threading.current_thread().ident,
                "total_components": len(items),
            }
        }
        out.update({c: {} for c in STANDARD_CATEGORIES})
        out.update({c: None for c in DIRECT_CATEGORIES})
        out["other"] = {}
        for category, name, component in items:
            try:
                value = gather(category, name, component)
                if inject_name and isinstance(value, dict) and "name" not in value:
                    value["name"] = name
            except Exception as exc:
                value = {
                    "error": f"Failed to gather {what}: {exc}",
                    "error_type": type(exc).__name__,
                    "component_type": type(component).__name__,
                }
            if category in DIRECT_CATEGORIES:
                out[category] = value
            else:
                out.setdefault(category, {})[name] = value
        return out

    def _benchmark_section(self) -> dict[str, Any]:
        section: dict[str, Any] = dict(benchmark_info()) if self._with_system_info else {}
        if self._benchmark_extra:
            section.update(self._benchmark_extra)
        return section
