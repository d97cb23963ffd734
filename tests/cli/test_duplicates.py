"""A span is its (trace id, span id): however many times it was stored, every command shows it once
and no number is doubled; a copy with other content is shown by one documented rule, and counted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mastrace.analysis import TraceStore
from mastrace.store import query
from mastrace.store.reader import segment_files

from .conftest import Runner


@pytest.fixture(scope="module")
def twice(demo_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's two runs stored twice: once as written, once more in another segment of the store
    (what a second push, a collector's retry or a second intake leaves)."""
    store = tmp_path_factory.mktemp("twice") / "store"
    shutil.copytree(demo_store, store)
    for segment in segment_files(store):
        shutil.copy(segment, segment.with_name("copy-" + segment.name))
    return store


def json_of(proc: object) -> object:
    assert proc.returncode == 0, proc.stderr  # type: ignore[attr-defined]
    return json.loads(proc.stdout)  # type: ignore[attr-defined]


def same(a: object, b: object) -> bool:
    """Equal, floats to 1e-9 (sums of the same numbers in another order differ in the last bits)."""
    if isinstance(a, float) or isinstance(b, float):
        return a == pytest.approx(b, rel=1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_runs_count_and_cost_each_span_once(demo_store: Path, twice: Path, module_cli: Runner) -> None:
    """`runs` over the doubled store gives exactly the figures of the original: spans, tokens, cost."""
    once = json_of(module_cli("runs", "--format", "json", store=demo_store))
    doubled = module_cli("runs", "--format", "json", store=twice)
    assert same(json_of(doubled), once)
    total = sum(len(f.read_text().splitlines()) for f in segment_files(demo_store))
    assert f"{total} extra copy(ies) of spans stored more than once" in doubled.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["tree", "latest", "--max-spans", "0"],
        ["analyze", "latest", "--format", "json"],
        ["diff", "previous", "latest", "--format", "json"],
        ["export", "latest", "--format", "otlp-json"],
        [
            "query",
            "--format",
            "json",
            "SELECT span_name, count(*) AS n, sum(duration) AS d FROM records GROUP BY 1 ORDER BY 1",
        ],
    ],
)
def test_every_command_answers_as_if_each_span_was_stored_once(
    demo_store: Path, twice: Path, module_cli: Runner, command: list[str]
) -> None:
    """Tree, analysis, diff, export and SQL over the doubled store print what the original gives."""
    once, doubled = module_cli(*command, store=demo_store), module_cli(*command, store=twice)
    assert once.returncode == doubled.returncode == 0, doubled.stderr
    if command[0] == "tree":
        assert doubled.stdout == once.stdout
    else:
        reports = [json.loads(doubled.stdout), json.loads(once.stdout)]
        for report in reports:
            if isinstance(report, dict):
                report.pop("generated_at", None)  # when each report was made, not what it says
        assert same(*reports)


def test_the_view_draws_each_span_once(
    demo_store: Path, twice: Path, module_cli: Runner, tmp_path: Path
) -> None:
    """The HTML waterfall of the doubled store has as many rows as the original's."""
    pages = []
    for store in (demo_store, twice):
        out = tmp_path / f"{store.name}.html"
        assert module_cli("view", "latest", "-o", str(out), store=store).returncode == 0
        pages.append(out.read_text())
    assert pages[0].count('class="row"') == pages[1].count('class="row"') > 10


def test_two_stores_holding_the_same_spans_read_as_one(
    demo_store: Path, twice: Path, module_cli: Runner
) -> None:
    """Reading two intakes' stores together (the same spans in both) still counts each span once."""
    both = module_cli("runs", "--format", "json", "--store", str(twice), store=demo_store)
    assert same(json_of(both), json_of(module_cli("runs", "--format", "json", store=demo_store)))


def test_a_copy_with_other_content_is_shown_by_the_latest_end(tmp_path: Path) -> None:
    """Two rows with one span id: the one that ended last is shown, and the other is counted."""
    store = tmp_path / "store"
    row = {
        "trace_id": "a" * 32,
        "span_id": "b" * 16,
        "start_ns": 1_700_000_000_000_000_000,
        "span_name": "agent.a.round_0",
        "attributes": {"massgen.usage.cost": 0.01},
    }
    lines = [
        {**row, "end_ns": row["start_ns"] + 10, "created_ns": 5, "attributes": {"v": "first"}},
        {**row, "end_ns": row["start_ns"] + 30, "created_ns": 1, "attributes": {"v": "latest end"}},
        {
            **row,
            "end_ns": row["start_ns"] + 30,
            "created_ns": 3,
            "attributes": {"v": "latest end, stored last"},
        },
        {**row, "end_ns": row["start_ns"] + 20, "created_ns": 9, "attributes": {"v": "stored last"}},
    ]
    (store / "segments").mkdir(parents=True)
    (store / "segments" / "a.ndjson").write_text("".join(json.dumps(r) + "\n" for r in lines[:2]))
    (store / "segments" / "b.ndjson").write_text("".join(json.dumps(r) + "\n" for r in lines[2:]))
    assert query("SELECT attributes->>'v' AS v, duration FROM records", store) == [
        {"v": "latest end, stored last", "duration": 30e-9}
    ]
    with TraceStore(store) as traces:
        assert traces.health().duplicates == 3
        (span,) = traces.spans("a" * 32)
        assert span.attributes == {"v": "latest end, stored last"}
