"""`mastrace tree` and `mastrace runs` on a run in progress and on one killed midway: open spans
show by name, as running while their process runs and as unfinished once it was killed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult

from live_agents import live_run, wait_for
from mastrace.store import LocalStoreExporter
from seed_run import write_store

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


def _open_run(store: Path, *, ended_child: bool) -> tuple[LocalStoreExporter, str]:
    """A run started now whose session (and one round) are open, recorded as a live writer records
    them (this process holds the pending file: they read as running); with `ended_child`, a call
    under the session has ended (its trace is in `records`, without a root span)."""
    writer = LocalStoreExporter(store)
    provider = TracerProvider()
    tracer = provider.get_tracer("open")
    session = tracer.start_span("coordination.session")
    inside = trace.set_span_in_context(session)
    spans = [session, tracer.start_span("agent.agent_a.round_0", context=inside)]
    assert writer.export_pending(spans) == 2  # type: ignore[arg-type]
    if ended_child:
        call = tracer.start_span("llm.quick.call", context=inside)
        call.end()
        assert writer.export([call]) == SpanExportResult.SUCCESS  # type: ignore[list-item]
    return writer, f"{session.get_span_context().trace_id:032x}"


def test_latest_and_prefixes_find_a_run_none_of_whose_spans_ended(
    mastrace_cli: Runner, tmp_path: Path
) -> None:
    """`latest` is the newest run even while nothing of it has ended, `previous` the run before, a
    prefix of its id finds it, and `runs` marks it; `analyze` says why it has nothing to report yet."""
    seed = write_store(tmp_path / "store")
    writer, trace_id = _open_run(seed.path, ended_child=False)
    try:
        for ref in ("latest", trace_id[:8]):
            tree = mastrace_cli("tree", ref, store=seed.path)
            assert tree.returncode == 0, tree.stderr
            assert tree.stdout.splitlines()[0] == f"trace {trace_id}"
            assert "coordination.session  … running" in tree.stdout
            assert "agent.agent_a.round_0  … running" in tree.stdout
        assert (
            mastrace_cli("tree", "previous", store=seed.path).stdout.splitlines()[0]
            == f"trace {seed.trace_id}"
        )
        rows = json.loads(mastrace_cli("runs", "--format", "json", store=seed.path).stdout)
        marks = {row["trace_id"]: row["ref"] for row in rows}
        assert (marks[trace_id], marks[seed.trace_id], marks[seed.old_trace_id]) == (
            "latest",
            "previous",
            None,
        )
        analyze = mastrace_cli("analyze", "latest", store=seed.path)
        assert analyze.returncode == 2
        assert f"no span of run {trace_id} has ended yet" in analyze.stderr
    finally:
        writer.shutdown()


def test_latest_is_a_run_whose_root_span_is_still_open(mastrace_cli: Runner, tmp_path: Path) -> None:
    """A live run whose session is open and one call ended (no root span in `records` yet) is
    `latest` over an older run that ended, in every command that takes a run."""
    seed = write_store(tmp_path / "store")
    writer, trace_id = _open_run(seed.path, ended_child=True)
    try:
        tree = mastrace_cli("tree", "latest", store=seed.path).stdout
        assert tree.splitlines()[0] == f"trace {trace_id}" and "llm.quick.call" in tree
        graph = json.loads(mastrace_cli("graph", "latest", "--format", "json", store=seed.path).stdout)
        assert graph["trace_id"] == trace_id
        assert (
            mastrace_cli("tree", "previous", store=seed.path).stdout.splitlines()[0]
            == f"trace {seed.trace_id}"
        )
    finally:
        writer.shutdown()


def test_latest_without_start_records_is_unchanged(mastrace_cli: Runner, tmp_path: Path) -> None:
    """Once the writer has ended its spans and shut down (no start record left), `latest` is the
    newest run whose root span ended, as before."""
    seed = write_store(tmp_path / "store")
    assert not (seed.path / "pending").exists() or not list((seed.path / "pending").iterdir())
    assert mastrace_cli("tree", "latest", store=seed.path).stdout.splitlines()[0] == f"trace {seed.trace_id}"
    assert (
        mastrace_cli("tree", "previous", store=seed.path).stdout.splitlines()[0]
        == f"trace {seed.old_trace_id}"
    )


def _view_rows(
    mastrace_cli: Runner, store: Path, ref: str, target: Path
) -> dict[str, tuple[str, str, float]]:
    """Span name → (row classes, duration text, bar width in %) of `mastrace view REF`'s page."""
    result = mastrace_cli("view", ref, "-o", str(target), store=store)
    assert result.returncode == 0, result.stderr
    rows = re.findall(
        r'<div class="(row[^"]*)"[^>]*>.*?<span class="name">([^<]*)</span><span class="dur">([^<]*)</span>'
        r'.*?style="left:[0-9.]+%;width:([0-9.]+)%"',
        target.read_text(),
    )
    return {name: (classes, took, float(width)) for classes, name, took, width in rows}


def test_view_draws_open_spans_by_name_running_then_unfinished(mastrace_cli: Runner, tmp_path: Path) -> None:
    """`mastrace view` of a run in progress (nothing of it ended yet, found as `latest`) draws its open
    session and round by name as running, each bar reaching to the trace's last time, never as an
    instant event; once its writer is gone they read as unfinished. A run's ended spans are as before."""
    store = tmp_path / "store"
    seed = write_store(store)
    writer, trace_id = _open_run(store, ended_child=True)
    try:
        rows = _view_rows(mastrace_cli, store, "latest", tmp_path / "live.html")
        assert f"trace {trace_id}" in (tmp_path / "live.html").read_text()
        for name in ("coordination.session", "agent.agent_a.round_0"):
            classes, took, width = rows[name]
            assert (classes, took) == ("row open running", "… running")
            assert width > 0
        assert rows["coordination.session"][2] == 100.0
        assert rows["llm.quick.call"][0] == "row"  # ended: a plain span
    finally:
        writer.shutdown()  # its spans still open: their start records stay, held by no one
    rows = _view_rows(mastrace_cli, store, trace_id[:6], tmp_path / "gone.html")
    assert rows["agent.agent_a.round_0"][:2] == ("row open unfinished", "… unfinished")
    ended = _view_rows(mastrace_cli, store, seed.trace_id, tmp_path / "seed.html")
    assert ended and all(classes == "row" for classes, _, _ in ended.values())


def test_the_mcp_tools_list_and_resolve_a_run_in_progress(tmp_path: Path) -> None:
    """`list_runs` lists a run none of whose spans ended yet, marked latest and running, and
    `trace_tree` (default `latest`) shows it."""
    from .conftest import mcp_session
    from .test_mcp import _text

    seed = write_store(tmp_path / "store")
    writer, trace_id = _open_run(seed.path, ended_child=False)

    async def body(session: Any) -> tuple[tuple[bool, str], tuple[bool, str]]:
        return await _text(session, "list_runs"), await _text(session, "trace_tree")

    try:
        (runs_error, runs), (tree_error, tree) = mcp_session(seed.path, body)
    finally:
        writer.shutdown()
    assert not runs_error and not tree_error
    row = next(line for line in runs.splitlines() if line.startswith(trace_id))
    cells = [cell.strip() for cell in row.split("│")]
    assert (cells[1], cells[-1]) == ("latest", "running")
    assert trace_id in tree and "coordination.session  … running" in tree
