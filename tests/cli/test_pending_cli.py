"""`mastrace tree` and `mastrace runs` on a run in progress and on one killed midway: open spans
show by name, as running while their process runs and as unfinished once it was killed."""

from __future__ import annotations

import json
from pathlib import Path

from live_agents import live_run, wait_for

from .conftest import Runner

ROUNDS = ("agent.agent_a.round_0", "agent.agent_b.round_0", "agent.agent_c.round_0")


def _line(tree: str, name: str) -> str:
    return next((line for line in tree.splitlines() if name in line), "")


def _all_open(mastrace_cli: Runner, store: Path, trace_id: str, state: str) -> str:
    """The tree of `trace_id` once every round shows as `state`."""

    def tree() -> str:
        out = mastrace_cli("tree", trace_id, store=store).stdout
        ended = "llm.quick.call" in out  # the span that ended before the rounds were reported started
        return out if ended and all(f"… {state}" in _line(out, name) for name in ROUNDS) else ""

    return str(wait_for(tree, f"every round {state} in the tree"))


def test_tree_and_runs_show_a_live_run_then_a_killed_one(mastrace_cli: Runner, tmp_path: Path) -> None:
    """While the run runs, its open session and rounds are in the tree as running and `runs` marks
    it; after SIGKILL they read as unfinished: named, never placeholders, and nested as they were."""
    store = tmp_path / "store"
    with live_run(store, tmp_path / "run") as run:
        tree = _all_open(mastrace_cli, store, run.trace_id, "running")
        lines = tree.splitlines()
        assert lines[1].startswith("coordination.session") and "… running" in lines[1]
        assert all(_line(tree, name).startswith(("├── ", "└── ")) for name in ROUNDS)  # under the session
        assert "llm.quick.call" in tree
        table = mastrace_cli("runs", store=store).stdout.splitlines()
        assert table[0].split("│")[-1].strip() == "state"
        row = next(line for line in table if line.split("│")[0].strip() == run.trace_id)
        assert [c.strip() for c in row.split("│")][2] == "coordination.session"
        assert row.split("│")[-1].strip() == "running"
        run.kill()
    tree = _all_open(mastrace_cli, store, run.trace_id, "unfinished")
    assert "… unfinished" in tree.splitlines()[1]
    (only,) = json.loads(mastrace_cli("runs", "--format", "json", store=store).stdout)
    assert (only["trace_id"], only["state"], only["name"], only["spans"]) == (
        run.trace_id,
        "unfinished",
        "coordination.session",
        1,  # the totals count the spans that ended, as before
    )


def test_a_run_that_ended_has_no_state_column(mastrace_cli: Runner, tmp_path: Path) -> None:
    """Once the run ends, its spans are plain spans and `runs` prints no state column."""
    store = tmp_path / "store"
    with live_run(store, tmp_path / "run") as run:
        _all_open(mastrace_cli, store, run.trace_id, "running")
        run.release()
    table = mastrace_cli("runs", store=store).stdout.splitlines()
    assert table[0].split("│")[-1].strip() == "cost"
    assert "running" not in mastrace_cli("tree", run.trace_id, store=store).stdout
    assert not list((store / "pending").glob("*.ndjson"))
