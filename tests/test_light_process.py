"""A traced process stays light: configuring mastrace and writing spans loads no reader, no asyncio."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

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
