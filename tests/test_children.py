"""Workers started with multiprocessing's `spawn` or `forkserver` trace like the configured process
that started them, or say why not."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import mastrace
from mastrace.setup._children import CHILD_SETTINGS_ENV
from mastrace.store import query

WORKER = """
import mastrace

def work(label):
    with mastrace.get_tracer("worker").span("worker.task", attributes={"label": label}):
        pass
"""

MAIN = """
import multiprocessing, sys, warnings
sys.path.insert(0, sys.argv[2])
import mastrace, worker

if __name__ == "__main__":
    mastrace.configure(local=sys.argv[1], service_name="parent", **eval(sys.argv[4]))
    ctx = multiprocessing.get_context(sys.argv[3])
    process = ctx.Process(target=worker.work, args=("process",))
    process.start()
    process.join()
    with ctx.Pool(2) as pool:
        pool.map(worker.work, ["pool"] * 4)
    mastrace.shutdown()
"""


def run_parent(tmp_path: Path, method: str, extra: str = "{}") -> subprocess.CompletedProcess[str]:
    (tmp_path / "worker.py").write_text(textwrap.dedent(WORKER))
    (tmp_path / "main.py").write_text(textwrap.dedent(MAIN))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTRACE_", "OTEL_"))}
    return subprocess.run(
        [sys.executable, str(tmp_path / "main.py"), str(tmp_path / "store"), str(tmp_path), method, extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_worker_started_by_spawn_or_forkserver_traces_into_the_parents_store(
    tmp_path: Path, method: str
) -> None:
    """A `Process` and a `Pool`'s workers write their spans to the parent's store, as its service."""
    proc = run_parent(tmp_path, method)
    assert proc.returncode == 0, proc.stderr
    rows = query(
        "SELECT attributes->>'label' AS label, service_name, process_pid FROM records", tmp_path / "store"
    )
    assert sorted(r["label"] for r in rows) == ["pool"] * 4 + ["process"]
    assert {r["service_name"] for r in rows} == {"parent"}
    assert len({r["process_pid"] for r in rows}) >= 2  # written by the workers themselves
    assert "warn" not in proc.stderr.lower()


@pytest.mark.slow
def test_what_cannot_be_inherited_is_said_once_per_worker(tmp_path: Path) -> None:
    """Extra exporter objects cannot cross to a spawned worker: it traces with the rest and warns how."""
    memory = "__import__('opentelemetry.sdk.trace.export.in_memory_span_exporter', fromlist=['x'])"
    extra = f"{{'exporters': [{memory}.InMemorySpanExporter()]}}"
    proc = run_parent(tmp_path, "spawn", extra)
    assert proc.returncode == 0, proc.stderr
    assert len(query("SELECT span_id FROM records", tmp_path / "store")) == 5
    assert "1 extra exporter(s)" in proc.stderr and "call configure() in the worker" in proc.stderr


def test_settings_reach_the_environment_only_while_configured(tmp_path: Path) -> None:
    """configure() publishes what workers need (no secret, no object); shutdown() takes it back."""
    mastrace.configure(local=tmp_path, logfire=False, service_name="svc", retention="7d")
    import json

    published = json.loads(os.environ[CHILD_SETTINGS_ENV])
    assert published["local"] == str(tmp_path.resolve()) and published["service_name"] == "svc"
    assert published["retention"] == "604800s" and "left_out" not in published
    mastrace.shutdown()
    assert CHILD_SETTINGS_ENV not in os.environ


def test_a_process_that_is_not_a_multiprocessing_worker_is_left_alone(tmp_path: Path) -> None:
    """A plain subprocess inheriting the settings (a tool the app runs) does not start tracing."""
    mastrace.configure(local=tmp_path / "store")
    script = (
        "import mastrace\nwith mastrace.get_tracer().span('x'):\n    pass\nprint(mastrace.is_configured())"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600, check=True
    )
    mastrace.shutdown()
    assert out.stdout.strip() == "False"


NESTED = """
import multiprocessing, os, sys
sys.path.insert(0, sys.argv[2])
import mastrace, worker

if __name__ == "__main__":
    ctx = multiprocessing.get_context(sys.argv[3])
    for run, store in (("first", "store-a"), ("second", "store-b")):
        mastrace.configure(local=os.path.join(sys.argv[1], store), service_name=run)
        with mastrace.get_tracer().span("parent", attributes={"label": run}):
            os.environ.update(mastrace.inject_env())
            with ctx.Pool(1) as pool:
                pool.map(worker.work, [run])
        mastrace.shutdown()
"""


@pytest.mark.slow
@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_each_worker_follows_the_environment_its_parent_had_when_it_started(
    tmp_path: Path, method: str
) -> None:
    """A worker nests under the span whose `inject_env()` was in the environment when it started, and
    writes to the store configured then, also when the forkserver started under an earlier one."""
    (tmp_path / "worker.py").write_text(textwrap.dedent(WORKER))
    (tmp_path / "main.py").write_text(textwrap.dedent(NESTED))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTRACE_", "OTEL_"))}
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "main.py"), str(tmp_path), str(tmp_path), method],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    for run, store in (("first", "store-a"), ("second", "store-b")):
        rows = query(
            "SELECT span_name, attributes->>'label' AS label, trace_id, span_id, parent_span_id, "
            "service_name FROM records ORDER BY span_name",
            tmp_path / store,
        )
        parent, task = rows
        assert (parent["label"], task["label"], task["service_name"]) == (run, run, run)
        assert (task["trace_id"], task["parent_span_id"]) == (parent["trace_id"], parent["span_id"])
