"""`--source URL`: the reading commands over another `mastrace serve`'s Query API, equal to `--store`.

The demo's two runs are written to a store, that store is served, and every reading command runs
both ways, in a subprocess each: what they print must be the same.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from live_server import running
from mastrace.serve import start_intake
from mastrace.serve._query_api import query_routes
from mastrace.store.reader import segment_files

from .conftest import MASTRACE, Runner, clean_env, local_and_source, without_generated


@pytest.fixture(scope="module")
def served(demo_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A copy of the demo store, and the URL of a `mastrace serve` over it."""
    store = tmp_path_factory.mktemp("source") / "store"
    shutil.copytree(demo_store, store)
    server = start_intake(store, http_port=0, grpc_port=None)
    try:
        yield store, f"http://127.0.0.1:{server.http_port}"
    finally:
        server.stop()


@pytest.mark.parametrize(
    "args",
    [
        ("runs",),
        ("runs", "--format", "json"),
        ("runs", "--limit", "1"),
        ("tree", "latest"),
        ("tree", "previous", "--max-spans", "7"),
        ("diff", "previous", "latest"),
        ("diff", "previous", "latest", "--format", "json"),
        ("export", "latest", "--format", "otlp-json"),
        ("export", "previous", "--format", "jaeger-json"),
        (
            "query",
            "SELECT span_name, duration, start_timestamp, attributes FROM records "
            "ORDER BY start_timestamp, span_id",
        ),
        ("query", "SELECT * FROM records ORDER BY span_id", "--format", "json"),
        (
            "query",
            "SELECT span_name, tags, is_exception, level FROM records ORDER BY span_id",
            "--format",
            "csv",
        ),
        (
            "query",
            "SELECT attributes->>'massgen.agent_id' AS agent, "
            "SUM((attributes->'massgen.usage.input')::int) AS input, ROUND(AVG(duration)::numeric, 2) AS avg "
            "FROM records WHERE span_name LIKE 'agent.%' GROUP BY 1 ORDER BY 1",
        ),
    ],
)
def test_commands_print_the_same_through_a_source(
    run: Runner, served: tuple[Path, str], args: tuple[str, ...]
) -> None:
    """Runs, trees, diffs, exports and queries read through the Query API print what the store gives."""
    local, remote = local_and_source(run, served, *args)
    assert local == remote and local.strip()


@pytest.mark.parametrize("fmt", ["markdown", "json"])
def test_analyze_through_a_source_equals_the_store(run: Runner, served: tuple[Path, str], fmt: str) -> None:
    """`analyze --source` writes the report `analyze --store` writes, for `latest` and `previous`."""
    for ref in ("latest", "previous"):
        local, remote = local_and_source(run, served, "analyze", ref, "--format", fmt, "-o", "-")
        if fmt == "json":
            local_report, remote_report = json.loads(local), json.loads(remote)
            local_report.pop("generated_at"), remote_report.pop("generated_at")
            assert local_report == remote_report and local_report["overview"]["agents"]
        else:
            assert without_generated(local) == without_generated(remote) and "## " in local


def test_view_through_a_source_equals_the_store(
    run: Runner, served: tuple[Path, str], tmp_path: Path
) -> None:
    """`view --source` writes the same HTML page as `view --store`."""
    store, url = served
    assert run("view", "latest", "-o", str(tmp_path / "a.html"), "--store", str(store)).returncode == 0
    assert run("view", "latest", "-o", str(tmp_path / "b.html"), "--source", url).returncode == 0
    assert (tmp_path / "a.html").read_text() == (tmp_path / "b.html").read_text()


def test_trace_prefixes_resolve_through_a_source(run: Runner, served: tuple[Path, str]) -> None:
    """A trace id prefix resolves at the source as in the store; an unknown one fails the same way."""
    store, url = served
    (trace_id,) = json.loads(run("runs", "--format", "json", "--limit", "1", "--store", str(store)).stdout)[
        0:1
    ]
    prefix = trace_id["trace_id"][:6]
    local, remote = local_and_source(run, served, "tree", prefix)
    assert local == remote
    missing = run("tree", "abcdef12", "--source", url)
    assert missing.returncode == 2 and "no trace matching 'abcdef12'" in missing.stderr


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MASTRACE), *args], capture_output=True, text=True, env=env or clean_env(), timeout=600
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("runs", "--source", "http://127.0.0.1:9"), "cannot reach the source"),
        (("runs", "--source", "ftp://example.org"), "not an http(s) URL"),
        (("runs", "--source", "logfire"), "needs a read token"),
        (("runs", "--source", "http://127.0.0.1:9", "--store", "x"), "not both"),
        (("query", "SELECT 1", "--source", "http://127.0.0.1:9", "--allow-external-access"), "local store"),
    ],
)
def test_source_misuse_is_one_line(args: tuple[str, ...], message: str) -> None:
    """An unreachable, malformed or conflicting `--source` gives one line on stderr and exit code 2."""
    done = _cli(*args)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_remote_errors_are_one_line(served: tuple[Path, str]) -> None:
    """Bad SQL and a URL that is not a Query API come back as one line naming the source."""
    _, url = served
    bad_sql = _cli("query", "SELECT nope FROM records", "--source", url)
    assert bad_sql.returncode == 2 and f"query failed at {url}" in bad_sql.stderr and "nope" in bad_sql.stderr
    refused = _cli("query", "COPY records TO '/tmp/x.csv'", "--source", url)
    assert refused.returncode == 2 and "only SELECT-like" in refused.stderr
    not_api = _cli("runs", "--source", url + "/runs")
    assert not_api.returncode == 2 and "no Query API" in not_api.stderr


