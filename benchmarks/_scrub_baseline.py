"""Another version's scrubbing engine, loaded from git beside this one: timed in the same process.

`load("main")` reads `src/mastrace/scrubbing/` at that revision into a temporary folder and imports
it as `mastrace._scrubbing_<rev>` (its relative imports of `mastrace.semconv` and the like resolve
to this checkout's). Revisions from before the `scrubbing/` package (one `_scrubbing.py` module with
`_secret_rules.py` and `_scrub_options.py`) load too, so the engine before the rule table can be
compared as well. Only for benchmarks: nothing in `src/` imports this.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_OLD_LAYOUT = ("_scrub_options", "_secret_rules", "_scrubbing")


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout


def _import(name: str, path: Path, package: Path | None = None) -> ModuleType:
    locations = [str(package)] if package is not None else None
    spec = importlib.util.spec_from_file_location(name, path, submodule_search_locations=locations)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load(rev: str) -> Any:
    """The `Scrubber` class of revision `rev` (a branch, tag or commit)."""
    import mastrace  # noqa: F401  (the parent package of the loaded modules)

    commit = _git("rev-parse", "--short", rev).strip()
    folder = Path(tempfile.mkdtemp(prefix=f"mastrace-scrub-{commit}-"))
    names = (
        _git("ls-tree", "--name-only", f"{commit}:src/mastrace/scrubbing").split()
        if _has_package(commit)
        else []
    )
    if names:
        for name in names:
            (folder / name).write_text(
                _git("show", f"{commit}:src/mastrace/scrubbing/{name}"), encoding="utf-8"
            )
        package = f"mastrace._scrubbing_{commit}"
        _import(package, folder / "__init__.py", folder)
        return importlib.import_module(f"{package}._engine").Scrubber
    # The single-module engine: its siblings are imported under their own names, absent from this
    # checkout (checked, so that a module of this version is never shadowed).
    module = None
    for name in _OLD_LAYOUT:
        path = folder / f"{name}.py"
        path.write_text(_git("show", f"{commit}:src/mastrace/{name}.py"), encoding="utf-8")
        full = f"mastrace.{name}" if name != "_scrubbing" else f"mastrace._scrubbing_{commit}"
        if full in sys.modules or importlib.util.find_spec(full) is not None:
            raise RuntimeError(f"{full} exists in this checkout: cannot load {rev}'s beside it")
        module = _import(full, path)
    assert module is not None
    return module.Scrubber


def _has_package(commit: str) -> bool:
    return bool(_git("ls-tree", "--name-only", commit, "src/mastrace/scrubbing").strip())


def trail(scrubber: Any) -> Any:
    """A new `ScrubTrail` of the module `scrubber` comes from."""
    return sys.modules[type(scrubber).__module__].ScrubTrail()
