"""ClickHouse's `otel_traces` both ways, on chDB's real engine through `clickhouse-connect`.

The demo's two runs are pushed from a store into chDB (`mastrace push --to chdb://…`), and every
reading command runs on both (`--store` and `--source chdb://…`), in a subprocess each: what they
print must be the same. The seed's SQL queries answer the same on both; spans sent through
`mastrace serve --to chdb://…` read back as the store's; a read over the span cap says so.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from mastrace.analysis import TraceStore
from mastrace.analysis._clickhouse import ClickHouseStore
from mastrace.serve import start_intake
from mastrace.store._clickhouse import ClickHouseWriter, parse_target
from mastrace.store._replay import StoredSpan, read_segment, segment_paths
from seed_run import SEED_QUERIES, Store, write_store

from .conftest import Runner, local_and_source, make_runner, without_generated

pytest.importorskip("chdb")


@pytest.fixture(scope="module")
def pushed(demo_store: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A copy of the demo store, and the chDB URL its spans were pushed to."""
    root = tmp_path_factory.mktemp("clickhouse")
    store = root / "store"
    shutil.copytree(demo_store, store)
    url = f"chdb://{root / 'ch'}"
    result = make_runner(root)("push", "--to", url, "--store", str(store))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("sent 96 span(s)")
    return store, url


@pytest.mark.parametrize(
    "args",
    [
        ("runs",),
        ("runs", "--format", "json"),
        ("runs", "--limit", "1"),
        ("tree", "latest"),
        ("tree", "previous", "--max-spans", "7"),
        ("diff", "previous", "latest", "--format", "json"),
        (
            "query",
            "SELECT span_name, duration, start_timestamp, attributes FROM records "
            "ORDER BY start_timestamp, span_id",
        ),
        (
            "query",
            "SELECT attributes->>'massgen.agent_id' AS agent, "
            "SUM((attributes->'massgen.usage.input')::int) AS input, ROUND(AVG(duration)::numeric, 2) AS avg "
            "FROM records WHERE span_name LIKE 'agent.%' GROUP BY 1 ORDER BY 1",
        ),
    ],
)
def test_commands_print_the_same_from_clickhouse(
    run: Runner, pushed: tuple[Path, str], args: tuple[str, ...]
) -> None:
    """Runs, trees, diffs, exports and queries read from chDB print what the store gives."""
    local, remote = local_and_source(run, pushed, *args)
    assert local == remote and local.strip()


def test_analyze_from_clickhouse_equals_the_store(run: Runner, pushed: tuple[Path, str]) -> None:
    """`analyze --source chdb://…` writes the report `analyze --store` writes (tokens, cost, rounds)."""
    for ref in ("latest", "previous"):
        local, remote = local_and_source(run, pushed, "analyze", ref, "--format", "json", "-o", "-")
        # Sums of floats may differ in the last digit: ClickHouse hands rows over in another order.
        local_report, remote_report = (
            json.loads(t, parse_float=lambda x: round(float(x), 9)) for t in (local, remote)
        )
        local_report.pop("generated_at"), remote_report.pop("generated_at")
        assert local_report == remote_report and local_report["overview"]["agents"]


def test_view_from_clickhouse_equals_the_store(run: Runner, pushed: tuple[Path, str], tmp_path: Path) -> None:
    """`view --source chdb://…` draws the spans `view --store` draws, with the same names and times
    (attribute values of keys mastrace does not type stay text: see the export test)."""
    store, url = pushed
    assert run("view", "latest", "-o", str(tmp_path / "a.html"), "--store", str(store)).returncode == 0
    assert run("view", "latest", "-o", str(tmp_path / "b.html"), "--source", url).returncode == 0
    drawn = re.compile(r'"([0-9a-f]{16})":\{"name":"([^"]*)"[^{}]*"offset":"([^"]*)","duration":"([^"]*)"')
    mine = drawn.findall((tmp_path / "a.html").read_text())
    assert len(mine) == 48 and drawn.findall((tmp_path / "b.html").read_text()) == mine


def test_export_from_clickhouse_types_what_semconv_types(run: Runner, pushed: tuple[Path, str]) -> None:
    """An export from chDB has the store's spans; a key mastrace's conventions type (token counts)
    is a number again, a key they do not know (the demo's `massgen.num_answers`) stays text, as
    the exporter's map stored it."""
    local, remote = local_and_source(run, pushed, "export", "previous", "--format", "jaeger-json")

    def tags(text: str) -> dict[tuple[str, str], dict[str, object]]:
        spans = json.loads(text)["data"][0]["spans"]
        return {(s["spanID"], t["key"]): t for s in spans for t in s["tags"]}

    mine, theirs = tags(local), tags(remote)
    assert mine.keys() == theirs.keys()
    differ = {key for (_, key) in mine if mine[_, key] != theirs[_, key]}
    assert differ == {"massgen.num_answers", "massgen.votes"}
    tokens = [t for (_, key), t in theirs.items() if key == "massgen.usage.input"]
    assert tokens and all(t["type"] == "int64" for t in tokens)


def test_a_second_push_sends_nothing(run: Runner, pushed: tuple[Path, str]) -> None:
    """Pushing the same store to the same table again sends no span twice."""
    store, url = pushed
    again = run("push", "--to", url, "--store", str(store))
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("sent 0 span(s)") and "96 already sent" in again.stdout


def test_a_read_over_the_cap_says_so(run: Runner, pushed: tuple[Path, str]) -> None:
    """`--max-spans-read` bounds what is copied out of ClickHouse, and the cut is said on stderr."""
    _, url = pushed
    cut = run("runs", "--format", "json", "--source", url, "--max-spans-read", "50")
    assert cut.returncode == 0, cut.stderr
    assert sum(r["spans"] for r in json.loads(cut.stdout)) == 50
    assert "only 50 spans were read from ClickHouse" in cut.stderr


