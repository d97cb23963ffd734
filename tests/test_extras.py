"""The `massgen` extra resolved as an installer does it: from pyproject.toml's own constraints, without
uv.lock. MassGen 0.1.97 declares `mcp` without an upper bound, yet cannot start with mcp 2 (it imports
`streamablehttp_client`, which mcp 2 removed), and pip alone picks mcp 2: the extra must rule it out.

The resolution asks the package index (PyPI) for metadata; uv's cache makes a repeat cheap. When the
index cannot be reached the test skips and says so; any other failure fails it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# What uv prints when the index cannot be reached (DNS, refused or dropped connections, time-outs).
_UNREACHABLE = re.compile(
    r"error sending request|dns error|failed to lookup address|Connection refused|Network is unreachable"
    r"|operation timed out|tcp connect error|Could not connect",
    re.IGNORECASE,
)

pytestmark = pytest.mark.slow


def _compile(tmp_path: Path, *extra_requirements: str) -> subprocess.CompletedProcess[str]:
    inputs = [str(ROOT / "pyproject.toml")]
    if extra_requirements:
        more = tmp_path / "more.in"
        more.write_text("\n".join(extra_requirements) + "\n")
        inputs.append(str(more))
    command = [sys.executable, "-m", "uv", "pip", "compile", *inputs, "--extra", "massgen"]
    command += ["--python-version", "3.11", "--no-header", "--no-config", "--quiet"]
    command += ["-o", str(tmp_path / "resolved.txt")]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0 and _UNREACHABLE.search(done.stderr):
        pytest.skip(
            f"the package index is unreachable, the extra cannot be resolved: {done.stderr.strip()[:300]}"
        )
    return done


def _pins(path: Path) -> dict[str, str]:
    found = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", path.read_text(), re.MULTILINE)
    return {name.lower(): version for name, version in found}


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])


def test_the_massgen_extra_resolves_to_an_mcp_massgen_can_import(tmp_path: Path) -> None:
    """pyproject.toml alone (no lock) resolves MassGen 0.1.x with an mcp 1.x (>= 1.9, < 2)."""
    done = _compile(tmp_path)
    assert done.returncode == 0, done.stderr
    pins = _pins(tmp_path / "resolved.txt")
    assert _release(pins["massgen"])[:2] == (0, 1) and _release(pins["massgen"]) >= (0, 1, 97), pins[
        "massgen"
    ]
    assert (1, 9) <= _release(pins["mcp"]) < (2,), pins["mcp"]


def test_the_massgen_extra_rules_out_mcp_2(tmp_path: Path) -> None:
    """Asked for mcp 2 as well, the extra's constraints have no solution: an installer that prefers
    the newest mcp (pip does) cannot pick one MassGen fails to import."""
    done = _compile(tmp_path, "mcp>=2")
    assert done.returncode != 0
    assert "unsatisfiable" in done.stderr and "mcp" in done.stderr, done.stderr
