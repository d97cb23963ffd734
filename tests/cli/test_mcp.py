"""`mastrace mcp` driven by the official `mcp` SDK's client over stdio, as a coding agent drives it."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession

import mastrace
from mastrace.mcp_server._tools import MAX_ROWS, MAX_VALUE_CHARS
from mastrace.store import query
from seed_run import SEED_QUERIES, Store, write_store

from .conftest import clean_env, mcp_session

TOOLS = {
    "arbitrary_query": {"query", "age"},
    "schema_reference": set(),
    "find_exceptions_in_file": {"filepath", "age"},
    "logfire_link": {"trace_id"},
    "list_runs": {"limit"},
    "trace_tree": {"trace_id", "max_spans"},
    "analyze": {"trace_id"},
    "diff": {"a", "b"},
    "compare_experiments": {"experiment", "by", "baseline", "seed"},
}
Session = Callable[[ClientSession], Awaitable[Any]]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """Two MassGen-shaped sessions: one started ten minutes ago, one seventy minutes ago."""
    return write_store(tmp_path_factory.mktemp("mcp-store"), base_ns=time.time_ns() - 600 * 10**9)


def _session(store: Path, body: Session, *extra: str) -> Any:
    """Run `body` in a client session with `mastrace mcp --store store` in a child process."""
    return mcp_session(store, body, *extra)


async def _text(session: ClientSession, tool: str, **arguments: Any) -> tuple[bool, str]:
    result = await session.call_tool(tool, arguments)
    return bool(result.is_error), unframed("".join(getattr(part, "text", "") for part in result.content))


def unframed(text: str) -> str:
    """The answer between the untrusted-data markers every tool's answer is framed in (see
    test_mcp_bounds); the SDK's own errors (a mistyped argument, an unknown tool) are not framed."""
    match = re.search(r'<untrusted-data id="(\w+)">\n(.*)\n</untrusted-data id="\1">$', text, re.DOTALL)
    if match is None:
        return text
    return text[: text.index("The text between")] + match.group(2)


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat(timespec="microseconds") + "Z"
    return float(value) if isinstance(value, Decimal) else value


def test_tools_are_listed_with_logfires_names_and_arguments(store: Store) -> None:
    """The server lists Logfire's four tools and mastrace's four, each read-only, with their arguments."""

    async def body(session: ClientSession) -> Any:
        return (await session.list_tools()).tools

    tools = _session(store.path, body)
    assert {t.name: set(t.input_schema["properties"]) for t in tools} == TOOLS
    assert all(t.annotations is not None and t.annotations.read_only_hint for t in tools)
    required = {t.name: set(t.input_schema.get("required", [])) for t in tools}
    assert required["arbitrary_query"] == {"query"} and required["diff"] == {"a", "b"}


def test_the_server_names_itself_with_mastraces_version(store: Store) -> None:
    """A client (and its logs) sees which mastrace answers, not an empty version."""

    async def body(session: ClientSession) -> Any:
        return (await session.initialize()).server_info

    info = _session(store.path, body)
    assert (info.name, info.version) == ("mastrace", mastrace.__version__)


def test_every_seed_query_is_answered_by_arbitrary_query(store: Store) -> None:
    """`arbitrary_query` answers each of the guide's queries with the rows of `mastrace query`, as JSON."""

    async def body(session: ClientSession) -> dict[str, tuple[bool, str]]:
        return {
            name: await _text(session, "arbitrary_query", query=store.sql(sql))
            for name, sql in SEED_QUERIES.items()
        }

    answers = _session(store.path, body)
    for name, (is_error, text) in answers.items():
        assert not is_error, (name, text)
        want = [
            {k: _json_value(v) for k, v in row.items()}
            for row in query(store.sql(SEED_QUERIES[name]), store.path)
        ]
        got = json.loads(text)
        if "ORDER BY" not in SEED_QUERIES[name]:
            got, want = sorted(got, key=repr), sorted(want, key=repr)
        assert got == want, name


def test_age_looks_back_in_minutes(store: Store) -> None:
    """`age` keeps the spans started in the last `age` minutes; omitted, it keeps every span."""
    sql = "SELECT DISTINCT trace_id FROM records"

    async def body(session: ClientSession) -> list[tuple[bool, str]]:
        return [
            await _text(session, "arbitrary_query", query=sql, age=30),
            await _text(session, "arbitrary_query", query=sql),
            await _text(session, "arbitrary_query", query=sql, age=0),
        ]

    recent, every, none = _session(store.path, body)
    assert json.loads(recent[1]) == [{"trace_id": store.trace_id}]
    assert sorted(r["trace_id"] for r in json.loads(every[1])) == sorted([store.trace_id, store.old_trace_id])
    assert json.loads(none[1]) == []


