"""`mastrace run -- PROGRAM ARGS...`: run a Python program traced, with no change to its code.

PROGRAM is a console script (`massgen`), a `.py` file, or `python -m MODULE` / `python FILE`.
It runs in this process after `mastrace.configure()` and the integrations it needs; the spans go
to the local store (and to OTLP or Logfire when the environment says so), flushed at the end.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import runpy
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import Any, TextIO

from ..exceptions import MastraceError

__all__ = ["INTEGRATIONS", "RUN_ENV", "cmd_run"]

RUN_ENV = "MASTRACE_RUN"
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


def _script_path(path: str) -> str:
    if not os.path.isfile(path):
        raise MastraceError(f"no such Python file: {path}")
    return path


def _module_name(module: str) -> str:
    sys.path.insert(0, os.getcwd())  # where `python -m` looks first
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    finally:
        sys.path.pop(0)
    if found is None:
        raise MastraceError(f"no module named {module!r} in this Python environment")
    return module


def _target(program: str, args: list[str]) -> tuple[Callable[[], Any], list[str], str | None]:
    """What to call, the `sys.argv` it sees, and the distribution it comes from (if known)."""
    if _is_python(program):
        if args[:1] == ["-m"] and len(args) > 1:
            module = _module_name(args[1])
            return (lambda: _module(module)), [module, *args[2:]], None
        if args and not args[0].startswith("-"):
            path = _script_path(args[0])
            return (lambda: _script(path)), args, None
        raise MastraceError("give python a script or -m MODULE: mastrace run -- python -m pkg ...")
    if program.endswith(".py"):
        path = _script_path(program)
        return (lambda: _script(path)), [program, *args], None
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


def _instrument_now(name: str) -> None:
    """Turn on one integration; a failure is a warning, never an error in the program's import."""
    try:
        module = importlib.import_module(f"mastrace.integrations.{name}")
        getattr(module, f"instrument_{name}")()
    except Exception as exc:  # the program's own import must go on
        from ..tracing._errors import warn_once

        warn_once(f"run-instrument-{name}", f"mastrace: could not instrument {name} ({exc}); not traced")


def _on_import(name: str) -> Callable[[Any], None]:
    def hook(_module: Any) -> None:
        _instrument_now(name)

    return hook


def _instrument(names: Sequence[str]) -> list[str]:
    """Instrument each package when the program first imports it (at once if it already has).

    Nothing is imported ahead of the program: a program that never imports `openai` never pays
    for importing it, nor for its integration. Returns the names a hook was registered for.
    """
    import wrapt

    registered = []
    for name in names:
        if name in sys.modules:
            _instrument_now(name)
        else:
            wrapt.register_post_import_hook(_on_import(name), name)
        registered.append(name)
    return registered


def _program_name(argv: list[str]) -> str:
    """The name a program's spans are recorded under: the console script's name (`massgen`), the
    module of `python -m` (`pkg.cli`), the file name of a script without `.py`."""
    first = argv[0] if argv else ""
    if first.endswith(".py") or os.sep in first:
        first = os.path.splitext(os.path.basename(first))[0]
    return first or "mastrace"


def _chosen(given: list[str] | None) -> list[str] | None:
    """The integrations `--instrument` names (comma-separated, repeatable), or None for automatic."""
    if given is None:
        return None
    names = [n.strip() for item in given for n in item.split(",") if n.strip()]
    unknown = sorted(set(names) - {*INTEGRATIONS, "none"})
    if unknown:
        raise MastraceError(f"unknown integration(s) {', '.join(unknown)}; known: {', '.join(INTEGRATIONS)}")
    return [n for n in names if n != "none"]


def _pins(args: argparse.Namespace) -> dict[str, Any]:
    """The options given on the command line, as `configure()` arguments that beat the program's own."""
    from ..setup import _settings

    given: dict[str, tuple[str, Any]] = {}
    if args.store is not None:
        store = os.path.abspath(os.path.expanduser(args.store))
        if os.path.exists(store) and not os.path.isdir(store):
            raise MastraceError(f"--store {args.store}: is a file, not a folder")
        given["local"] = ("--store", store)  # absolute: the program and its children may change directory
    if args.service_name is not None:
        given["service_name"] = ("--service-name", args.service_name)
    if args.otlp is not None:
        given["otlp"] = ("--otlp", args.otlp)
    if args.console:
        given["console"] = ("--console", True)
    if getattr(args, "experiment", None) is not None:
        given["experiment"] = ("--experiment", args.experiment)
    if getattr(args, "repetition", None) is not None:
        given["repetition"] = ("--repetition", args.repetition)
    params = {p.name: p for p in _settings.PARAMS}
    pins: dict[str, Any] = {}
    for name, (option, value) in given.items():
        try:
            pins[name] = params[name].check(value)
        except (ValueError, TypeError):
            raise MastraceError(f"{option} {value!r}: expected {params[name].accepts}") from None
    return pins


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    """Configure mastrace, instrument what the program uses, run it, flush, return its status."""
    command = list(args.program)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise MastraceError("nothing to run: mastrace run -- PROGRAM [ARGS...]")
    chosen = _chosen(args.instrument)
    call, argv, _dist = _target(command[0], command[1:])
    # By default MassGen and the LLM SDKs, each when (and if) the program imports it. Not LiteLLM:
    # its integration fetches a price table; ask for it with --instrument.
    wanted = chosen if chosen is not None else ["massgen", "openai", "anthropic"]
    # The command line wins over the program's own configure() arguments, here and in every process
    # it starts: configure() reads MASTRACE_RUN before its arguments (see the precedence table).
    os.environ[RUN_ENV] = json.dumps(_pins(args))

    import mastrace

    saved = sys.argv
    # The program's own name, as configure() sees it: its spans are recorded under it (`massgen`),
    # not under `mastrace`; --service-name and OTEL_SERVICE_NAME still win.
    sys.argv = [_program_name(argv), *argv[1:]]
    try:
        mastrace.configure()
    finally:
        sys.argv = saved
    _instrument(wanted)
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
