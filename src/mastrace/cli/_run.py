"""`mastrace run -- PROGRAM ARGS...`: run a Python program traced, with no change to its code.

PROGRAM is a console script (`massgen`), a `.py` file, or `python -m MODULE` / `python FILE`.
It runs in this process after `mastrace.configure()` and the integrations it needs; the spans go
to the local store (and to OTLP or Logfire when the environment says so), flushed at the end.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import runpy
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import Any, TextIO

from ..exceptions import MastraceError

__all__ = ["INTEGRATIONS", "cmd_run"]

INTEGRATIONS = ("massgen", "openai", "anthropic", "litellm")
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")


def _is_python(program: str) -> bool:
    return bool(_PYTHON.match(os.path.basename(program)))


def _module(module: str) -> None:
    sys.path.insert(0, os.getcwd())  # as `python -m` does
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def _script(path: str) -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))  # as `python FILE` does
    runpy.run_path(path, run_name="__main__")


def _target(program: str, args: list[str]) -> tuple[Callable[[], Any], list[str], str | None]:
    """What to call, the `sys.argv` it sees, and the distribution it comes from (if known)."""
    if _is_python(program):
        if args[:1] == ["-m"] and len(args) > 1:
            module = args[1]
            return (lambda: _module(module)), [module, *args[2:]], None
        if args and not args[0].startswith("-"):
            path = args[0]
            return (lambda: _script(path)), args, None
        raise MastraceError("give python a script or -m MODULE: mastrace run -- python -m pkg ...")
    if program.endswith(".py"):
        return (lambda: _script(program)), [program, *args], None
    found = [ep for ep in entry_points(group="console_scripts") if ep.name == program]
    if not found:
        raise MastraceError(
            f"{program!r} is not a console script of this Python environment, a .py file or "
            "'python -m MODULE': mastrace run runs Python programs in its own process"
        )
    entry = found[0]
    dist = entry.dist.name if entry.dist is not None else None
    # As the console script's own wrapper does: what the function returns is the exit status.
    return (lambda: sys.exit(entry.load()())), [program, *args], dist


def _instrument(names: Sequence[str]) -> list[str]:
    done = []
    for name in names:
        if importlib.util.find_spec(name) is None:
            continue
        module = importlib.import_module(f"mastrace.integrations.{name}")
        if getattr(module, f"instrument_{name}")():
            done.append(name)
    return done


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    """Configure mastrace, instrument what the program uses, run it, flush, return its status."""
    import mastrace

    command = list(args.program)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise MastraceError("nothing to run: mastrace run -- PROGRAM [ARGS...]")
    chosen = None
    if args.instrument is not None:
        chosen = [n.strip() for n in args.instrument.split(",") if n.strip() and n.strip() != "none"]
        unknown = sorted(set(chosen) - set(INTEGRATIONS))
        if unknown:
            known = ", ".join(INTEGRATIONS)
            raise MastraceError(f"unknown integration(s) {', '.join(unknown)}; known: {known}")
    call, argv, dist = _target(command[0], command[1:])
    if chosen is not None:
        wanted = chosen
    else:  # MassGen for the massgen command (or module), the LLM SDKs that are installed
        runs_massgen = (dist or "").lower() == "massgen" or argv[0].split(".")[0] == "massgen"
        # Not LiteLLM: importing it takes seconds (and fetches a price table) for programs that may
        # never use it; ask for it with --instrument.
        wanted = [n for n in ("massgen", "openai", "anthropic") if n != "massgen" or runs_massgen]
    store = args.store[0] if args.store else None
    mastrace.configure(**({"local": store} if store else {}))
    _instrument(wanted)
    saved = sys.argv
    sys.argv = argv
    code: Any = 0
    try:
        call()
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.argv = saved
        mastrace.shutdown()
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