def test_the_other_tools_answer(store: Store) -> None:
    """Schema, exceptions, link, runs, tree, report and diff each answer with what the store holds."""

    async def body(session: ClientSession) -> dict[str, tuple[bool, str]]:
        return {
            "schema": await _text(session, "schema_reference"),
            "exceptions": await _text(session, "find_exceptions_in_file", filepath="answer.md"),
            "no_exceptions": await _text(session, "find_exceptions_in_file", filepath="no/such/file.py"),
            "link": await _text(session, "logfire_link", trace_id=store.trace_id[:8]),
            "runs": await _text(session, "list_runs", limit=5),
            "tree": await _text(session, "trace_tree", trace_id="latest", max_spans=5),
            "analyze": await _text(session, "analyze", trace_id="latest"),
            "diff": await _text(session, "diff", a="previous", b="latest"),
        }

    out = _session(store.path, body, "--serve-url", "http://127.0.0.1:9999/")
    assert not any(is_error for is_error, _ in out.values()), out
    assert (
        "exception_stacktrace VARCHAR" in out["schema"][1]
        and "attributes->>'massgen.agent_id'" in out["schema"][1]
    )
    exceptions = json.loads(out["exceptions"][1])
    assert {e["trace_id"] for e in exceptions} == {store.trace_id, store.old_trace_id}
    assert all(e["exception_type"] == "PermissionError" for e in exceptions)
    assert json.loads(out["no_exceptions"][1]) == []
    assert out["link"][1] == f"http://127.0.0.1:9999/runs/{store.trace_id}"
    assert out["runs"][1].count("coordination.session") == 2
    assert out["tree"][1].startswith(f"trace {store.trace_id}\ncoordination.session")
    assert "more span(s) not shown" in out["tree"][1]
    assert "agent_a" in out["analyze"][1] and "Phase" in out["analyze"][1]
    assert out["diff"][1].strip()


def test_diff_says_what_happened_differently(tmp_path: Path) -> None:
    """The MCP `diff` of two runs with different winners names the winners, the votes, the changed
    rounds and the span trees' differences, as `mastrace diff` does."""
    from outcome_runs import write_two_runs

    store = tmp_path / "outcomes"
    a, b = write_two_runs(store)

    async def body(session: ClientSession) -> tuple[bool, str]:
        return await _text(session, "diff", a=a, b=b)

    is_error, text = _session(store, body)
    assert not is_error, text
    lines = text.splitlines()
    assert "  winner: agent_a → agent_b  (changed)" in lines
    assert "  votes A: agent_b → agent_a, agent_c → agent_a" in lines
    assert "  votes B: agent_a → agent_b, agent_c → agent_b" in lines
    assert "    agent_c round 1: vote agent_a → vote agent_b" in lines
    assert "  - coordination.session / agent.agent_c.round_0 / mcp.search.query  (2 span(s))" in lines


MALFORMED = [
    ("arbitrary_query", {"query": 42}, "valid string"),
    ("arbitrary_query", {}, "query"),
    ("arbitrary_query", {"query": "SELECT 1", "age": -5}, "age"),
    ("arbitrary_query", {"query": "SELECT 1", "age": "soon"}, "age"),
    ("arbitrary_query", {"query": "DELETE FROM records"}, "only SELECT-like"),
    ("arbitrary_query", {"query": "COPY records TO '/tmp/out.csv'"}, "only SELECT-like"),
    ("arbitrary_query", {"query": "SELECT * FROM read_text('/etc/passwd')"}, "disabled"),
    ("arbitrary_query", {"query": "SELECT nope FROM records"}, "nope"),
    ("arbitrary_query", {"query": "SELECT 1; SELECT 2"}, "one SQL statement"),
    ("arbitrary_query", {"query": "SELECT 1", "extra": {"nested": [1, 2]}}, None),
    ("find_exceptions_in_file", {"filepath": ""}, "filepath"),
    ("find_exceptions_in_file", {"filepath": ["a", "b"]}, "valid string"),
    ("logfire_link", {"trace_id": "'; DROP TABLE records; --"}, "not a trace"),
    ("trace_tree", {"trace_id": "abc"}, "not a trace"),
    ("trace_tree", {"max_spans": 0}, "max_spans"),
    ("analyze", {"trace_id": "ffffffffffffffffffffffffffffffff"}, "no trace"),
    ("list_runs", {"limit": 10**9}, "limit"),
    ("diff", {"a": "latest"}, "b"),
    ("no_such_tool", {}, "Unknown tool"),
]


