"""`mastrace compact`: every read command answers the same before and after it."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest

from mastrace.cli import main
from mastrace.store.reader import compacted_files, segment_files
from seed_run import SEED_QUERIES, write_store


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), stdout=out), out.getvalue()


def test_read_commands_answer_the_same_after_compaction(tmp_path: Path) -> None:
    """runs, tree, query (the guide's 16 queries), diff and export print the same before and after."""
    store = write_store(tmp_path / "seed")
    where = ["--store", str(store.path)]
    commands = [
        ["runs"],
        ["tree", "latest"],
        ["diff", "previous", "latest"],
        ["export", "latest", "--format", "otlp-json"],
        *(["query", store.sql(sql)] for sql in SEED_QUERIES.values()),
    ]

    def answers() -> list[object]:
        out: list[object] = []
        for c in commands:
            code, text = run(*c, *where)
            # A GROUP BY without ORDER BY leaves the row order to the engine: compare its rows as a set.
            unordered = c[0] == "query" and "ORDER BY" not in c[1].upper()
            out.append((code, sorted(text.splitlines()) if unordered else text))
        return out

    before = answers()
    code, text = run("compact", *where, "--min-age", "0s")
    assert code == 0 and text.startswith("compacted 1 segment(s)")
    assert segment_files(store.path) == [] and len(compacted_files(store.path)) == 1
    assert answers() == before
    assert run("compact", *where, "--min-age", "0s")[1].startswith("nothing to compact")


def test_compact_needs_a_store(tmp_path: Path) -> None:
    """A folder that is not a store is a one-line error with exit status 1 or 2, no traceback."""
    code, _ = run("compact", "--store", str(tmp_path / "none"))
    assert code != 0


def _many_segments(path: Path, count: int) -> None:
    """A store of `count` closed one-span segments last written an hour ago (short processes)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from mastrace.store import LocalStoreExporter

    for n in range(count):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(path)))
        with provider.get_tracer("t").start_as_current_span("coordination.session", attributes={"n": n}):
            pass
        provider.shutdown()
    old = time.time() - 3600
    for file in (path / "segments").iterdir():
        os.utime(file, (old, old))


def test_a_read_command_compacts_a_store_of_many_segments_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`runs` on a store of 64 closed segments compacts it first (said on stderr) and prints the
    same runs; with MASTRACE_AUTO_COMPACT=0 it reads the segments as they are."""
    path = tmp_path / "many"
    _many_segments(path, 64)
    monkeypatch.setenv("MASTRACE_AUTO_COMPACT", "0")
    before = run("runs", "--store", str(path))
    assert len(segment_files(path)) == 64 and "compacted" not in capsys.readouterr().err
    monkeypatch.delenv("MASTRACE_AUTO_COMPACT")
    assert run("runs", "--store", str(path)) == before
    assert "compacted 64 closed segment(s)" in capsys.readouterr().err
    assert segment_files(path) == [] and len(compacted_files(path)) == 1
