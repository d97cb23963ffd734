"""A real Arize Phoenix server on 127.0.0.1 (dependency group `phoenix`), shared by the tests that
send spans to it and read them back through its REST API (`GET /v1/projects/{name}/spans`).

Start-up takes ~13 s on an idle machine and much longer on a loaded one: the health wait has a
generous deadline (`STARTUP_DEADLINE`) and, if it passes, the tests using the server are skipped
with the server's log rather than failed; a server that exits is a failure.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

STARTUP_DEADLINE = 600.0  # seconds; a bound for a stuck server, never a speed requirement
INGEST_DEADLINE = 120.0
PHOENIX = Path(sys.executable).parent / "phoenix"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Phoenix:
    http_port: int
    grpc_port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=30) as response:
            return json.load(response)

    def spans(self, project: str, expected: int) -> list[dict[str, Any]]:
        """The project's spans, once `expected` of them have been ingested (or the deadline passed)."""
        deadline = time.monotonic() + INGEST_DEADLINE
        found: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            try:
                found = self.get(f"/v1/projects/{project}/spans?limit=1000")["data"]
            except urllib.error.HTTPError as exc:  # 404 until the project's first span lands
                if exc.code != 404:
                    raise
            if len(found) >= expected:
                return found
            time.sleep(0.25)
        return found


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def run_phoenix(workdir: Path) -> Iterator[Phoenix]:
    """Start Phoenix in `workdir`, wait until it is healthy, yield it, stop it."""
    if not PHOENIX.exists():
        pytest.skip("arize-phoenix is not installed (dependency group `phoenix`)")
    server = Phoenix(free_port(), free_port())
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(server.http_port),
        "PHOENIX_GRPC_PORT": str(server.grpc_port),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log_path = workdir / "server.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [str(PHOENIX), "serve"], env=env, cwd=workdir, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            deadline = time.monotonic() + STARTUP_DEADLINE
            while not _healthy(server.url):
                if process.poll() is not None:
                    pytest.fail(f"phoenix exited before it was healthy:\n{log_path.read_text()[-3000:]}")
                if time.monotonic() > deadline:
                    pytest.skip(
                        f"phoenix was not healthy after {STARTUP_DEADLINE:.0f} s (machine overloaded?):\n"
                        + log_path.read_text()[-2000:]
                    )
                time.sleep(0.5)
            yield server
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
