"""The default `gather_config()`: a component's public plain-data attributes, scrubbed by key, narrowed
on request, nested components included once, and visible to `mastrace diff` with no code
(`mixins/_config_values.py`)."""

from __future__ import annotations

import dataclasses
import enum
import threading
import uuid
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path, PurePosixPath
from typing import Any

import pydantic
import pytest

import mastrace
from mastrace import ConfigurableMixin, CoordinationMixin, Registry
from mastrace.analysis import TraceStore, build_report, diff_reports
from mastrace.mixins._config_values import is_plain_data


class Mode(enum.Enum):
    FAST = "fast"


@dataclasses.dataclass
class Sampling:
    top_p: float = 0.9
    stop: tuple[str, ...] = ("\n",)


class Limits(pydantic.BaseModel):
    max_tokens: int = 512


def _config(component: ConfigurableMixin) -> dict[str, Any]:
    return {k: v for k, v in component.gather_config().items() if k != "gathered_at"}


class Agent(ConfigurableMixin):
    def __init__(self, model: str = "gpt-4o", temperature: float = 0.7, prompt: str = "Be brief.") -> None:
        self.model = model
        self.temperature = temperature
        self.prompt = prompt
        self.tools = {"search", "calc"}
        self.raw = b"bytes\xff"
        self.mode = Mode.FAST
        self.sampling = Sampling()
        self.limits = Limits()
        self.since = date(2026, 1, 2)
        self.budget = Decimal("1.50")
        self.root = PurePosixPath("/srv/agents")
        self.lock = threading.Lock()  # not configuration: left out
        self.client = object()  # an SDK client: left out, not a repr
        self.callback = print  # a callable: left out
        self._history: list[str] = []  # private: left out


def test_public_plain_data_attributes_are_recorded_as_snapshots_encode_them() -> None:
    """Numbers, text, sets, bytes, enums, dataclasses, pydantic models, dates, decimals and paths are
    recorded the way config snapshots encode them; locks, clients, callables and private names are not."""
    assert _config(Agent()) == {
        "model": "gpt-4o",
        "temperature": 0.7,
        "prompt": "Be brief.",
        "tools": ["calc", "search"],
        "raw": "<6 bytes: 6279746573ff>",
        "mode": "fast",
        "sampling": {"top_p": 0.9, "stop": ["\n"]},
        "limits": {"max_tokens": 512},
        "since": "2026-01-02",
        "budget": "1.50",
        "root": "/srv/agents",
        "type": "Agent",
    }


def test_secret_named_attributes_and_keys_are_scrubbed() -> None:
    """`api_key`, `password` and secret keys inside a dict are replaced by the scrubber's marker."""

    class Backend(ConfigurableMixin):
        def __init__(self) -> None:
            self.api_key = "sk-live-0123456789abcdefghijklmnop"
            self.db_password = "hunter2hunter2"
            self.headers = {"Authorization": "Bearer abcdefgh12345678", "Accept": "json"}
            self.max_tokens = 100  # a token count, not a token
            self.token_budget = 5_000

    assert _config(Backend()) == {
        "api_key": "[Scrubbed due to 'api_key']",
        "db_password": "[Scrubbed due to 'password']",
        "headers": {"Authorization": "[Scrubbed due to 'Authorization']", "Accept": "json"},
        "max_tokens": 100,
        "token_budget": 5_000,
        "type": "Backend",
    }


def test_config_attributes_and_config_exclude_narrow_it() -> None:
    """`config_attributes` records exactly the names given (properties and private ones too);
    `config_exclude` leaves names out of the default."""

    class Narrow(Agent):
        config_attributes = ("model", "_history", "label")

        @property
        def label(self) -> str:
            return f"{self.model}@{self.temperature}"

    class Without(Agent):
        config_exclude = frozenset(
            {"prompt", "tools", "raw", "mode", "sampling", "limits", "since", "budget"}
        )

    assert _config(Narrow()) == {"model": "gpt-4o", "_history": [], "label": "gpt-4o@0.7", "type": "Narrow"}
    assert _config(Without()) == {
        "model": "gpt-4o",
        "temperature": 0.7,
        "root": "/srv/agents",
        "type": "Without",
    }


