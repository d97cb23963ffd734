"""A traced process stays light: configuring mastrace and writing spans loads no reader, no asyncio."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import mastrace
from mastrace import Registry
from mastrace.testing import CapturedSpans

LIGHT = textwrap.dedent(
    """
    import sys, mastrace
    mastrace.configure(local=sys.argv[1], service_name="light")
    tracer = mastrace.get_tracer("light")
    with tracer.span("coordination.session"):
        with tracer.span("agent.a.round_1", attributes={"password": "hunter22", "config": {"k": 1}}):
            pass
    result = mastrace.force_flush(timeout=10)
    assert result.exported == 2, result
    heavy = [m for m in ("duckdb", "asyncio", "wrapt", "importlib.metadata") if m in sys.modules]
    print(",".join(heavy) or "none")
    """
)


def test_the_write_path_loads_no_reader(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTRACE_", "OTEL_"))}
    proc = subprocess.run(
        [sys.executable, "-c", LIGHT, str(tmp_path / "store")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "none"
    # ...and what it wrote is scrubbed all the same
    rows = b"".join(f.read_bytes() for f in (tmp_path / "store" / "segments").glob("*.ndjson"))
    assert b"hunter22" not in rows and b"Scrubbed" in rows


def test_the_first_session_does_not_wait_for_the_benchmark_section(
    mastrace_spans: CapturedSpans, monkeypatch: object
) -> None:
    """Gathering git and packages happens off the caller's thread, and never inside the session span."""
    from mastrace import registry as registry_module

    slow_calls: list[float] = []
    original = registry_module.package_versions

    def slow_packages() -> dict[str, str]:
        time.sleep(0.3)
        slow_calls.append(time.monotonic())
        return original()

    registry_module._cached_benchmark_info.cache_clear()
    registry_module._prefetched_pid = 0
    setattr(registry_module, "package_versions", slow_packages)  # noqa: B010
    try:

        class Orchestrator(mastrace.CoordinationMixin):
            def __init__(self, registry: Registry) -> None:
                self.mastrace_registry = registry

        registry = Registry()  # starts gathering in the background
        with Orchestrator(registry).coordination_session("task", ["a"]):
            pass
    finally:
        setattr(registry_module, "package_versions", original)  # noqa: B010
    span = mastrace_spans.one("coordination.session")
    assert span.end_time is not None and span.start_time is not None
    assert (span.end_time - span.start_time) / 1e9 < 0.2  # the 0.3 s gathering is not in the span
    assert len(slow_calls) == 1
    config = mastrace_spans.attributes("coordination.session")["mastrace.config"]
    assert "packages" in str(config)
