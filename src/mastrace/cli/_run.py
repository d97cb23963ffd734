"""`mastrace run -- PROGRAM ARGS...`: run a Python program traced, with no change to its code.

PROGRAM is a console script (`massgen`), a `.py` file, or `python -m MODULE` / `python FILE`.
It runs in this process after `mastrace.configure()` and the integrations it needs; the spans go
to the local store (and to OTLP or Logfire when the environment says so), flushed at the end.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import runpy
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import Any, TextIO

from ..exceptions import MastraceError

__all__ = ["INTEGRATIONS", "cmd_run"]

INTEGRATIONS = ("massgen", "openai", "anthropic")
_PYTHONS = {"python", "python3", os.path.basename(sys.executable)}


def _target(program: str, args: list[str]) -> tuple[Callable[[], Any], list[str], str | None]:
    """What to call, the `sys.argv` it sees, and the distribution it comes from (if known)."""
    if program in _PYTHONS:
        if args[:1] == ["-m"] and len(args) > 1:
            module = args[1]
            return (
                (lambda: runpy.run_module(module, run_name="__main__", alter_sys=True)),
                [module, *args[2:]],
                None,
            )
        if args and not args[0].startswith("-"):
            path = args[0]
            return (lambda: runpy.run_path(path, run_name="__main__")), args, None
        raise MastraceError("give python a script or -m MODULE: mastrace run -- python -m pkg ...")
    if program.endswith(".py"):
        return (lambda: runpy.run_path(program, run_name="__main__")), [program, *args], None
    found = [ep for ep in entry_points(group="console_scripts") if ep.name == program]
    if not found:
        raise MastraceError(
            f"{program!r} is not a console script of this Python environment, a .py file or "
            "'python -m MODULE': mastrace run runs Python programs in its own process"
        )
    entry = found[0]
    dist = entry.dist.name if entry.dist is not None else None
    return (lambda: entry.load()()), [program, *args], dist


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

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise MastraceError("nothing to run: mastrace run -- PROGRAM [ARGS...]")
    call, argv, dist = _target(command[0], command[1:])
    if args.instrument is None:
        wanted = [n for n in INTEGRATIONS if n != "massgen" or (dist or "").lower() == "massgen"]
        if "massgen" in argv[0] or (command[0] in _PYTHONS and "massgen" in " ".join(command[1:3])):
            wanted = list(dict.fromkeys(["massgen", *wanted]))
    else:
        wanted = [n.strip() for n in args.instrument.split(",") if n.strip() and n.strip() != "none"]
        unknown = sorted(set(wanted) - set(INTEGRATIONS))
        if unknown:
            raise MastraceError(
                f"unknown integration(s) {', '.join(unknown)}; known: {', '.join(INTEGRATIONS)}"
            )
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
