"""`mastrace mcp` holds the bounds of `mastrace query`, driven by the official `mcp` client.

A model's SQL reads the store and nothing else (not DuckDB's temporary folder either), stays under
the memory limit whatever it builds, every answer is capped and free of control characters, and
span text reaches the model framed as untrusted data.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from mcp import ClientSession

from hostile_run import INSTRUCTIONS, write_hostile_store
from mastrace.mcp_server._tools import MAX_CHARS
from seed_run import write_store

from .conftest import mcp_session

Session = Callable[[ClientSession], Awaitable[Any]]
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MB = 1 << 20


def _session(store: Path, body: Session, *extra: str, cwd: Path | None = None) -> Any:
    """Run `body` in a client session with `mastrace mcp --store store` in a child process."""
    return mcp_session(store, body, *extra, cwd=cwd)


async def _text(session: ClientSession, tool: str, **arguments: Any) -> tuple[bool, str]:
    result = await session.call_tool(tool, arguments)
    return bool(result.is_error), "".join(getattr(part, "text", "") for part in result.content)


def _server_peak_rss() -> int:
    """The peak resident memory (bytes) of the `mastrace mcp` process this test started."""
    (server,) = [p for p in psutil.Process().children(recursive=True) if "mcp" in " ".join(p.cmdline()[1:3])]
    status = Path(f"/proc/{server.pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) * 1024  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mcp-bounds") / "store"
    write_store(path, base_ns=time.time_ns())
    return path


def test_duckdbs_temporary_folder_is_not_readable(store: Path, tmp_path: Path) -> None:
    """A file planted in `<cwd>/.tmp/` (DuckDB's default temporary folder) is neither read nor listed."""
    planted = tmp_path / ".tmp" / "planted.txt"
    planted.parent.mkdir()
    planted.write_text("hunter2\n")

    async def body(session: ClientSession) -> list[tuple[bool, str]]:
        return [
            await _text(session, "arbitrary_query", query=sql)
            for sql in (
                "SELECT content FROM read_text('.tmp/planted.txt')",
                f"SELECT content FROM read_text('{planted}')",
                "SELECT * FROM glob('.tmp/*')",
                f"SELECT * FROM glob('{planted.parent}/*')",
            )
        ]

    answers = _session(store, body, cwd=tmp_path)
    assert all(is_error and "hunter2" not in text and "disabled" in text for is_error, text in answers), (
        answers
    )


BUILDERS = {
    "string": "SELECT length(repeat('x', 1500000000)) AS n",
    "doubling": "WITH RECURSIVE t(s) AS (SELECT 'x' UNION ALL SELECT s || s FROM t "
    "WHERE length(s) < 2000000000) SELECT max(length(s)) AS n FROM t",
    "list": "SELECT len(range(0, 400000000)) AS n",
    "struct": "SELECT len(list({'a': range, 'b': repeat('y', 100)})) AS n FROM range(20000000)",
    "join": "SELECT count(*) AS n FROM (SELECT list(range) AS l FROM range(3000000)) a, range(300) b "
    "WHERE len(a.l) < b.range",
}


def test_what_sql_builds_stays_under_the_memory_limit(store: Path) -> None:
    """Strings, doubling CTEs, lists, structs and joins fail at the limit, each as one short tool error."""

    async def body(session: ClientSession) -> tuple[int, dict[str, tuple[bool, str]], int, tuple[bool, str]]:
        await _text(session, "arbitrary_query", query="SELECT count(*) FROM records")
        before = _server_peak_rss()
        answers = {name: await _text(session, "arbitrary_query", query=sql) for name, sql in BUILDERS.items()}
        return (
            before,
            answers,
            _server_peak_rss(),
            await _text(session, "arbitrary_query", query="SELECT 1 AS one"),
        )

    # A generous time limit: on a loaded machine a builder must still fail on memory, not on time.
    before, answers, peak, after = _session(store, body, "--memory", "300MB", "--timeout", "600")
    for name, (is_error, text) in answers.items():
        assert is_error and "memory" in text.lower() and len(text) < 2_000, (name, text[:500])
    assert peak - before <= 300 * 1_000_000 + 64 * MB, (before / MB, peak / MB)
    assert not after[0] and '[{"one": 1}]' in after[1]


def test_error_answers_are_capped(store: Path) -> None:
    """A 2 MB statement that fails gives an error of at most the answer cap, saying it was cut."""
    sql = "SELECT '" + "x" * 2_000_000

    async def body(session: ClientSession) -> tuple[bool, str]:
        return await _text(session, "arbitrary_query", query=sql)

    is_error, text = _session(store, body)
    assert is_error and len(text) <= MAX_CHARS + 500 and "cut" in text, len(text)


def test_span_text_reaches_the_model_escaped_and_framed_as_data(tmp_path: Path) -> None:
    """Every answer carrying span text has no control character and frames that text as untrusted data."""
    store = tmp_path / "store"
    trace_id = write_hostile_store(store)

    async def body(session: ClientSession) -> dict[str, tuple[bool, str]]:
        return {
            "tree": await _text(session, "trace_tree", trace_id=trace_id),
            "schema": await _text(session, "schema_reference"),
            "runs": await _text(session, "list_runs"),
            "analyze": await _text(session, "analyze", trace_id=trace_id),
            "query": await _text(
                session, "arbitrary_query", query="SELECT span_name, attributes FROM records"
            ),
            "error": await _text(session, "arbitrary_query", query="SELECT nope FROM records"),
            "exceptions": await _text(session, "find_exceptions_in_file", filepath="hostile_run.py"),
            "diff": await _text(session, "diff", a=trace_id, b=trace_id),
        }

    answers = _session(store, body)
    for name, (_, text) in answers.items():
        assert not _CONTROL.search(text), (name, text)
        if INSTRUCTIONS in text:
            begin, end = text.index("<untrusted-data"), text.rindex("</untrusted-data")
            assert "untrusted" in text[:begin] and "not instructions" in text[:begin], (name, text[:300])
            assert all(begin < m.start() < end for m in re.finditer(re.escape(INSTRUCTIONS), text)), name
    for name in ("tree", "schema", "query", "exceptions"):
        assert INSTRUCTIONS in answers[name][1] and not answers[name][0], (name, answers[name])