def test_malformed_arguments_are_tool_errors(store: Store) -> None:
    """Each bad argument, statement or trace is a tool error the model can read, and the session goes on."""

    async def body(session: ClientSession) -> list[tuple[tuple[bool, str], tuple[bool, str]]]:
        out = []
        for tool, arguments, _ in MALFORMED:
            failed = await _text(session, tool, **arguments)
            out.append((failed, await _text(session, "arbitrary_query", query="SELECT 1 AS one")))
        return out

    for (tool, arguments, message), ((is_error, text), after) in zip(
        MALFORMED, _session(store.path, body), strict=True
    ):
        if message is None:  # an argument the tool does not take is ignored, as the SDK does
            assert not is_error, (tool, arguments, text)
        else:
            assert is_error and message in text, (tool, arguments, text)
        assert after == (False, '[{"one": 1}]')


def test_answers_are_bounded_and_say_so(store: Store) -> None:
    """Many rows and long values are cut, and the answer says what was left out."""

    async def body(session: ClientSession) -> list[tuple[bool, str]]:
        return [
            await _text(session, "arbitrary_query", query="SELECT range FROM range(100000)"),
            await _text(session, "arbitrary_query", query="SELECT repeat('x', 100000) AS big"),
        ]

    (_, many), (_, big) = _session(store.path, body)
    rows, note = many.rsplit("\n…", 1)
    assert len(json.loads(rows)) == MAX_ROWS and "more than" in note and "add a LIMIT" in note
    (value,) = json.loads(big)
    assert value["big"].startswith("x" * MAX_VALUE_CHARS) and value["big"].endswith(
        f"…[{100000 - MAX_VALUE_CHARS} more chars]"
    )


def test_nothing_but_the_protocol_reaches_stdout(store: Store, tmp_path: Path) -> None:
    """A store with malformed lines and a failing tool still leave stdout to JSON-RPC alone."""
    broken = tmp_path / "store"
    write_store(broken)
    segment = next((broken / "segments").iterdir())
    with segment.open("a") as file:
        file.write('{"trace_id": "torn\n')

    async def body(session: ClientSession) -> tuple[bool, str]:
        await _text(session, "arbitrary_query", query="SELEC")
        return await _text(session, "list_runs")

    is_error, text = _session(broken, body)
    assert not is_error and text.count("coordination.session") == 2


def test_without_the_extra_the_command_says_what_to_install(tmp_path: Path) -> None:
    """Where `mcp` cannot be imported, `mastrace mcp` exits 2 with the extra to install."""
    import subprocess

    blocker = tmp_path / "mcp" / "__init__.py"
    blocker.parent.mkdir()
    blocker.write_text("raise ImportError('no mcp here')\n")
    env = {**clean_env(), "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from mastrace.cli import main; sys.exit(main())", "mcp"],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )
    assert done.returncode == 2 and "pip install 'mastrace[mcp]'" in done.stderr


def test_sql_runs_in_the_sandbox_even_with_external_files_around(store: Store, tmp_path: Path) -> None:
    """`arbitrary_query` cannot read a file next to the store, with a relative or an absolute path."""
    secret = store.path / "secret.csv"
    secret.write_text("token\nhunter2\n")

    async def body(session: ClientSession) -> list[tuple[bool, str]]:
        return [
            await _text(session, "arbitrary_query", query=f"SELECT * FROM read_csv('{secret}')"),
            await _text(session, "arbitrary_query", query="SELECT * FROM 'secret.csv'"),
        ]

    try:
        answers = _session(store.path, body)
    finally:
        secret.unlink()
    assert all(is_error and "hunter2" not in text for is_error, text in answers)


def test_timestamps_are_utc_text(store: Store) -> None:
    """Times in answers are ISO 8601 UTC text, as in the Query API's JSON."""

    async def body(session: ClientSession) -> tuple[bool, str]:
        sql = f"SELECT start_timestamp FROM roots WHERE trace_id = '{store.trace_id}'"
        return await _text(session, "arbitrary_query", query=sql)

    (row,) = json.loads(_session(store.path, body)[1])
    started = datetime.fromisoformat(row["start_timestamp"].replace("Z", "+00:00"))
    (local,) = query(f"SELECT start_timestamp FROM roots WHERE trace_id = '{store.trace_id}'", store.path)
    assert started == local["start_timestamp"].replace(tzinfo=timezone.utc)
