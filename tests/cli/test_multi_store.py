"""Many stores, one view: a run whose spans are spread over the stores of several processes reads
as one tree when the stores are given together (repeated `--store`, or a glob)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mastrace.store import connect

from .conftest import Runner, clean_env

PARENT = textwrap.dedent(
    """
    import subprocess, sys, mastrace
    store, child_script, worker_root = sys.argv[1], sys.argv[2], sys.argv[3]
    mastrace.configure(local=store, service_name="parent")
    tracer = mastrace.get_tracer("parent")
    with tracer.span("coordination.session", attributes={"massgen.task": "spread"}):
        env = mastrace.inject_env()  # TRACEPARENT for the workers
        for i in range(2):
            subprocess.run([sys.executable, "-c", child_script, f"{worker_root}/w{i}", f"agent_{i}"],
                           env={**__import__("os").environ, **env}, check=True)
    mastrace.shutdown()
    """
)
CHILD = textwrap.dedent(
    """
    import sys, mastrace
    mastrace.configure(local=sys.argv[1], service_name="worker")
    tracer = mastrace.get_tracer("worker")
    with tracer.span(f"agent.{sys.argv[2]}.round_1", attributes={"massgen.agent_id": sys.argv[2]}):
        with tracer.span(f"llm.sim.stream"):
            pass
    mastrace.shutdown()
    """
)


@pytest.fixture(scope="module")
def spread(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("spread")
    subprocess.run(
        [sys.executable, "-c", PARENT, str(root / "parent"), CHILD, str(root / "workers")],
        check=True,
        env=clean_env(),
        timeout=600,
    )
    return root


def test_one_store_shows_only_part_of_the_run(spread: Path, module_cli: Runner) -> None:
    proc = module_cli("tree", "latest", store=spread / "parent")
    assert proc.returncode == 0 and "agent.agent_0" not in proc.stdout


def test_several_stores_read_as_one_tree(spread: Path, module_cli: Runner) -> None:
    proc = module_cli(
        "tree",
        "latest",
        "--store",
        str(spread / "workers" / "w0"),
        "--store",
        str(spread / "workers" / "w1"),
        store=spread / "parent",
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    session = next(i for i, line in enumerate(lines) if "coordination.session" in line)
    agents = [line for line in lines if "agent.agent_" in line]
    assert len(agents) == 2 and all(lines.index(a) > session for a in agents)
    assert all(not a.startswith("agent.") for a in agents)  # indented under the session
    runs = module_cli(
        "runs", "--format", "json", "--store", str(spread / "workers" / "*"), store=spread / "parent"
    )
    (run,) = json.loads(runs.stdout)
    assert run["spans"] == 5 and run["name"] == "coordination.session"


def test_a_glob_names_many_stores(spread: Path) -> None:
    con = connect([spread / "parent", str(spread / "workers" / "w*")], external_access=False)
    try:
        rows = con.execute("SELECT service_name, count(*) FROM records GROUP BY 1 ORDER BY 1").fetchall()
    finally:
        con.close()
    assert rows == [("parent", 1), ("worker", 4)]


def test_query_over_several_stores_is_still_sandboxed(spread: Path, module_cli: Runner) -> None:
    proc = module_cli(
        "query",
        "SELECT count(*) AS n FROM records",
        "--format",
        "json",
        "--store",
        str(spread / "workers" / "*"),
        store=spread / "parent",
    )
    assert json.loads(proc.stdout) == [{"n": 5}]
    proc = module_cli(
        "query", "SELECT * FROM read_text('/etc/hostname')", "--store", str(spread / "workers" / "*")
    )
    assert proc.returncode == 2
