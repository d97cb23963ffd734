"""Process exit: normal exit, SIGTERM and SIGKILL lose nothing that was flushed, and open spans are marked."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mastrace.store import query

WAIT = 60.0  # upper bound for a child process to reach a point; never a speed requirement

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

PRELUDE = """
import sys, time
import mastrace
mastrace.configure(service_name="exit-test", local=sys.argv[1], flush_interval=float(sys.argv[2]))
tracer = mastrace.get_tracer()
"""


def start_child(body: str, store: Path, flush_interval: float = 0.5) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTRACE_", "OTEL_", "PYTEST_"))}
    script = PRELUDE + textwrap.dedent(body)
    return subprocess.Popen(
        [sys.executable, "-c", script, str(store), str(flush_interval)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_line(child: subprocess.Popen[str], expected: str) -> None:
    assert child.stdout is not None
    line = child.stdout.readline().strip()
    assert line == expected, f"child said {line!r}; stderr: {child.stderr.read() if child.stderr else ''}"


def spans(store: Path) -> dict[str, dict[str, object]]:
    rows = query("SELECT span_name, attributes FROM records", store)
    return {r["span_name"]: json.loads(r["attributes"]) for r in rows}


def test_normal_exit_ends_open_spans_marked_interrupted(tmp_path: Path) -> None:
    """A writer that exits with a span still open has it in the store with mastrace.interrupted=true."""
    child = start_child(
        """
        with tracer.span("finished"):
            pass
        tracer.start_span("left-open", attributes={"step": 3})
    """,
        tmp_path,
    )
    _, err = child.communicate(timeout=WAIT)
    assert child.returncode == 0, err
    found = spans(tmp_path)
    assert found["left-open"] == {"step": 3, "mastrace.interrupted": True}
    assert "mastrace.interrupted" not in found["finished"]


def test_sigterm_flushes_closed_spans_and_marks_open_ones(tmp_path: Path) -> None:
    """A writer sent SIGTERM inside open spans loses no closed span and marks the open ones interrupted."""
    child = start_child(
        """
        with tracer.span("outer"), tracer.span("inner"):
            for i in range(50):
                with tracer.span(f"done-{i}"):
                    pass
            print("ready", flush=True)
            time.sleep(120)
    """,
        tmp_path,
        flush_interval=60,
    )
    wait_for_line(child, "ready")
    child.send_signal(signal.SIGTERM)
    child.wait(timeout=WAIT)
    assert child.returncode == -signal.SIGTERM
    found = spans(tmp_path)
    assert {f"done-{i}" for i in range(50)} <= set(found)
    assert found["outer"]["mastrace.interrupted"] is True
    assert found["inner"]["mastrace.interrupted"] is True
    assert len(found) == 52


def test_sigkill_keeps_everything_flushed_before_the_last_interval(tmp_path: Path) -> None:
    """Spans a killed writer exported on its flush interval stay readable, and the store still reads."""
    child = start_child(
        """
        for i in range(20):
            with tracer.span(f"before-{i}"):
                pass
        print("ended", flush=True)
        with tracer.span("open-when-killed"):
            i = 0
            while True:
                with tracer.span("after", attributes={"i": i, "payload": "x" * 2000}):
                    pass
                i += 1
    """,
        tmp_path,
        flush_interval=0.05,
    )
    wait_for_line(child, "ended")
    deadline = time.monotonic() + WAIT
    before = 0
    while before < 20 and time.monotonic() < deadline:  # written by the interval, never by a flush call
        before = query("SELECT count(*) AS n FROM records WHERE span_name LIKE 'before-%'", tmp_path)[0]["n"]
        time.sleep(0.05)
    assert before == 20
    child.kill()
    child.wait(timeout=WAIT)
    assert child.returncode == -signal.SIGKILL
    rows = query("SELECT span_name, attributes FROM records", tmp_path)
    names = [r["span_name"] for r in rows]
    assert {f"before-{i}" for i in range(20)} <= set(names)
    assert "open-when-killed" not in names
    after = [json.loads(r["attributes"]) for r in rows if r["span_name"] == "after"]
    assert all(a["payload"] == "x" * 2000 for a in after)
