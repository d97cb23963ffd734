"""The MCP tools' answers without the protocol: bounds, windows and trace references."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mastrace.exceptions import StoreError
from mastrace.mcp_server._tools import Tools, _age_window, _trace_ref, bounded_text
from mastrace.store.reader import segment_files
from seed_run import write_store


def _undated(text: str) -> str:
    return re.sub(r"^- \*\*Generated:\*\* .*$", "- **Generated:** …", text, flags=re.MULTILINE)


def test_bounded_text_cuts_at_a_line_and_says_how_much() -> None:
    """A long answer is cut at the last line end before the limit, with what was left out and a hint."""
    text = "\n".join(f"line {i}" for i in range(100))
    cut = bounded_text(text, limit=50, hint="ask for less")
    kept, note = cut.split("\n…")
    assert kept == "\n".join(f"line {i}" for i in range(7))
    assert note == f" output cut at 48 of {len(text)} characters (93 more line(s)); ask for less"
    assert bounded_text("short", limit=50) == "short"


def test_age_windows() -> None:
    """An age looks back that many minutes; none, or one past the calendar's start, keeps everything."""
    assert _age_window(None) is None
    assert _age_window(10**12) is None
    window = _age_window(30)
    assert window is not None and window.min_timestamp is not None
    with pytest.raises(StoreError, match="minutes"):
        _age_window(-1)


@pytest.mark.parametrize("ref", ["latest", "PREVIOUS", " abcd ", "0123456789abcdef0123456789abcdef"])
def test_trace_refs_pass(ref: str) -> None:
    """Trace ids, prefixes of 4+ hex digits and the aliases are accepted, in any case."""
    assert _trace_ref(ref) == ref.strip().lower()


@pytest.mark.parametrize("ref", ["abc", "latest'--", "0123456789abcdef0123456789abcdef0", "g123", ""])
def test_trace_refs_refused(ref: str) -> None:
    """Anything else is refused before it reaches SQL."""
    with pytest.raises(StoreError, match="not a trace"):
        _trace_ref(ref)


def test_tools_read_several_stores_as_one(tmp_path: Path) -> None:
    """Given two stores, the tools see the runs of both."""
    write_store(tmp_path / "a")
    write_store(tmp_path / "b", base_ns=1_800_000_000_000_000_000)
    tools = Tools([tmp_path / "a", tmp_path / "b"])
    assert tools.list_runs(10).count("coordination.session") == 4


def test_a_runaway_query_is_a_tool_error_at_the_time_limit(tmp_path: Path) -> None:
    """A statement that would run for ages is stopped at the time limit, with a message the model can
    act on; the next query is answered."""
    tools = Tools(write_store(tmp_path / "store").path, max_seconds=1)
    with pytest.raises(StoreError, match="time limit of 1 s"):
        tools.arbitrary_query("SELECT sum(range % 7) FROM range(9223372036854775807)")
    assert tools.arbitrary_query("SELECT 1 AS one") == '[{"one": 1}]'


def test_list_runs_marks_what_latest_and_previous_pick(tmp_path: Path) -> None:
    """The runs list a model reads marks the runs `latest` and `previous` pick, as `mastrace runs` does."""
    store = write_store(tmp_path / "store")
    tools = Tools(store.path)
    rows = {
        line.split("│")[0].strip(): line.split("│")[1].strip()
        for line in tools.list_runs(10).splitlines()[2:]
    }
    assert rows[tools.trace_tree("latest").split()[1]] == "latest"
    assert rows[tools.trace_tree("previous").split()[1]] == "previous"


def test_every_store_tool_tells_the_model_what_the_store_skipped_and_showed_once(tmp_path: Path) -> None:
    """A model sees no stderr: over a store with a torn line and every span twice, each tool that reads
    spans ends its answer with the notes `mastrace` prints, and a clean store's answers carry none."""
    import shutil

    store = write_store(tmp_path / "store")
    clean = tmp_path / "clean"
    shutil.copytree(store.path, clean)
    segments = segment_files(store.path)
    assert segments
    for segment in segments:
        shutil.copy(segment, segment.with_name("copy-" + segment.name))
    with segments[0].open("a") as file:
        file.write('{"trace_id": "torn\n')
    tools, plain = Tools(store.path), Tools(clean)
    answers = {
        "arbitrary_query": lambda t: t.arbitrary_query("SELECT count(*) AS n FROM records"),
        "list_runs": lambda t: t.list_runs(5),
        "trace_tree": lambda t: t.trace_tree("latest"),
        "analyze": lambda t: t.analyze("latest"),
        "diff": lambda t: t.diff("previous", "latest"),
    }
    for name, ask in answers.items():
        noisy, quiet = ask(tools), ask(plain)
        assert "note: skipped 1 malformed row(s)" in noisy, name
        assert "extra copy(ies) of spans stored more than once" in noisy, name
        assert "note:" not in quiet, name
        # The report says when it was generated: the two answers may be a second apart.
        same = [
            _undated(text) for text in (noisy.split("\nnote:")[0], quiet.replace(str(clean), str(store.path)))
        ]
        assert same[0] == same[1], name


EXPERIMENT = """
import mastrace
mastrace.configure(local={store!r}, experiment="mcp-exp")
for model, passes in (("big", (1, 1, 1, 0)), ("small", (0, 1, 0, 0))):
    for task in range(4):
        for rep in range(2):
            with mastrace.experiment_run(f"t{{task}}", repetition=rep, config={{"model": model}}) as run:
                run.record_evaluation("correct", score=bool(passes[task]))
"""


def test_compare_experiments_answers_with_the_comparison(tmp_path: Path) -> None:
    """The tool gives compare's markdown: both configurations, the baseline delta and the changed key."""
    import subprocess
    import sys

    store = tmp_path / "store"
    done = subprocess.run(
        [sys.executable, "-c", EXPERIMENT.format(store=str(store))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    tools = Tools([store])
    text = tools.compare_experiments(experiment="mcp-exp", by="model", baseline="big")
    assert "| big | 8 | 4 | 2 | 0 (0%) | correct | 0.750 [" in text
    assert "| small | correct | -0.500 [" in text and "model: big → small" in text
    assert tools.compare_experiments(experiment="none-such") == "no experiment runs found"
    with pytest.raises(StoreError, match="not a configuration"):
        tools.compare_experiments(baseline="medium")
