"""The README's MassGen blocks run as written, in MassGen's environment: `my_config.yaml` (two agents
on a loopback OpenAI-compatible server) and an API key are what the blocks say they need."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import MODELS, write_config
from .fake_llm import Ledger, make_server

ROOT = Path(__file__).resolve().parents[1]
# tests/test_readme.py imports its helpers (`live_server`) as pytest's rootdir would put them: from tests/.
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))
_spec = importlib.util.spec_from_file_location("readme_blocks", ROOT / "tests" / "test_readme.py")
assert _spec is not None and _spec.loader is not None
readme = importlib.util.module_from_spec(_spec)
sys.modules["readme_blocks"] = readme  # its dataclasses look their module up there
_spec.loader.exec_module(readme)
BLOCKS = [b for b in readme.BLOCKS if "massgen" in b.needs]


@pytest.fixture
def llm_url() -> Iterator[str]:
    """An OpenAI-compatible server on loopback that plays MassGen's agents."""
    server = make_server(Ledger())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_the_readme_has_massgen_blocks() -> None:
    """The MassGen section's command line and Python blocks are found (so the test below runs them)."""
    assert [b.lang for b in BLOCKS] == ["bash", "python"]


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_massgen_block_runs_as_written(block: object, tmp_path: Path, llm_url: str) -> None:
    """The block exits 0; the command line block leaves a run whose report names its three agents."""
    (tmp_path / "home").mkdir()
    write_config(tmp_path, llm_url, MODELS).rename(tmp_path / "my_config.yaml")
    env = readme._env(tmp_path / "home", OPENAI_API_KEY="sk-readme-test", LITELLM_LOCAL_MODEL_COST_MAP="True")
    done = subprocess.run(
        readme._command(block, tmp_path), cwd=tmp_path, env=env, capture_output=True, text=True,
        stdin=subprocess.DEVNULL, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    if block.lang == "bash":  # type: ignore[attr-defined]
        report = (tmp_path / "ANALYSIS_REPORT.md").read_text()
        assert "| Agents | agent_a, agent_b, agent_c |" in report


def test_environment_is_massgens() -> None:
    """These tests run where MassGen is installed (`.venv-massgen`)."""
    assert importlib.util.find_spec("massgen") is not None, sys.executable
    assert os.path.basename(sys.executable).startswith("python")
