"""`mastrace compact`: every read command answers the same before and after it."""

from __future__ import annotations

import io
from pathlib import Path

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
    before = [run(*c, *where) for c in commands]
    code, text = run("compact", *where, "--min-age", "0s")
    assert code == 0 and text.startswith("compacted 1 segment(s)")
    assert segment_files(store.path) == [] and len(compacted_files(store.path)) == 1
    assert [run(*c, *where) for c in commands] == before
    assert run("compact", *where, "--min-age", "0s")[1].startswith("nothing to compact")


def test_compact_needs_a_store(tmp_path: Path) -> None:
    """A folder that is not a store is a one-line error with exit status 1 or 2, no traceback."""
    code, _ = run("compact", "--store", str(tmp_path / "none"))
    assert code != 0
