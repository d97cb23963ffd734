"""A live multi-agent run in a process of its own, for the tests of pending spans: a coordination
session whose agents' rounds are all open at once, ended (or left open) when the test says."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

WAIT = 120.0  # an upper bound on a loaded machine, never a speed requirement

LIVE = textwrap.dedent(
    """
    import os, sys, time
    import mastrace

    store, control, agents, gap = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    mastrace.configure(local=store, service_name="live-run")
    tracer = mastrace.get_tracer("live")
    with tracer.span("coordination.session", attributes={"massgen.task": "live"}) as session:
        time.sleep(gap)  # the rounds start this long after the session
        rounds = []
        for i in range(agents):
            agent = "agent_" + "abcdefgh"[i]
            attributes = {"massgen.agent_id": agent, "round": 0}
            rounds.append(tracer.start_span(f"agent.{agent}.round_0", attributes))
        with tracer.span("llm.quick.call", attributes={"massgen.agent_id": "agent_a"}):
            pass  # one span that ended: the run has something in `records` too
        with open(control + ".tmp", "w") as out:
            out.write(format(session.span_context.trace_id, "032x") + " " + str(time.time_ns()))
        os.replace(control + ".tmp", control + ".started")
        while not os.path.exists(control + ".release"):
            time.sleep(0.02)
        for span in rounds:
            span.end()
    mastrace.shutdown()
    open(control + ".done", "w").close()
    """
)


@dataclass
class LiveRun:
    """The run's process, its trace id, and when (ns since the epoch) its rounds had started."""

    proc: subprocess.Popen[bytes]
    control: Path
    trace_id: str
    started_ns: int

    def release(self) -> None:
        """End the rounds and the session, and wait until the process has shut down."""
        (self.control.parent / (self.control.name + ".release")).touch()
        assert self.proc.wait(timeout=WAIT) == 0

    def kill(self) -> None:
        """SIGKILL the process with its spans still open."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=WAIT)


def _env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MASTRACE_", "OTEL_", "LOGFIRE_")) and k != "TRACEPARENT"
    }


@contextmanager
def live_run(store: Path, control: Path, agents: int = 3, gap: float = 0.0) -> Iterator[LiveRun]:
    """Start a run of `agents` agents writing into `store` (their rounds `gap` seconds after the
    session); yields once every round has started."""
    argv = [sys.executable, "-c", LIVE, str(store), str(control), str(agents), str(gap)]
    proc = subprocess.Popen(argv, env=_env())
    started = control.parent / (control.name + ".started")
    try:
        deadline = time.monotonic() + WAIT
        while not started.exists():
            assert proc.poll() is None, "the live run stopped before its rounds started"
            assert time.monotonic() < deadline, "the live run did not start"
            time.sleep(0.02)
        trace_id, started_ns = started.read_text().split()
        yield LiveRun(proc, control, trace_id, int(started_ns))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def wait_for(check: object, what: str, timeout: float = WAIT) -> object:
    """Poll `check()` until it returns something true; return it (fail after `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()  # type: ignore[operator]
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
