"""One vocabulary: span names, attribute keys and levels used by analysis, CLI, mixins and integrations
come from `mastrace.semconv`. A key spelled out elsewhere would let a rename in `semconv` break the
analysis silently, with every other test green."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import mastrace
from mastrace import semconv

SRC = Path(mastrace.__file__).parent
# Where the vocabulary is defined, or where such strings are data rather than vocabulary.
EXEMPT = {"semconv.py", "_names.py"}
# A key of MassGen's, GenAI's or MASEval's namespace; a span-name prefix in SQL (`LIKE 'llm.%'`)...
PREFIXED = re.compile(r"(?<![\w.])(?:massgen|gen_ai|maseval)\.[a-z_]+(?:\.[a-z_]+)*|(?:llm|mcp|agent)\.%")
# ...or any name or key `semconv` defines, spelled out.
VALUES = sorted(
    {v for v in vars(semconv).values() if isinstance(v, str) and "." in v and len(v) > 6 and "{" not in v},
    key=len,
    reverse=True,
)


def _shaped(text: str) -> list[str]:
    return [m.group() for m in PREFIXED.finditer(text)] + [v for v in VALUES if v in text]


def _docstrings(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def offenders() -> list[str]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name in EXEMPT:
            continue
        tree = ast.parse(path.read_text(), str(path))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                for shaped in _shaped(node.value):
                    found.append(f"{path.relative_to(SRC)}:{node.lineno}: {shaped!r}")
    return found


def test_no_semconv_shaped_literal_outside_semconv() -> None:
    found = offenders()
    assert not found, "spell these with mastrace.semconv constants:\n" + "\n".join(found)


def test_the_check_finds_a_spelled_out_key(tmp_path: Path) -> None:
    tree = ast.parse("SQL = \"SELECT attributes->>'massgen.usage.input' FROM records\"\n")
    values = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert any(_shaped(v) for v in values)
    assert _shaped(f"x {semconv.MASTRACE_CONFIG_HASH} y") and not _shaped("logfire._internal.config")


def test_no_bare_error_level_outside_semconv() -> None:
    """Logfire's error level (17) is `semconv.LEVEL_ERROR`, not a number spelled out."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name in EXEMPT:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and re.search(r"level\s*>=?\s*17", node.value)
            ):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
            if isinstance(node, ast.Compare) and any(
                isinstance(c, ast.Constant) and c.value == semconv.LEVEL_ERROR for c in node.comparators
            ):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not found, found