def test_nested_components_record_their_own_config_once() -> None:
    """A component held by another records its `gather_config()`; a cycle records a marker."""

    class Model(ConfigurableMixin):
        def __init__(self) -> None:
            self.model_id = "m-1"

    class Orchestrator(ConfigurableMixin):
        def __init__(self) -> None:
            self.model = Model()
            self.agents: list[Any] = []

    class Worker(ConfigurableMixin):
        def __init__(self, boss: Orchestrator) -> None:
            self.boss = boss

    boss = Orchestrator()
    worker = Worker(boss)
    boss.agents = [worker]  # a list holding a component is not plain data: left out of the boss
    boss.deputy = worker  # type: ignore[attr-defined]
    config = _config(boss)
    assert config["model"] == {"model_id": "m-1", "type": "Model"}  # no collection time: the hash holds
    assert "agents" not in config
    assert config["deputy"]["boss"] == "<cycle>"


def test_slots_and_subclasses_that_extend_with_super() -> None:
    """Slotted components are read too, and MASEval-style `{**super().gather_config(), ...}` still works."""

    class Slotted(ConfigurableMixin):
        __slots__ = ("model", "unset")

        def __init__(self) -> None:
            self.model = "gpt-4o-mini"

    class Extended(Agent):
        def gather_config(self) -> dict[str, Any]:
            return {**super().gather_config(), "extra": 1}

    assert _config(Slotted()) == {"model": "gpt-4o-mini", "type": "Slotted"}
    extended = _config(Extended())
    assert extended["extra"] == 1 and extended["model"] == "gpt-4o"


@pytest.mark.parametrize(
    ("value", "plain"),
    [
        ([1, "a", None, 2.5, True], True),
        ({"a": {"b": [1, {2, 3}]}}, True),
        ((datetime(2026, 1, 1), timedelta(seconds=3), uuid.UUID(int=7)), True),
        ({object(): 1}, False),
        ([threading.Lock()], False),
        ({"f": len}, False),
        (list(range(20_000)), False),
        (Path("x"), True),
    ],
)
def test_is_plain_data_decides_by_content(value: object, plain: bool) -> None:
    """Containers are plain data when every item is; objects, callables and huge containers are not."""
    assert is_plain_data(value) is plain


class Orchestrator(CoordinationMixin):
    pass


def _session(store: Path, agent: Agent) -> str:
    mastrace.configure(local=store, synchronous=True)
    registry = Registry(benchmark=False)
    with registry.scope():
        registry.register("agents", "agent_a", agent)
        with Orchestrator().coordination_session("Write a haiku", ["agent_a"]) as session:
            pass
    mastrace.shutdown()
    return f"{session.span.span_context.trace_id:032x}"  # type: ignore[union-attr]


def test_diff_shows_a_changed_model_temperature_and_prompt_with_no_code(tmp_path: Path) -> None:
    """Two runs of an agent that only sets attributes: `diff` lists the three changed settings."""
    store = tmp_path / "store"
    first = _session(store, Agent())
    second = _session(store, Agent(model="gpt-4o-mini", temperature=0.2, prompt="Be thorough."))
    with TraceStore(store) as traces:
        diff = diff_reports(build_report(traces, first), build_report(traces, second))
    changed = {c.key: (c.before, c.after) for c in diff.changes}
    assert changed == {
        "agents.agent_a.model": ("gpt-4o", "gpt-4o-mini"),
        "agents.agent_a.temperature": (0.7, 0.2),
        "agents.agent_a.prompt": ("Be brief.", "Be thorough."),
    }
    assert diff.to_dict()["hash_a"] != diff.to_dict()["hash_b"]
