"""Fixtures for the MassGen integration tests, which run in their own environment (`.venv-massgen`,
built by `make test`): MassGen pins older `openai`, `protobuf` and `wrapt` releases than the rest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .fake_llm import FakeServer, Ledger, Plan, make_server

# MassGen imports LiteLLM, which fetches its price table from the internet unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

HERE = Path(__file__).parent
MASTRACE = Path(sys.executable).parent / "mastrace"  # the command a user runs


@dataclass
class Run:
    """One MassGen run under `mastrace run`: where it wrote, what the server handed out."""

    store: Path
    ledger: Ledger
    stdout: str
    stderr: str
    returncode: int
    config: Path
    folder: Path

    def massgen_turns(self) -> list[Path]:
        """MassGen's own log folders, one per turn (`.../turn_<n>/attempt_1`), in order."""
        found = sorted(self.folder.glob(".massgen/massgen_logs/log_*/turn_*/attempt_*"))
        return sorted(found, key=lambda p: int(p.parent.name.split("_")[1]))


# agent_a has a stdio MCP server; the fake LLM calls its tool once before answering.
MCP_SERVER = f"""      mcp_servers:
        - name: "calc"
          type: "stdio"
          command: "{sys.executable}"
          args: ["{HERE / "mcp_server.py"}"]
"""
# Model names MassGen (through LiteLLM) and mastrace price; the fake server tells agents apart by them.
MODELS = {"a": "gpt-4o-mini", "b": "gpt-4o", "c": "gpt-4o-mini-2024-07-18"}


def write_config(folder: Path, url: str, models: dict[str, str], extra: str = "") -> Path:
    config = folder / "cfg.yaml"
    config.write_text(
        "agents:\n"
        + "".join(
            f'  - id: "agent_{x}"\n    backend:\n      type: "chatcompletion"\n'
            f'      model: "{model}"\n      base_url: "{url}"\n' + (MCP_SERVER if x == "a" else "")
            for x, model in models.items()
        )
        + extra
    )
    return config


def run_massgen(
    tmp: Path,
    *,
    plan: Plan | None = None,
    models: dict[str, str] | None = None,
    questions: tuple[str, ...] = ("What is six times seven?",),
    interactive: bool = False,
    extra_config: str = "",
    instrument: str | None = None,
    interrupt: bool = False,
    store: Path | None = None,
    experiment: str | None = None,
    server: FakeServer | None = None,
    api_key: str = "sk-test-not-a-real-key",
) -> Run:
    """Run `mastrace run -- massgen ...` against a fresh loopback server; several questions are
    asked on standard input in one interactive session. With `interrupt`, SIGINT is sent once a
    request the plan stalls has arrived (the run is then mid-call). `store` (default: a new one in
    `tmp`) lets several runs share a store; `experiment` is `mastrace run --experiment`; with `server`
    (already serving), a new session of it answers the requests carrying `api_key`, at the same
    address, and it is left running."""
    ledger = Ledger()
    plan = plan or Plan()
    plan.questions = questions
    shared = server is not None
    if server is not None:
        server.begin(ledger, plan, api_key)
    else:
        server = make_server(ledger, plan)
        threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        config = write_config(tmp, url, models or MODELS, extra_config)
        home = tmp / "home"
        home.mkdir(exist_ok=True)
        env = {
            **os.environ,
            "HOME": str(home),
            "OPENAI_API_KEY": api_key,
            "NO_COLOR": "1",
        }
        env.pop("MASTRACE_DIR", None)
        store = store or tmp / "store"
        command = [str(MASTRACE), "run", "--store", str(store)]
        if experiment is not None:
            command += ["--experiment", experiment]
        if instrument is not None:
            command += ["--instrument", instrument]
        command += ["--", "massgen", "--automation", "--config", str(config)]
        stdin = None
        if interactive:
            stdin = "".join(f"{q}\n" for q in questions) + "/quit\n"
        else:
            command.append(questions[0])
        with subprocess.Popen(
            command,
            cwd=tmp,
            env=env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # A child of a shell's background job inherits SIGINT ignored; MassGen then ignores it too.
            preexec_fn=_default_sigint,
        ) as process:
            if interrupt:
                assert plan.stalled.wait(600), "the stalled request never arrived"
                process.send_signal(signal.SIGINT)
            try:
                stdout, stderr = process.communicate(stdin, timeout=600)
            except subprocess.TimeoutExpired:
                process.kill()
                raise
    finally:
        plan.release.set()
        if not shared:
            server.shutdown()
            server.server_close()
    return Run(store, ledger, stdout, stderr, process.returncode, config, tmp)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope="session")
def massgen_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """3 agents, agent_a with an MCP server; agent_b answers late, so votes cast before are dropped."""
    yield run_massgen(tmp_path_factory.mktemp("massgen"), plan=Plan(late={MODELS["b"]: 1.5}))


# The failing path: an HTTP 500 the SDK retries, an agent voting for an agent id that does not exist,
# an MCP tool call the server rejects, and a model no price table knows.
FAILING_MODELS = {"a": "gpt-4o-mini", "b": "gpt-4o", "c": "house-model-c"}
FAILING_PLAN = dict(http_500={"gpt-4o": {2}}, bad_voter="house-model-c", mcp_error=True)


@pytest.fixture(scope="session")
def failing_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    yield run_massgen(tmp_path_factory.mktemp("failing"), plan=Plan(**FAILING_PLAN), models=FAILING_MODELS)


@pytest.fixture(scope="session")
def failed_turn_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """Every request fails with HTTP 500: every agent fails and MassGen gives no answer."""
    plan = Plan(http_500={m: set(range(1, 100)) for m in MODELS.values()})
    yield run_massgen(tmp_path_factory.mktemp("failed-turn"), plan=plan)


# agent_b's first request is never answered: the run is mid-call until MassGen's orchestrator times
# out (given 10 s: it then presents an answer it has) or the test sends SIGINT.
STALLED_B = {MODELS["b"]}
TIMEOUT_CONFIG = "timeout_settings:\n  orchestrator_timeout_seconds: 10\n"


@pytest.fixture(scope="session")
def timeout_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    yield run_massgen(
        tmp_path_factory.mktemp("timeout"), plan=Plan(stall=STALLED_B), extra_config=TIMEOUT_CONFIG
    )


@pytest.fixture(scope="session")
def interrupted_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    yield run_massgen(tmp_path_factory.mktemp("sigint"), plan=Plan(stall=STALLED_B), interrupt=True)


@pytest.fixture(scope="session")
def mcp_crash_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """agent_a's MCP server exits in the middle of the tool call (MassGen retries the call once)."""
    yield run_massgen(tmp_path_factory.mktemp("mcp-crash"), plan=Plan(mcp_crash=True))


TWO_QUESTIONS = ("What is six times seven?", "And what is six times eight?")


@pytest.fixture(scope="session")
def two_turns_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """An interactive session: two questions typed on standard input."""
    yield run_massgen(tmp_path_factory.mktemp("two-turns"), questions=TWO_QUESTIONS, interactive=True)


def query(store: Path, sql: str) -> list[dict[str, object]]:
    """Rows of `mastrace query` (the public SQL surface) as dicts."""
    import json

    done = subprocess.run(
        [str(MASTRACE), "query", "--store", str(store), "--format", "json", sql],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def analyze(store: Path, out: Path) -> str:
    """`mastrace analyze latest` written to `out` (the public report), returned as text."""
    done = subprocess.run(
        [str(MASTRACE), "analyze", "--store", str(store), "latest", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return out.read_text()
