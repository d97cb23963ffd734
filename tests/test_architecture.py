"""The import graph keeps the shape `docs/architecture.md` describes: no import cycle between any two
modules, the layers and the write path's independence from the read side (`[tool.importlinter]` in
pyproject.toml, checked by import-linter), and a top of `src/mastrace/` that holds only public topics
and folders."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp
import pytest

import mastrace

try:
    import tomllib
except ImportError:  # Python 3.10: pytest's own TOML reader
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(mastrace.__file__).parent
DOC = ROOT / "docs" / "architecture.md"

# The top of the package: the public topics, and what Python needs there.
TOP_MODULES = {
    "__init__.py",
    "__main__.py",
    "_lazy.py",
    "exceptions.py",
    "pricing.py",
    "py.typed",
    "registry.py",
    "semconv.py",
    "testing.py",
    "typing.py",
    "usage.py",
}


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The check below can fail: a planted two- and three-module circle is found, a chain is not."""
    edges = {"a": {"b"}, "b": {"a", "c"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}
    assert sorted(_cycles(edges)) == [["a", "b"], ["c", "d", "e"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_module_imports_itself_through_others() -> None:
    """No import circle between any two modules, counting imports inside functions and under
    TYPE_CHECKING (a circle there still ties the modules' design together)."""
    graph = grimp.build_graph("mastrace", include_external_packages=False)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert _cycles(edges) == []


def test_the_import_contracts_hold() -> None:
    """import-linter's contracts: the layers, no cycle between sibling packages, and a write path
    that imports nothing of the read side (DuckDB, the reader, analysis, CLI, serve, MCP)."""
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.fail(f"import-linter is not installed in this environment ({lint} is missing)")
    done = subprocess.run(
        [str(lint), "--no-cache", "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    expected = f"Contracts: {len(_contracts())} kept, 0 broken."
    assert done.returncode == 0 and expected in done.stdout, done.stdout[-4000:] + done.stderr[-2000:]


def test_the_layers_name_every_folder_and_the_map_names_every_layer() -> None:
    """A new folder must take a place in the layers, and docs/architecture.md must say what it is."""
    layers = next(c for c in _contracts() if c["type"] == "layers")["layers"]
    assert isinstance(layers, list)
    named = {part.strip() for layer in layers for part in str(layer).split("|")}
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders - named == set(), "folders missing from the layers in pyproject.toml"
    doc = DOC.read_text(encoding="utf-8")
    undocumented = sorted(name for name in named if f"`{name}/`" not in doc and f"`{name}`" not in doc)
    assert undocumented == []


def test_the_top_of_the_package_holds_public_topics_and_folders() -> None:
    files = {p.name for p in PACKAGE.iterdir() if p.is_file()}
    assert files - TOP_MODULES == set(), "a module at the top of src/mastrace: put it in a folder"


# The text-table renderer every surface prints through (the analysis renderers, the CLI): not part of
# what a user calls.
_SHARED_TEXT = {"mastrace.analysis._texttable"}


# What the servers share with `mastrace query` below the public API: the SQL sandbox (`_select`: the window,
# time limit, row bound and path check someone else's SQL runs under), the answer formats of Logfire's
# Query API (`_wire`) and the span categories the pages colour by (`_kinds`).
_SERVER_INTERNALS = {"mastrace.analysis._select", "mastrace.analysis._wire", "mastrace.analysis._kinds"}


def test_serve_and_mcp_read_through_the_public_analysis_api() -> None:
    """`serve` and `mastrace mcp` import `mastrace.analysis`'s public names, but for the query sandbox, the
    Query API's answer formats and the span categories."""
    graph = grimp.build_graph("mastrace", include_external_packages=False)
    private = sorted(
        f"{module} -> {imported}"
        for package in ("mastrace.serve", "mastrace.mcp_server")
        for module in graph.find_children(package) | {package}
        for imported in graph.find_modules_directly_imported_by(module)
        if imported.startswith("mastrace.analysis._") and imported not in _SERVER_INTERNALS | _SHARED_TEXT
    )
    assert private == []


def test_the_cli_reads_through_the_public_analysis_api() -> None:
    """The CLI imports `mastrace.analysis`'s public names (its `__all__`), not its private modules."""
    graph = grimp.build_graph("mastrace", include_external_packages=False)
    private = sorted(
        f"{module} -> {imported}"
        for module in graph.find_children("mastrace.cli") | {"mastrace.cli"}
        for imported in graph.find_modules_directly_imported_by(module)
        if imported.startswith("mastrace.analysis._") and imported not in _SHARED_TEXT
    )
    assert private == []
