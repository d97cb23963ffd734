"""The process-level facts of a configuration's `benchmark` section, gathered off the program's path.

MASEval's fields: git (commit, branch, dirty, untracked files, origin, last commit's message, author
and date), python, system (platform, OS version, processor, CPU count), installed packages (from
`importlib.metadata`, never `pip freeze`) and the environment variables that shape an AI run.
The first `Registry` that includes the section (and `instrument_massgen()`) starts gathering them on a
daemon thread; a coordination session does not wait for them, only code that asks for the section
itself (`Registry.collect_all_configs()`) does.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import socket
import subprocess
import sys
import threading
from datetime import datetime
from typing import Any

__all__ = [
    "benchmark_info",
    "benchmark_info_ready",
    "environment_info",
    "git_info",
    "package_versions",
    "prefetch_benchmark_info",
    "python_info",
    "system_info",
]

_GIT_TIMEOUT_S = 2.0


def benchmark_info(*, refresh: bool = False) -> dict[str, Any]:
    """Process-level facts for the `benchmark` section: git, python, system, packages, environment.

    Gathered once per process (git through `git` subprocesses with a short timeout; packages from
    `importlib.metadata`), on a background thread (`prefetch_benchmark_info()`); a call made while it
    runs waits for it. Returns a new dict each call; the nested values are shared.

    Args:
        refresh: Gather again instead of using the cached result.
    """
    with _gather_lock:  # a gathering under way (the prefetch) is waited for, not repeated
        if refresh:
            _cached_benchmark_info.cache_clear()
        info = dict(_cached_benchmark_info(os.getpid()))
    _ready_pid[0] = os.getpid()
    return info


def benchmark_info_ready() -> bool:
    """Whether `benchmark_info()` would return at once (the section is gathered in this process)."""
    return _ready_pid[0] == os.getpid()


_ready_pid = [0]


_prefetch_lock = threading.Lock()
_gather_lock = threading.Lock()
_prefetched_pid = 0


def _reset_locks_in_child() -> None:
    # A fork while the prefetch thread held a lock would leave it held forever in the child.
    global _prefetch_lock, _gather_lock
    _prefetch_lock, _gather_lock = threading.Lock(), threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_locks_in_child)


def prefetch_benchmark_info() -> None:
    """Start gathering the benchmark section on a daemon thread, once per process.

    Git runs subprocesses and the package list reads every installed distribution: 0.1-0.2 s on
    an idle machine, seconds on a loaded one, that would otherwise block the traced program. A
    `Registry` that includes the section calls this when it is created, and so does
    `instrument_massgen()`.
    """
    global _prefetched_pid
    pid = os.getpid()
    with _prefetch_lock:
        if _prefetched_pid == pid:
            return
        _prefetched_pid = pid
    threading.Thread(target=benchmark_info, name="mastrace-benchmark-info", daemon=True).start()


@functools.lru_cache(maxsize=1)
def _cached_benchmark_info(pid: int) -> dict[str, Any]:  # keyed by pid: a forked child gathers again
    return {
        "timestamp": datetime.now().isoformat(),
        "git": git_info(),
        "python": python_info(),
        "system": system_info(),
        "packages": package_versions(),
        "environment": environment_info(),
    }


def _git(args: list[str], cwd: str | None) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=_GIT_TIMEOUT_S,
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return done.stdout


def git_info(repo_path: str | None = None) -> dict[str, Any]:
    """The git checkout at `repo_path` (default: the cwd), with MASEval's fields: commit, branch,
    dirty state, untracked file count, origin URL, and the last commit's message, author and date.

    Returns `{"error": ..., "error_type": ...}` when git is missing, slow, or it is not a checkout.
    """
    try:
        commit, branch, root = _git(
            ["rev-parse", "HEAD", "--abbrev-ref", "HEAD", "--show-toplevel"], repo_path
        ).split("\n")[:3]
        # One `status` gives both: tracked changes make it dirty (GitPython's is_dirty() default),
        # untracked files are counted apart.
        status = _git(["status", "--porcelain"], repo_path).splitlines()
        # Author, ISO date and message of the last commit, split by NUL (a message may hold anything).
        author, date, message = (
            _git(["log", "-1", "--format=%an <%ae>%x00%cI%x00%B"], repo_path) + "\0\0"
        ).split("\0")[:3]
    except Exception as exc:
        return {"error": f"Failed to get git info: {_short_error(exc)}", "error_type": type(exc).__name__}
    return {
        "commit_hash": commit,
        "commit_hash_short": commit[:7],
        "branch": f"detached@{commit[:7]}" if branch == "HEAD" else branch,
        "is_dirty": any(not line.startswith("??") for line in status),
        "untracked_files": sum(1 for line in status if line.startswith("??")),
        "remote_url": _origin(repo_path),
        "commit_message": message.strip(),
        "commit_author": author,
        "commit_date": date.strip(),
        "repo_root": root,
    }


def _origin(repo_path: str | None) -> str | None:
    """The `origin` remote's URL, or None when there is none."""
    try:
        return _git(["remote", "get-url", "origin"], repo_path).strip() or None
    except Exception:
        return None


