"""`serve` is alone on its ports and tells a client nothing of the machine: a taken gRPC port is
refused as a taken HTTP port is, every route taking a body refuses a non-JSON/OTLP one with 415, a
page on another loopback port reads nothing without the token, the token comes from a file or the
environment (never needed on the command line), and no answer shows the store's absolute path or the
user's home."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import patient_http
from mastrace.exceptions import MastraceError
from mastrace.serve import IntakeServer, start_intake
from seed_run import write_store

from .conftest import MASTRACE, ServeProcess

TOKEN = "0123456789abcdef-token"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[IntakeServer]:
    store = tmp_path / "store"
    write_store(store)
    running = start_intake(store, http_port=0, grpc_port=0)
    yield running
    running.stop()


def test_a_taken_grpc_port_is_refused(served: IntakeServer, tmp_path: Path) -> None:
    """A second server on the first one's gRPC port fails to start, in process and as a command."""
    assert served.grpc_port
    with pytest.raises(MastraceError, match="gRPC"):
        start_intake(tmp_path / "second", http_port=0, grpc_port=served.grpc_port).stop()
    done = subprocess.run(
        [str(MASTRACE), "serve", "--store", str(tmp_path / "third"), "--http-port", "0",
         "--grpc-port", str(served.grpc_port)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "gRPC" in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_every_route_taking_a_body_refuses_other_media(served: IntakeServer) -> None:
    """`/v2/query` (and the OTLP routes) answer 415 to text/plain and form bodies."""
    base = f"http://127.0.0.1:{served.http_port}"
    body = '{"sql": "SELECT 1"}'
    for path in ("/v2/query", "/v1/traces"):
        for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
            answer = patient_http.post(base + path, content=body, headers={"Content-Type": kind}, timeout=60)
            assert answer.status_code == 415, (path, kind, answer.status_code, answer.text)
    assert patient_http.post(base + "/v2/query", json={"sql": "SELECT 1"}, timeout=60).status_code == 200


def test_a_page_on_another_loopback_port_reads_nothing(served: IntakeServer) -> None:
    """`Origin: http://127.0.0.1:9999` is refused on the UI's API and the Query API; the server's own
    origin is not."""
    base = f"http://127.0.0.1:{served.http_port}"
    elsewhere = {"Origin": "http://127.0.0.1:9999"}
    own = {"Origin": base}
    assert patient_http.get(base + "/api/runs", headers=elsewhere, timeout=60).status_code == 403
    assert (
        patient_http.post(
            base + "/v2/query", json={"sql": "SELECT 1"}, headers=elsewhere, timeout=60
        ).status_code
        == 403
    )
    assert patient_http.get(base + "/api/runs", headers=own, timeout=60).status_code == 200


def test_with_a_token_another_origin_needs_it_in_its_own_header(tmp_path: Path) -> None:
    """A cookie is sent to every port of a host: from another origin only `Authorization` counts."""
    running = start_intake(tmp_path / "store", http_port=0, grpc_port=None, token=TOKEN)
    try:
        base = f"http://127.0.0.1:{running.http_port}"
        with httpx.Client(base_url=base, timeout=60) as client:
            granted = client.get(f"/?token={TOKEN}", follow_redirects=False)
            assert granted.status_code == 303 and client.cookies
            elsewhere = {"Origin": "http://127.0.0.1:9999"}
            assert client.get("/api/runs", headers=elsewhere).status_code == 403
            assert (
                client.get("/api/runs", headers={**elsewhere, "Authorization": f"Bearer {TOKEN}"}).status_code
                == 200
            )
            assert client.get("/api/runs", headers={"Origin": base}).status_code == 200
    finally:
        running.stop()


def test_no_answer_shows_the_stores_path_or_the_home(served: IntakeServer) -> None:
    """`/v1/read-token-info` names the store folder only; catalog SQL that shows settings and view
    definitions is refused; an error naming a file shows no absolute path."""
    base = f"http://127.0.0.1:{served.http_port}"
    store = str(served.intake.store.resolve())
    home = str(Path.home())
    info = patient_http.get(base + "/v1/read-token-info", timeout=60)
    assert info.status_code == 200 and info.json()["project_name"] == "store"
    for sql in (
        "SELECT * FROM duckdb_settings()",
        "SELECT current_setting('home_directory') AS h",
        "SELECT sql FROM duckdb_views()",
        "SELECT view_definition FROM information_schema.views",
        'SELECT * FROM "duckdb_databases"()',
        "SELECT * FROM sqlite_master",
        f"SELECT * FROM read_json('{store}/segments/nope.ndjson')",
    ):
        answer = patient_http.post(base + "/v2/query", json={"sql": sql}, timeout=60)
        assert store not in answer.text and home not in answer.text, (sql, answer.text[:500])
        assert answer.status_code == 400, (sql, answer.status_code)


def test_the_token_comes_from_a_file_and_stays_off_the_command_line(
    serve_process: object, tmp_path: Path
) -> None:
    """`--token-file`: requests need the token, and the process's command line does not carry it."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    server: ServeProcess = serve_process("--token-file", str(token_file))  # type: ignore[operator]
    assert TOKEN not in Path(f"/proc/{server.process.pid}/cmdline").read_text()
    assert patient_http.get(server.url + "/api/runs", timeout=60).status_code == 401
    assert (
        patient_http.get(
            server.url + "/api/runs", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60
        ).status_code
        == 200
    )
