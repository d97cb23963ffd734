"""The first seconds of a traced process: the export thread prepares itself as soon as `configure()`
returns, exit waits for a live collector once that is done, and a SIGKILL loses at most the last
flush interval from the first span on."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from mastrace.store import query

WAIT = 120.0  # upper bound for a child process to reach a point; never a speed requirement
RUNS = 12

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("MASTRACE_", "OTEL_", "PYTEST_"))}


class _Receiver:
    """A loopback OTLP/HTTP receiver that counts the spans of each request it answers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.names: list[str] = []


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, _Receiver]]:
    received = _Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            request = ExportTraceServiceRequest.FromString(body)
            names = [s.name for r in request.resource_spans for ss in r.scope_spans for s in ss.spans]
            with received.lock:
                received.names.extend(names)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


SHORT_SCRIPT = """
import sys
import mastrace
mastrace.configure(service_name="short", local=False, otlp=sys.argv[1])
tracer = mastrace.get_tracer()
with tracer.span("a"):
    with tracer.span("b"):
        pass
    with tracer.span("c"):
        pass
"""


def test_a_short_script_with_otlp_delivers_every_span_at_exit() -> None:
    """A 3-span script with OTLP configured and a live collector delivers all 3 spans at exit, run after run,
    and says nothing about undelivered spans."""
    with otlp_receiver() as (url, received):
        for run in range(RUNS):
            out = subprocess.run(
                [sys.executable, "-c", SHORT_SCRIPT, url],
                env=child_env(),
                capture_output=True,
                text=True,
                timeout=WAIT,
            )
            assert out.returncode == 0, out.stderr
            assert "not delivered" not in out.stderr and "already shutdown" not in out.stderr, out.stderr
            with received.lock:
                names = sorted(received.names)
                received.names.clear()
            assert names == ["a", "b", "c"], f"run {run}: {names}; stderr: {out.stderr}"


KILLED_SCRIPT = """
import sys, time
import mastrace
from mastrace.setup._config import _RT
mastrace.configure(service_name="killed", local=sys.argv[1], flush_interval=float(sys.argv[2]))
tracer = mastrace.get_tracer()
store = next(d for d in _RT.pipeline.destinations if d.name == "local")
# What the writer will lose at most once prepared: its flush interval, as the pipeline holds it.
interval = store._interval
with tracer.span("first", attributes={"token_budget": 12}):
    pass
# The export thread prepares itself from configure() on, whether or not a batch is waiting; how long
# that takes depends on the machine's load, so wait for it rather than for a fixed time.
assert store.ready.wait(120)
since = time.monotonic()
print("interval", interval, flush=True)
ended = []
while time.monotonic() - since < 2 * interval:
    with tracer.span(f"tick-{len(ended)}"):
        pass
    ended.append(time.monotonic())
    time.sleep(interval / 20)
now = time.monotonic()
print("older-than-interval", sum(1 for t in ended if t <= now - interval), flush=True)
time.sleep(600)
"""

PREPARED_SCRIPT = """
import sys
import mastrace
from mastrace.setup._config import _RT
mastrace.configure(service_name="idle", local=sys.argv[1])
ready = all(d.ready.wait(120) for d in _RT.pipeline.destinations)
print(ready, "mastrace.scrubbing._engine" in sys.modules, "mastrace.pipeline._transform" in sys.modules)
"""


def test_the_export_thread_prepares_itself_before_any_span(tmp_path: Path) -> None:
    """Right after `configure()`, with no span made, the export thread imports the transform and builds the
    scrubber (before, that happened when the first batch was exported)."""
    out = subprocess.run(
        [sys.executable, "-c", PREPARED_SCRIPT, str(tmp_path)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "True"]


def test_a_sigkill_keeps_every_span_older_than_the_flush_interval_from_the_first_on(tmp_path: Path) -> None:
    """Killed two flush intervals after its export thread was prepared, a writer has its first span (which
    ended before) and every span that ended more than one interval before in the store."""
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_SCRIPT, str(tmp_path), "0.5"],
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    try:
        kind, interval = child.stdout.readline().split() or ["", ""]
        assert kind == "interval" and float(interval) == 0.5, child.stderr.read() if child.stderr else ""
        line = child.stdout.readline().split()
        assert line and line[0] == "older-than-interval", child.stderr.read() if child.stderr else ""
        older = int(line[1])
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.communicate(timeout=WAIT)
    assert child.returncode == -signal.SIGKILL
    names = {r["span_name"] for r in query("SELECT span_name FROM records", tmp_path)}
    assert older > 0
    assert {"first", *(f"tick-{i}" for i in range(older))} <= names


def test_exit_waits_for_the_preparation_before_the_collector_budget() -> None:
    """The OTLP exit budget counts from the moment the export thread is prepared: with a budget of 0.2 s and
    a preparation that takes longer, every span still reaches a live collector."""
    script = textwrap.dedent(
        """
        import sys, time
        from mastrace.scrubbing import _engine

        original = _engine.Scrubber.__init__

        def slow_init(self, *args, **kwargs):
            time.sleep(1.0)  # a loaded machine: imports and the rule table take a while
            original(self, *args, **kwargs)

        _engine.Scrubber.__init__ = slow_init
        import mastrace
        mastrace.configure(service_name="slow", local=False, otlp=sys.argv[1], otlp_exit_timeout=0.2)
        with mastrace.get_tracer().span("only"):
            pass
        """
    )
    with otlp_receiver() as (url, received):
        start = time.monotonic()
        out = subprocess.run(
            [sys.executable, "-c", script, url], env=child_env(), capture_output=True, text=True, timeout=WAIT
        )
        assert out.returncode == 0, out.stderr
        assert time.monotonic() - start >= 1.0  # the child did wait for its preparation
        with received.lock:
            assert received.names == ["only"], out.stderr
    assert "not delivered" not in out.stderr


