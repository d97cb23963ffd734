"""The store folder is not trusted: the writer, `prune` and the readers follow no symbolic link inside
a store (a link is skipped and counted, never written or deleted through), one such segment fails no
reader (the sandboxed query, MCP and Query API included), and concurrent pushes of one store to one
destination send no span twice."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

import patient_http
from mastrace.exceptions import StoreError
from mastrace.serve import start_intake
from mastrace.store import query
from seed_run import write_store

from .conftest import MASTRACE, clean_env
from .test_push import Receiver, _emit


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MASTRACE), *args], capture_output=True, text=True, env=clean_env(), timeout=300
    )


def test_the_writer_writes_through_no_planted_link(tmp_path: Path) -> None:
    """`roots/` and `skeleton/` planted as links to another folder: nothing is written there, the spans
    are still stored; `segments/` planted as a link: nothing is written at all."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    store = tmp_path / "store"
    store.mkdir()
    for name in ("roots", "skeleton"):
        (store / name).symlink_to(elsewhere)
    write_store(store)
    assert list(elsewhere.iterdir()) == []
    assert query("SELECT count(*) AS n FROM records", store)[0]["n"] > 0
    other = tmp_path / "other"
    other.mkdir()
    (other / "segments").symlink_to(elsewhere)
    with pytest.raises(StoreError, match="symbolic link"):  # our suite sees the export error raised
        write_store(other)
    assert list(elsewhere.iterdir()) == []


def _aged(store: Path) -> None:
    """Make every file of the store a day old (prune leaves the last minute's alone)."""
    old = time.time() - 86_400
    for path in store.rglob("*"):
        os.utime(path, (old, old), follow_symlinks=False)


def test_prune_deletes_nothing_through_a_link(tmp_path: Path) -> None:
    """A store whose `segments/` links to another store's: `prune` removes nothing of the other store."""
    victim = tmp_path / "victim"
    write_store(victim)
    _aged(victim)
    before = sorted(p.name for p in (victim / "segments").iterdir())
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "segments").symlink_to(victim / "segments")
    (planted / "roots").symlink_to(victim / "roots")
    done = _cli("prune", "--store", str(planted), "--older-than", "1h")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (victim / "segments").iterdir()) == before and before
    assert "symbolic link" in done.stdout
    # and a single linked segment inside a real store
    mixed = tmp_path / "mixed"
    write_store(mixed)
    (mixed / "segments" / "linked.ndjson").symlink_to(next((victim / "segments").iterdir()))
    _aged(mixed)
    done = _cli("prune", "--store", str(mixed), "--older-than", "1h")
    assert done.returncode == 0 and sorted(p.name for p in (victim / "segments").iterdir()) == before


@pytest.fixture
def linked_store(tmp_path: Path) -> tuple[Path, int]:
    """A store with its own spans and one segment that is a link to another store's; its own span count."""
    other = tmp_path / "other"
    write_store(other)
    store = tmp_path / "store"
    write_store(store)
    own = query("SELECT count(*) AS n FROM records", store)[0]["n"]
    (store / "segments" / "zz-linked.ndjson").symlink_to(next((other / "segments").iterdir()))
    return store, own


def test_a_linked_segment_fails_no_sandboxed_statement(linked_store: tuple[Path, int]) -> None:
    """`query` (sandboxed), `runs`, the Query API and MCP's SQL tool answer from the store's own
    segments, and the CLI says what it skipped."""
    store, own = linked_store
    done = _cli("query", "SELECT count(*) AS n FROM records", "--format", "json", "--store", str(store))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"n": own}] and "symbolic link" in done.stderr
    assert _cli("runs", "--store", str(store)).returncode == 0
    server = start_intake(store, http_port=0, grpc_port=None)
    try:
        answer = patient_http.post(
            f"http://127.0.0.1:{server.http_port}/v2/query",
            json={"sql": "SELECT count(*) AS n FROM records"},
            headers={"Accept": "application/json"},
            timeout=120,
        )
    finally:
        server.stop()
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"] == [{"n": own}], answer.text

    from mastrace.mcp_server._tools import Tools

    text = Tools(store).arbitrary_query("SELECT count(*) AS n FROM records")
    assert json.loads(text.split("\n")[0] if text.startswith("[") else text) == [{"n": own}]


def test_concurrent_pushes_send_no_span_twice(tmp_path: Path) -> None:
    """Four pushes of one store to one receiver at once deliver each span exactly once."""
    import mastrace

    store = tmp_path / "store"
    mastrace.configure(local=store, service_name="pushed")
    _emit(300)
    mastrace.shutdown()
    stored = query("SELECT count(*) AS n FROM records", store)[0]["n"]
    receiver = Receiver().start()
    try:
        pushes = [
            subprocess.Popen(
                [str(MASTRACE), "push", "--store", str(store), "--to", receiver.url],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=clean_env(),
            )
            for _ in range(4)
        ]
        for push in pushes:
            assert push.wait(timeout=300) == 0, push.communicate()[1]
    finally:
        receiver.stop()
    counts = Counter(receiver.ids().values())
    assert len(receiver.spans) == stored and counts == Counter({1: stored}), counts