@pytest.mark.parametrize("source", ["chdb://", "clickhouse://", "clickhouse://h/db?table=x;DROP", "ftp://x"])
def test_a_bad_clickhouse_url_is_one_line(run: Runner, source: str) -> None:
    """A ClickHouse URL that names no folder, host or plain table is one line and exit 2."""
    result = run("runs", "--source", source)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, str, int]:
    """The seed's two MassGen-shaped sessions in a store and in chDB (its URL), and their span count."""
    root = tmp_path_factory.mktemp("seeded")
    seed = write_store(root / "store")
    url = f"chdb://{root / 'ch'}"
    writer = ClickHouseWriter(parse_target(url))
    try:
        spans = [
            s.span for p in segment_paths(seed.path) for s in read_segment(p) if isinstance(s, StoredSpan)
        ]
        assert writer.send(spans) == len(spans)
    finally:
        writer.shutdown()  # chDB opens one folder per process at a time: each test opens its own
    return seed, url, len(spans)


def test_seed_queries_answer_the_same_from_clickhouse(seeded: tuple[Store, str, int]) -> None:
    """Each of the seed's 16 SQL queries (Parts 3, 4 and 7) gives the same rows on chDB as on the store."""
    seed, url, count = seeded
    assert len(SEED_QUERIES) == 16
    with ClickHouseStore(parse_target(url)) as remote, TraceStore(seed.path) as local:
        remote.load_newest(None)
        assert remote.copied == count and not remote.notes
        for name, text in SEED_QUERIES.items():
            sql = seed.sql(text)
            expected = local.table(sql)
            assert expected[1], name  # every query finds rows in the seed's run
            got = remote.table(sql)
            if "ORDER BY" not in text.upper():  # a GROUP BY alone leaves the row order to the engine
                got, expected = (got[0], sorted(got[1])), (expected[0], sorted(expected[1]))
            assert got == expected, name


def test_serve_source_shows_clickhouse_in_the_ui_query_api_and_mcp(
    seeded: tuple[Store, str, int], tmp_path: Path
) -> None:
    """`serve --source chdb://…` lists the runs, answers Logfire's SQL and the MCP tools as a serve
    over the same spans in a store does."""
    import patient_http
    from mastrace.mcp_server._tools import Tools

    seed, url, _ = seeded
    answers = []
    for store, source in ((seed.path, None), (tmp_path / "unused", url)):
        server = start_intake(store, http_port=0, grpc_port=None, source=source)
        base = f"http://127.0.0.1:{server.http_port}"
        try:
            runs = patient_http.get(f"{base}/api/runs", timeout=120).json()
            # The guide's query has no ORDER BY: one is added so that two engines' answers compare row by row.
            sql = seed.sql(SEED_QUERIES["STEP4_AGENT_COMPARISON"]) + " ORDER BY agent"
            body = {"sql": sql, "min_timestamp": "1970-01-01T00:00:00Z", "limit": 100}
            reply = patient_http.post(
                f"{base}/v2/query", json=body, headers={"accept": "application/json"}, timeout=120
            )
            assert reply.status_code == 200, reply.text
        finally:
            server.stop()
        tools = Tools(store, source=source)
        answers.append(
            (
                runs,
                reply.json(),
                tools.list_runs(10),
                without_generated(tools.analyze("latest")),
                tools.arbitrary_query(sql),
            )
        )
    assert answers[0] == answers[1]
    assert len(answers[0][0]) == 2 and answers[0][1]


@pytest.fixture
def served_to_clickhouse(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A `mastrace serve` writing into chDB; its OTLP/HTTP URL and the chDB URL."""
    url = f"chdb://{tmp_path / 'ch'}"
    server = start_intake(tmp_path / "unused", http_port=0, grpc_port=None, to=url)
    try:
        yield f"http://127.0.0.1:{server.http_port}", url
    finally:
        server.stop()


def test_serve_to_clickhouse_reads_back_as_the_store(
    run: Runner, demo_store: Path, tmp_path: Path, served_to_clickhouse: tuple[str, str]
) -> None:
    """Spans pushed over OTLP into `serve --to chdb://…` read back with the store's runs and tree."""
    otlp, url = served_to_clickhouse
    store = tmp_path / "store"
    shutil.copytree(demo_store, store)
    sent = run("push", "--to", otlp, "--store", str(store))
    assert sent.returncode == 0 and sent.stdout.startswith("sent 96 span(s)"), sent.stderr
    local = {r.trace_id: r for r in TraceStore(store).runs()}
    with ClickHouseStore(parse_target(url)) as remote:
        runs = {r.trace_id: r for r in remote.runs()}
        assert runs == local
        assert [r.spans for r in runs.values()] == [48, 48]
        assert all(r.input_tokens and r.cost for r in runs.values())


def test_a_missing_table_or_server_is_one_line(run: Runner, tmp_path: Path) -> None:
    """No table yet, or no server listening: one line on stderr naming what is missing, exit 2."""
    empty = run("runs", "--source", f"chdb://{tmp_path / 'empty'}")
    assert empty.returncode == 2 and "no table `default`.`otel_traces`" in empty.stderr
    down = run("runs", "--source", "clickhouse://127.0.0.1:9/otel")
    assert (
        down.returncode == 2
        and "cannot reach ClickHouse at clickhouse://default@127.0.0.1:9/otel" in down.stderr
    )
    for result in (empty, down):
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