def test_the_read_token_comes_from_the_environment(served: tuple[Path, str]) -> None:
    """A serve with a token is read with `MASTRACE_SERVE_TOKEN` or `LOGFIRE_READ_TOKEN`, refused without."""
    store, _ = served
    with running(query_routes(store, token="s3cret")) as url:
        refused = _cli("runs", "--source", url)
        wrong = _cli("runs", "--source", url, env={**clean_env(), "MASTRACE_SERVE_TOKEN": "guess"})
        served_token = _cli("runs", "--source", url, env={**clean_env(), "MASTRACE_SERVE_TOKEN": "s3cret"})
        logfire_token = _cli("runs", "--source", url, env={**clean_env(), "LOGFIRE_READ_TOKEN": "s3cret"})
    assert refused.returncode == 2 and "refused the read token" in refused.stderr
    assert wrong.returncode == 2
    assert served_token.returncode == 0 and served_token.stdout.count("coordination.session") == 2
    assert logfire_token.stdout == served_token.stdout


def test_a_redirecting_or_broken_source_is_one_line_and_keeps_the_token() -> None:
    """A source that redirects elsewhere, or answers an HTML error page, gives one line and exit 2,
    and the read token never reaches the origin a redirect points to."""
    from starlette.responses import RedirectResponse, Response
    from starlette.routing import Route

    seen: list[str | None] = []

    async def elsewhere(request: Any) -> Any:
        seen.append(request.headers.get("authorization"))
        return Response(b"", 500)

    async def broken(request: Any) -> Any:
        return Response(b"<html>\n<body>\nBad gateway\n</body>\n</html>", 502, media_type="text/html")

    env = {**clean_env(), "LOGFIRE_READ_TOKEN": "pylf_v1_us_not_for_elsewhere"}
    with running([Route("/v2/query", elsewhere, methods=["GET", "POST"])]) as other:

        async def redirect(request: Any) -> Any:
            return RedirectResponse(f"{other}/v2/query", 302)

        with running([Route("/v2/query", redirect, methods=["POST"])]) as url:
            moved = _cli("runs", "--source", url, env=env)
        with running([Route("/v2/query", broken, methods=["POST"])]) as url:
            failed = _cli("analyze", "latest", "--source", url, env=env)
    assert moved.returncode == 2 and moved.stderr.count("\n") == 1 and f"redirects to {other}" in moved.stderr
    assert failed.returncode == 2 and failed.stderr.count("\n") == 1 and "answered 502" in failed.stderr
    assert seen == []


def test_a_source_says_what_its_store_skipped_and_showed_once(
    run: Runner, demo_store: Path, tmp_path: Path
) -> None:
    """Over a served store holding a line over 16 MiB and every span twice, `--source` answers as
    `--store` does and says on stderr, as `--store` does, what the source left out and showed once."""
    from .test_unreadable_lines import append_line

    store = tmp_path / "hostile"
    shutil.copytree(demo_store, store)
    for segment in segment_files(store):
        shutil.copy(segment, segment.with_name("copy-" + segment.name))
    first = json.loads(segment_files(store)[0].read_text().splitlines()[0])
    append_line(segment_files(store)[0], first, 20 << 20)
    server = start_intake(store, http_port=0, grpc_port=None)
    try:
        for args in (("runs",), ("analyze", "latest", "-o", "-"), ("query", "SELECT count(*) FROM records")):
            local = run(*args, "--store", str(store))
            remote = run(*args, "--source", f"http://127.0.0.1:{server.http_port}")
            assert local.returncode == remote.returncode == 0, remote.stderr
            assert without_generated(remote.stdout) == without_generated(local.stdout)
            assert "skipped 1 malformed row(s)" in local.stderr
            assert "extra copy(ies) of spans stored more than once" in local.stderr
            assert remote.stderr == local.stderr.replace(str(store), f"http://127.0.0.1:{server.http_port}")
    finally:
        server.stop()
