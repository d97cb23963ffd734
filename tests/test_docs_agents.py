"""docs/agents.md is code: its commands parse, its MCP configs run `mastrace mcp`, SQL and Python run."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from mastrace.cli._parser import build_parser
from mastrace.serve import start_intake
from mastrace.store import query
from seed_run import SEED_QUERIES, Store, write_store

DOC = Path(__file__).resolve().parents[1] / "docs" / "agents.md"
FENCE = re.compile(r"```(\w+)\n(.*?)```", re.S)


def _blocks(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(DOC.read_text(encoding="utf-8")) if lang == language]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return write_store(tmp_path_factory.mktemp("docs-store"))


def _parses_as_mcp(command: str, args: list[str]) -> None:
    assert Path(command).name == "mastrace", command
    parsed = build_parser().parse_args(args)
    assert parsed.command == "mcp" and parsed.store


def test_every_sql_block_is_a_query_of_the_guide_and_runs(store: Store) -> None:
    """Each SQL block is one of the guide's queries, as written, and answers rows on a MassGen run."""
    guide = {re.sub(r"^--.*\n", "", text) for text in SEED_QUERIES.values()}
    blocks = [block.strip() for block in _blocks("sql")]
    assert len(blocks) >= 9
    for sql in blocks:
        assert sql in guide, sql
        assert query(store.sql(sql), store.path), sql


def test_every_json_config_starts_mastrace_mcp() -> None:
    """Each JSON block parses, and every server in it runs `mastrace mcp` with arguments the CLI takes."""
    configs = [json.loads(block) for block in _blocks("json")]
    assert configs
    for config in configs:
        for server in config["mcpServers"].values():
            _parses_as_mcp(server["command"], server["args"])


def _command_lines() -> list[list[str]]:
    lines = []
    for block in _blocks("bash"):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            while words and re.match(r"^[A-Z_]+=", words[0]):  # leading VAR=value assignments
                words = words[1:]
            if words:
                lines.append(words)
    return lines


def test_claude_mcp_add_lines_are_well_formed() -> None:
    """Each `claude mcp add` names the server, takes only real options, and runs `mastrace mcp` after `--`."""
    adds = [w for w in _command_lines() if w[:3] == ["claude", "mcp", "add"]]
    assert len(adds) >= 3
    for words in adds:
        split = words.index("--")
        options = words[3:split]
        name = [
            w
            for i, w in enumerate(options)
            if not w.startswith("-") and options[i - 1] not in ("--scope", "-e")
        ]
        assert len(name) == 1 and re.fullmatch(r"[a-z][a-z0-9_-]*", name[0])
        assert {w for w in options if w.startswith("-")} <= {"--scope", "-e"}
        _parses_as_mcp(words[split + 1], words[split + 2 :])


def test_mastrace_lines_parse() -> None:
    """Each `mastrace …` line of the guide is a command the CLI accepts."""
    lines = [w for w in _command_lines() if w[0] == "mastrace"]
    assert any("--source" in w for w in lines)
    for words in lines:
        if words[1] == "run":
            continue  # its program's arguments follow `--`
        parsed: Any = build_parser().parse_args(words[1:])
        assert parsed.handler is not None


@pytest.mark.filterwarnings("ignore:pandas only supports SQLAlchemy")
def test_the_python_block_runs_against_serve(store: Store) -> None:
    """The Logfire client example runs as written against a live `mastrace serve` (on a free port)."""
    (block,) = _blocks("python")
    server = start_intake(store.path, http_port=0, grpc_port=None)
    namespace: dict[str, Any] = {}
    try:
        exec(block.replace("127.0.0.1:4318", f"127.0.0.1:{server.http_port}"), namespace)
    finally:
        server.stop()
    assert len(namespace["rows"]["rows"]) == 5 and namespace["table"].num_rows == 40
    assert int(namespace["frame"]["n"].sum()) == 40
