"""The demo is reproducible: the same `--seed` gives the same run (names, attributes, usage, votes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from mastrace.store import query

DEMO = Path(__file__).resolve().parents[1] / "examples" / "coordination_demo.py"
_VARYING = (
    "time",
    "duration",
    "latency",
    "_at",
    "timestamp",
    "first_chunk",
    "mastrace.config",
    "benchmark",
    "conversation.id",  # one new id per session, like the trace id
)


def _run(store: Path, seed: str) -> list[tuple[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTRACE_", "OTEL_"))}
    subprocess.run(
        [sys.executable, str(DEMO), "--store", str(store), "--seed", seed],
        check=True,
        capture_output=True,
        env=env,
        timeout=600,
    )
    shape = []
    for row in query("SELECT span_name, CAST(attributes AS VARCHAR) AS a FROM records", store):
        attributes = {k: v for k, v in json.loads(row["a"]).items() if not any(t in k for t in _VARYING)}
        shape.append((row["span_name"], json.dumps(attributes, sort_keys=True)))
    return sorted(shape)


def test_the_same_seed_gives_the_same_run(tmp_path: Path) -> None:
    first = _run(tmp_path / "one", "7")
    second = _run(tmp_path / "two", "7")
    assert len(first) > 40
    only_first = list((Counter(first) - Counter(second)).elements())
    only_second = list((Counter(second) - Counter(first)).elements())
    assert first == second, f"only in the first run: {only_first}\nonly in the second: {only_second}"
    assert any("massgen.usage.input" in attributes for _, attributes in first)
