"""The documented API is the API: the README's "API at a glance" block lists each public module's
`__all__` exactly, and every listed name resolves. Adding or removing a public name means updating
the README (the assertion prints the block to paste)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
MODULES = (
    "mastrace",
    "mastrace.analysis",
    "mastrace.exceptions",
    "mastrace.integrations",
    "mastrace.integrations.anthropic",
    "mastrace.integrations.litellm",
    "mastrace.integrations.maseval",
    "mastrace.integrations.massgen",
    "mastrace.integrations.mcp",
    "mastrace.integrations.openai",
    "mastrace.mcp_server",
    "mastrace.mixins",
    "mastrace.pricing",
    "mastrace.registry",
    "mastrace.serve",
    "mastrace.store",
    "mastrace.testing",
    "mastrace.typing",
    "mastrace.usage",
)
BLOCK = re.compile(r"<!-- api-names: start -->\n(.*?)<!-- api-names: end -->", re.S)


def generated() -> str:
    lines = ["| module | public names (`__all__`) |", "|---|---|"]
    for name in MODULES:
        module = importlib.import_module(name)
        names = ", ".join(f"`{n}`" for n in sorted(module.__all__) if n != "__version__")
        lines.append(f"| `{name}` | {names} |")
    return "\n".join(lines) + "\n"


def documented() -> str:
    match = BLOCK.search(README.read_text(encoding="utf-8"))
    assert match is not None, "README.md lacks the api-names markers"
    return match.group(1)


def test_the_readme_lists_every_public_modules_names_exactly() -> None:
    expected = generated()
    assert documented() == expected, "update README.md's API block to:\n" + expected


@pytest.mark.parametrize("name", MODULES)
def test_every_listed_name_resolves_and_all_is_sorted(name: str) -> None:
    module = importlib.import_module(name)
    names = [n for n in module.__all__ if n != "__version__"]
    assert names == sorted(names), f"{name}.__all__ is not sorted"
    assert [n for n in names if not hasattr(module, n)] == []
