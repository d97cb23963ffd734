"""A CLI safe to point at anything: terminal escapes shown, malformed rows skipped and counted,
`query` sandboxed unless asked, TIMESTAMPTZ printed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mastrace.cli._terminal import escape_control

from .conftest import Runner, clean_env

HOSTILE_NAME = "agent.a.round_1\x1b]0;PWNED\x07\x1b[2J"
HOSTILE_VALUE = "t\u202eask\x1b[31m\x9b\x7f"
RAW = ("\x1b", "\x07", "\u202e", "\x9b", "\x7f")

WRITE = textwrap.dedent(
    """
    import sys, mastrace
    mastrace.configure(local=sys.argv[1], service_name="hostile")
    tracer = mastrace.get_tracer("hostile")
    with tracer.span("coordination.session", attributes={"massgen.task": sys.argv[3], "note": sys.argv[3]}):
        with tracer.span(sys.argv[2], attributes={"massgen.agent_id": "a", "x": sys.argv[3]}):
            pass
    mastrace.shutdown()
    """
)


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with control characters in names and values, and malformed lines appended by hand."""
    store = tmp_path_factory.mktemp("hostile") / "store"
    subprocess.run(
        [sys.executable, "-c", WRITE, str(store), HOSTILE_NAME, HOSTILE_VALUE],
        check=True,
        env=clean_env(),
        timeout=60,
    )
    (segment,) = sorted((store / "segments").glob("*.ndjson"))
    good = json.loads(segment.read_text().splitlines()[0])
    bad = [
        {**good, "span_id": "b" * 16, "start_ns": "yesterday"},
        {**good, "span_id": "c" * 16, "trace_id": [1, 2]},
        {**good, "span_id": None},
        {**good, "span_id": "d" * 16, "end_ns": None},
        {**good, "span_id": "e" * 16, "attributes": "not json {"},
        {**good, "span_id": "f" * 16, "level": "high", "parent_span_id": {"x": 1}},
    ]
    with segment.open("a") as f:
        for row in bad:
            f.write(json.dumps(row) + "\n")
        f.write("[1, 2, 3]\n")
        f.write('{"span_id": "torn')
    return store


COMMANDS = [
    ("runs",),
    ("tree", "latest"),
    ("analyze", "latest", "-o", "-"),
    ("query", "SELECT span_name, attributes FROM records"),
    ("query", "SELECT span_name FROM records", "--format", "csv"),
    ("diff", "latest", "latest"),
    ("export", "latest", "--format", "otlp-json", "-o", "-"),
    ("export", "latest", "--format", "jaeger-json", "-o", "-"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c[:2]) for c in COMMANDS])
def test_no_command_prints_control_characters_or_fails(
    module_cli: Runner, hostile_store: Path, command: tuple[str, ...]
) -> None:
    proc = module_cli(*command, store=hostile_store)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    for raw in RAW:
        assert raw not in proc.stdout and raw not in proc.stderr, (raw, command)
    assert "skipped" in proc.stderr and "malformed row(s)" in proc.stderr


def test_the_escapes_are_visible(module_cli: Runner, hostile_store: Path) -> None:
    proc = module_cli("tree", "latest", store=hostile_store)
    assert "agent.a.round_1\\u001b]0;PWNED\\u0007\\u001b[2J" in proc.stdout
    assert "t\\u202eask" in proc.stdout


def test_json_output_reads_back_as_the_same_strings(module_cli: Runner, hostile_store: Path) -> None:
    """The escapes are JSON's own: `--format json` output parses to the original names."""
    proc = module_cli(
        "query", "SELECT span_name FROM records ORDER BY span_name", "--format", "json", store=hostile_store
    )
    names = [row["span_name"] for row in json.loads(proc.stdout)]
    assert HOSTILE_NAME in names


def test_malformed_rows_are_counted_exactly(module_cli: Runner, hostile_store: Path) -> None:
    """Two good rows, and the row whose attributes are not an object (kept: its ids and times are
    fine, and readers treat its attributes as empty); the other 7 lines are skipped and counted."""
    proc = module_cli("query", "SELECT count(*) AS n FROM records", "--format", "json", store=hostile_store)
    assert json.loads(proc.stdout) == [{"n": 3}]
    assert "mastrace: skipped 7 malformed row(s)" in proc.stderr


def test_errors_on_stderr_are_escaped(module_cli: Runner, hostile_store: Path) -> None:
    proc = module_cli("query", "SELECT * FROM \x1b[2Jnowhere", store=hostile_store)
    assert proc.returncode == 2
    assert "\x1b" not in proc.stderr and "\\u001b[2J" in proc.stderr


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('/etc/hostname')",
        "SELECT * FROM read_json_auto('/etc/os-release')",
        "COPY (SELECT 1) TO 'OUT'",
        "ATTACH 'OUT' AS other",
        "SET enable_external_access = true",
        "INSTALL httpfs",
        "SELECT 1; SELECT 2",
    ],
)
def test_query_cannot_reach_outside_the_store(
    module_cli: Runner, hostile_store: Path, tmp_path: Path, sql: str
) -> None:
    out = tmp_path / "leak.csv"
    proc = module_cli("query", sql.replace("OUT", str(out)), store=hostile_store)
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.startswith("mastrace query: error:")
    assert not out.exists()
    assert "root:" not in proc.stdout


def test_query_can_reach_outside_when_allowed(
    module_cli: Runner, hostile_store: Path, tmp_path: Path
) -> None:
    out = tmp_path / "spans.csv"
    proc = module_cli(
        "query",
        f"COPY (SELECT span_name FROM records) TO '{out}'",
        "--allow-external-access",
        store=hostile_store,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.exists() and "coordination.session" in out.read_text()


def test_timestamptz_results_print(module_cli: Runner, hostile_store: Path) -> None:
    proc = module_cli(
        "query",
        "SELECT now() AS t, start_timestamp::TIMESTAMPTZ AS s FROM records LIMIT 1",
        store=hostile_store,
    )
    assert proc.returncode == 0, proc.stderr
    assert "(1 row)" in proc.stdout


def test_escape_control_keeps_text_and_layout() -> None:
    assert escape_control("plain text\twith tab\nand newline") == "plain text\twith tab\nand newline"
    assert escape_control("héllo → ✓") == "héllo → ✓"
    assert escape_control("\x00\x1b\x7f\x85\u200e\u2066") == "\\u0000\\u001b\\u007f\\u0085\\u200e\\u2066"
