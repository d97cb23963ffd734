"""Comparing two runs: flattened config differences and per-agent deltas."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from mastrace.analysis import TraceStore, build_report, diff_reports, render_diff
from mastrace.analysis._diff import compare_configs, flatten

from .conftest import CONFIG, TraceWriter, write_session


def test_flatten_nested_dicts_and_lists() -> None:
    """Nested keys join with dots and list items get [i]; empty containers stay as values."""
    assert flatten({"a": {"b": 1, "c": [True, {"d": None}]}, "e": {}, "f": []}) == {
        "a.b": 1,
        "a.c[0]": True,
        "a.c[1].d": None,
        "e": {},
        "f": [],
    }


def test_compare_configs_reports_added_removed_and_changed() -> None:
    """Each differing key is reported once with its kind and values."""
    changes = compare_configs({"x": 1, "y": {"z": "a"}, "same": 2}, {"x": 1.5, "w": True, "same": 2})
    assert [(c.key, c.change, c.before, c.after) for c in changes] == [
        ("w", "added", None, True),
        ("x", "changed", 1, 1.5),
        ("y.z", "removed", "a", None),
    ]


def test_a_type_change_counts_as_changed() -> None:
    """`1` and `True` are different configuration values."""
    assert [c.key for c in compare_configs({"k": 1}, {"k": True})] == ["k"]


@pytest.fixture
def two_reports(writer: TraceWriter, tmp_path: Path) -> tuple[object, object]:
    first = write_session(writer)
    writer.offset_ms = 60_000
    changed = copy.deepcopy(CONFIG)
    changed["agents"]["agent_a"]["model"] = "gpt-4o-mini"
    second = write_session(writer, changed)
    with TraceStore(tmp_path / "store") as store:
        return build_report(store, first), build_report(store, second)


def test_diff_of_two_runs(two_reports: tuple[object, object]) -> None:
    """The diff lists the model change and zero deltas for identical timing and usage."""
    diff = diff_reports(*two_reports)  # type: ignore[arg-type]
    assert [(c.key, c.before, c.after) for c in diff.changes] == [
        ("agents.agent_a.model", "gpt-4o", "gpt-4o-mini")
    ]
    agents = {a.agent: a for a in diff.agents}
    assert agents["agent_a"].duration_a == pytest.approx(6.0)
    assert agents["agent_b"].tokens_b == 1530
    assert diff.total.delta(diff.total.cost_a, diff.total.cost_b) == pytest.approx(0.0)


def test_render_diff_text(two_reports: tuple[object, object]) -> None:
    """The text diff shows the changed key with both values and a delta table."""
    text = render_diff(diff_reports(*two_reports))  # type: ignore[arg-type]
    assert '  ~ agents.agent_a.model: "gpt-4o" → "gpt-4o-mini"' in text
    assert "  1 difference(s)" in text
    assert any(line.startswith("agent_a ") and "6.000" in line for line in text.splitlines())
