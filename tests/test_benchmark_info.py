"""The configuration's `benchmark` section: MASEval's fields, gathered once per process, off the
program's path (a session never waits for it)."""

from __future__ import annotations

import importlib.metadata
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import mastrace
from mastrace.setup import _benchmark_info as info_module
from mastrace.setup._benchmark_info import benchmark_info, benchmark_info_ready, environment_info, git_info
from mastrace.testing import CapturedSpans

DEADLINE_S = 60.0


def _wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {DEADLINE_S:.0f} s")
        time.sleep(0.01)


def test_benchmark_info_is_gathered_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """After one gathering, later calls run no git subprocess."""
    benchmark_info(refresh=True)
    runs: list[Any] = []
    real_run = subprocess.run
    monkeypatch.setattr(info_module.subprocess, "run", lambda *a, **k: runs.append(a) or real_run(*a, **k))
    first = benchmark_info()
    second = benchmark_info()
    assert runs == [] and first == second and benchmark_info_ready()


def test_benchmark_info_lists_python_system_packages_and_environment() -> None:
    """Python, system (with MASEval's processor and OS version), packages and environment are there."""
    info = benchmark_info()
    assert info["python"]["implementation"] and info["python"]["version"].count(".") == 2
    assert {"platform", "machine", "cpu_count", "hostname", "processor", "version"} <= set(info["system"])
    assert info["packages"]["opentelemetry-sdk"] == importlib.metadata.version("opentelemetry-sdk")
    assert isinstance(info["environment"], dict)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=dev@example.com", "-c", "user.name=Dev Eloper", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def test_git_info_reads_commit_branch_dirty_state_and_the_last_commit(tmp_path: Path) -> None:
    """A checkout reports its commit, branch, dirty state, untracked files, origin and last commit."""
    _git(tmp_path, "init", "-q", "-b", "trunk")
    (tmp_path / "a.txt").write_text("one")
    _git(tmp_path, "add", "a.txt")
    _git(tmp_path, "commit", "-q", "-m", "first line\n\nbody with \x1f odd bytes")
    _git(tmp_path, "remote", "add", "origin", "https://example.com/team/repo.git")
    (tmp_path / "untracked.txt").write_text("new")
    clean = git_info(str(tmp_path))
    (tmp_path / "a.txt").write_text("two")
    dirty = git_info(str(tmp_path))
    assert len(clean["commit_hash"]) == 40 and clean["commit_hash_short"] == clean["commit_hash"][:7]
    assert clean["branch"] == "trunk" and clean["is_dirty"] is False and clean["untracked_files"] == 1
    assert clean["commit_message"].startswith("first line\n\nbody")
    assert clean["commit_author"] == "Dev Eloper <dev@example.com>"
    assert clean["commit_date"][:4].isdigit() and "T" in clean["commit_date"]
    assert clean["remote_url"] == "https://example.com/team/repo.git"
    assert dirty["is_dirty"] is True


def test_git_info_without_a_remote_says_none(tmp_path: Path) -> None:
    """A checkout with no origin has `remote_url` None rather than an error."""
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "commit", "-q", "--allow-empty", "-m", "empty")
    assert git_info(str(tmp_path))["remote_url"] is None


def test_git_info_outside_a_checkout_is_an_error_entry(tmp_path: Path) -> None:
    """Outside a git checkout the section says why instead of raising."""
    info = git_info(str(tmp_path))
    assert set(info) == {"error", "error_type"} and info["error"].startswith("Failed to get git info")


def test_environment_keeps_run_shaping_variables_and_never_secret_named_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OPENAI_BASE_URL is kept; *_API_KEY, *_TOKEN, *_SECRET, passwords and unrelated names are not."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    for name in ("OPENAI_API_KEY", "HF_TOKEN", "WANDB_SECRET", "CONDA_PASSWORD", "ANTHROPIC_AUTH", "HOME_X"):
        monkeypatch.setenv(name, "sk-should-not-appear")
    env = environment_info()
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:9/v1" and env["CUDA_VISIBLE_DEVICES"] == "0"
    assert "sk-should-not-appear" not in env.values()


def test_the_first_registry_starts_gathering_in_the_background(monkeypatch: pytest.MonkeyPatch) -> None:
    """Creating a `Registry` starts the gathering on a daemon thread; the section is ready later, unasked."""
    monkeypatch.setattr(info_module, "_prefetched_pid", 0)
    benchmark_info(refresh=True)
    info_module._ready_pid[0] = 0
    mastrace.Registry()
    _wait_for(benchmark_info_ready, "the background gathering")


def test_a_session_starts_while_the_facts_are_still_being_gathered(
    monkeypatch: pytest.MonkeyPatch, mastrace_spans: CapturedSpans
) -> None:
    """A session opened during a slow gathering starts at once; its config is attached when it ends."""
    release = threading.Event()
    entered = threading.Event()
    real = info_module._cached_benchmark_info.__wrapped__

    def slow(pid: int) -> dict[str, Any]:
        entered.set()
        release.wait(DEADLINE_S)
        return real(pid)

    monkeypatch.setattr(
        info_module, "_cached_benchmark_info", info_module.functools.lru_cache(maxsize=1)(slow)
    )
    monkeypatch.setattr(info_module, "_prefetched_pid", 0)
    info_module._ready_pid[0] = 0
    info_module.prefetch_benchmark_info()
    _wait_for(entered.is_set, "the gathering thread to start")

    class Orchestrator(mastrace.CoordinationMixin):
        mastrace_registry = mastrace.Registry()

    class Agent(mastrace.AgentMixin):
        agent_id = "a"

    with Orchestrator().coordination_session("task", ["a"]) as session:
        opened_before_release = not release.is_set()
        assert session.config_hash is not None  # known at once: the hash leaves the process facts out
        with Agent().agent_round(0):  # a round started right away carries the hash
            pass
        release.set()
    session_span = mastrace_spans.one("coordination.session")
    assert opened_before_release
    assert session_span.attributes["mastrace.config.hash"] == session.config_hash is not None
    assert mastrace_spans.one("agent.a.round_0").attributes["mastrace.config.hash"] == session.config_hash
    assert '"packages"' in str(session_span.attributes["mastrace.config"])


def test_the_package_list_equals_importlib_metadatas_full_parse() -> None:
    """Reading only each metadata header gives the same names and versions as the full parse."""
    full: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        if name and name not in full:
            full[name] = dist.version
    assert info_module.package_versions() == dict(sorted(full.items(), key=lambda kv: kv[0].lower()))


def test_odd_and_broken_installs_are_skipped_or_read_as_written(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A dist-info without a name, one with an empty METADATA, and one with a body are handled."""
    for folder, text in (
        ("noname-1.0.dist-info", "Metadata-Version: 2.1\nVersion: 1.0\n"),
        ("empty-2.0.dist-info", ""),
        ("Odd_Pkg-3.0.dist-info", "Metadata-Version: 2.1\nName: Odd_Pkg\nVersion: 3.0\n\nName: not-this\n"),
    ):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "METADATA").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    packages = info_module.package_versions()
    assert packages["Odd_Pkg"] == "3.0" and "not-this" not in packages
    assert not any(name in packages for name in ("noname", "empty"))