FIRST_EXPORT_SCRIPT = """
import json, re, sys, threading
import mastrace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from mastrace.setup._config import _RT

memory = InMemorySpanExporter()
mastrace.configure(service_name="first", local=sys.argv[1], exporters=[memory], flush_interval=600)
assert all(d.ready.wait(120) and d.warmed.wait(120) for d in _RT.pipeline.destinations)

from mastrace.scrubbing import _engine, _matchers
from mastrace.store import _rows

counts = {"key_matched": 0, "resource_scrubbed": 0, "resource_encoded": 0, "scratch_cloned": 0, "compiled": 0}

def on_export_thread():
    return threading.current_thread().name.startswith("mastrace-export-")

def counting(owner, name, count, when=lambda *a: True):
    original = getattr(owner, name)
    def wrapper(*args, **kwargs):
        if on_export_thread() and when(*args):
            counts[count] += 1
        return original(*args, **kwargs)
    setattr(owner, name, wrapper)

counting(_engine.Scrubber, "_match_key", "key_matched")  # a key not matched before (cached after)
counting(_engine.Scrubber, "scrub_attributes", "resource_scrubbed")  # a resource not scrubbed before
counting(_rows, "_resource_fields", "resource_encoded")  # a resource not encoded before
counting(
    _matchers.HyperscanMatcher, "select", "scratch_cloned",
    lambda self, text: getattr(self._local, "scratch", None) is None,  # the thread's first scan
)
compiler = getattr(re, "_compiler", None) or re.sre_compile
counting(compiler, "compile", "compiled")

tracer = mastrace.get_tracer()
with tracer.span("agent.a.round_1", attributes={
    "gen_ai.operation.name": "chat",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.request.temperature": 0.2,
    "gen_ai.usage.input_tokens": 42,
    "massgen.agent_id": "a",
}):
    pass
modules = set(sys.modules)
result = mastrace.force_flush(timeout=120)
counts["new_modules"] = sorted(set(sys.modules) - modules)
counts["exported"] = result.exported
counts["complete"] = result.complete
counts["memory"] = [s.name for s in memory.get_finished_spans()]
print(json.dumps(counts))
"""


def test_once_warmed_up_the_first_export_does_no_first_use_work(tmp_path: Path) -> None:
    """Once its export thread is prepared and warmed up, a process's first export matches no attribute key
    of mastrace's own for the first time, scrubs and encodes no resource, clones no scratch space, compiles
    no regular expression and imports nothing (counted, not timed); the warm-up's sample spans reach no
    destination and no count: the store and the application's exporter hold the one real span."""
    out = subprocess.run(
        [sys.executable, "-c", FIRST_EXPORT_SCRIPT, str(tmp_path)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    counts = json.loads(out.stdout)
    assert counts == {
        "key_matched": 0,
        "resource_scrubbed": 0,
        "resource_encoded": 0,
        "scratch_cloned": 0,
        "compiled": 0,
        "new_modules": [],
        "exported": 2,  # the store and the exporter, once each
        "complete": True,
        "memory": ["agent.a.round_1"],
    }
    assert query("SELECT span_name FROM records", tmp_path) == [{"span_name": "agent.a.round_1"}]


CALLBACK_SCRIPT = """
import sys
import mastrace
from mastrace.setup._config import _RT

seen = []
def callback(match):
    seen.append(match.path)
    return None

options = mastrace.ScrubbingOptions(callback=callback)
mastrace.configure(service_name="cb", local=sys.argv[1], scrubbing=options)
assert all(d.warmed.wait(120) for d in _RT.pipeline.destinations)
print(len(seen))
with mastrace.get_tracer().span("call", attributes={"api_key": "not-for-anyone-1234"}):
    pass
mastrace.force_flush(timeout=120)
print(seen)
"""


def test_the_warm_up_never_calls_the_application_s_scrubbing_callback(tmp_path: Path) -> None:
    """A scrubbing callback is the application's code: it sees the secrets of the application's spans, never
    the warm-up's sample spans."""
    out = subprocess.run(
        [sys.executable, "-c", CALLBACK_SCRIPT, str(tmp_path)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["0", "[('attributes', 'api_key')]"]


LEAN_SCRIPT = """
import sys
import mastrace
from mastrace.setup._config import _RT
mastrace.configure(service_name="lean", local=sys.argv[1])
assert all(d.ready.wait(120) and d.warmed.wait(120) for d in _RT.pipeline.destinations)
from mastrace.scrubbing import _matchers
loaded = [m for m in ("tempfile", "mastrace.scrubbing._python_matcher") if m in sys.modules]
print(_matchers.available()[0], *loaded)
"""


def test_with_the_database_cached_the_preparation_imports_only_what_the_export_needs(tmp_path: Path) -> None:
    """The first flush right after `configure()` waits for the export thread's preparation: with the Hyperscan
    database in the cache (the second process) and a compiled matcher installed, it imports neither
    `tempfile` (only writing the cache needs it) nor the pure-Python fallback matcher."""
    env = {**child_env(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    lines = []
    for run in range(2):
        out = subprocess.run(
            [sys.executable, "-c", LEAN_SCRIPT, str(tmp_path / f"store-{run}")],
            env=env,
            capture_output=True,
            text=True,
            timeout=WAIT,
        )
        assert out.returncode == 0, out.stderr
        lines.append(out.stdout.split())
    if lines[1][0] == "python":
        pytest.skip("neither hyperscan nor re2 is installed: the Python matcher is the one in use")
    assert lines[1] == [lines[1][0]], lines