def _short_error(exc: Exception) -> str:
    if isinstance(exc, subprocess.CalledProcessError):
        return (exc.stderr or "").strip().splitlines()[0] if (exc.stderr or "").strip() else str(exc)
    return str(exc)


def python_info() -> dict[str, Any]:
    """The Python interpreter: version, implementation, executable."""
    v = sys.version_info
    return {
        "version": platform.python_version(),
        "version_full": sys.version,
        "version_info": {
            "major": v.major,
            "minor": v.minor,
            "micro": v.micro,
            "releaselevel": v.releaselevel,
            "serial": v.serial,
        },
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "compiler": platform.python_compiler(),
    }


def system_info() -> dict[str, Any]:
    """The machine: platform, OS and its version, architecture, processor, CPU count, hostname."""
    uname = platform.uname()  # read once: platform.processor() may run a subprocess each call
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "system": uname.system,
        "release": uname.release,
        "version": uname.version,
        "machine": uname.machine,
        "processor": uname.processor,
        "architecture": platform.architecture()[0],
        "cpu_count": os.cpu_count(),
    }


_ENV_PATTERNS = (
    "OPENAI", "ANTHROPIC", "GOOGLE", "GEMINI", "HUGGINGFACE", "HF_", "WANDB", "LANGFUSE",
    "CUDA", "PYTORCH", "TF_", "PATH", "PYTHONPATH", "VIRTUAL_ENV", "CONDA",
)  # fmt: skip
_ENV_SECRET_WORDS = (
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "SESSION",
)


def environment_info() -> dict[str, str]:
    """The environment variables that shape an AI run (MASEval's selection: provider, framework and
    Python-environment names), never one whose name says it holds a secret (key, token, ...).

    Values are still scrubbed like every attribute before they leave the process.
    """
    out = {}
    for name, value in os.environ.items():
        upper = name.upper()
        if any(word in upper for word in _ENV_SECRET_WORDS):
            continue
        if any(pattern in upper for pattern in _ENV_PATTERNS):
            out[name] = value
    return dict(sorted(out.items()))


def package_versions() -> dict[str, str]:
    """Installed distributions, name → version, from `importlib.metadata` (sorted by name).

    Only the header of each distribution's metadata is read (`Name:` and `Version:` come first):
    the full e-mail parse `Distribution.metadata` does is ten times slower over a few hundred packages.
    """
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name, version = _name_and_version(dist)
        if name and version is not None and name not in found:
            found[name] = version
    return dict(sorted(found.items(), key=lambda kv: kv[0].lower()))


def _name_and_version(dist: importlib.metadata.Distribution) -> tuple[str | None, str | None]:
    try:
        text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    except Exception:  # an unreadable or broken install: skipped, as pip would
        return None, None
    name = version = None
    for line in text.splitlines():
        if not line:  # the end of the header
            break
        if line.startswith("Name:"):
            name = line[5:].strip()
        elif line.startswith("Version:"):
            version = line[8:].strip()
        if name and version:
            break
    return name or None, version
