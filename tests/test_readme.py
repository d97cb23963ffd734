"""Every Python and shell block of the README runs, as written, against the real package.

Each fenced `python` or `bash` block is preceded by a marker comment that says how it is tested:

- `<!-- test: run [needs=...] [cwd=repo] -->`: run as written (Python with this interpreter, shell with
  `bash -e`), in a fresh folder with a fresh HOME and `mastrace` on PATH; it must exit 0. What a block
  needs besides the package is named in `needs=` and provided by a fixture:
  `store` (a store of two demo runs in `./.mastrace`), `stores` (a run whose parent and worker processes
  wrote to `parent/.mastrace` and `workers/w1/.mastrace`), `collector` (an OTLP receiver, mastrace's own
  intake, on the standard ports 4317/4318), `logfire` (a write token and a loopback Logfire endpoint in
  `LOGFIRE_TOKEN` / `LOGFIRE_BASE_URL`), `app` (`your_agents.py` and `any_otel_app.py`, traced programs),
  `openai` (an OpenAI-compatible server on loopback in `OPENAI_BASE_URL`, and `OPENAI_API_KEY`),
  `maseval` (`my_benchmark.py`: the MASEval integration tests' small real benchmark), `source` (another
  `mastrace serve` of a store of two demo runs on 127.0.0.1:4318, read through `--source`), `serve` (the
  preceding `server` block running), `massgen` (MassGen itself: run by `tests_massgen/`, in MassGen's
  own environment).
- `<!-- test: server -->`: a long-running command (`mastrace serve`), started for the blocks after it.
- `<!-- test: pytest -->`: a test file, run by pytest with the package's plugin.
- `<!-- test: install -->`: `pip install` lines: every extra they name exists in `pyproject.toml`.
- `<!-- test: mcp-client -->`: `claude mcp add NAME -- COMMAND…` lines (Claude Code's command, not installed
  here): COMMAND, its `--store` pointed at a store of two demo runs, is started as a stdio MCP server and the
  official `mcp` client lists its tools and calls one.
- `<!-- test: skip (REASON) -->`: only for the reasons in `SKIP_REASONS` (the suite itself, Docker).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import metadata
from pathlib import Path

import pytest

from live_server import serving

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
SKIP_REASONS = {
    "the test suite itself",
    "needs a Docker engine",
    "the test suite itself, and every benchmark",
}
NEEDS = {"store", "stores", "collector", "logfire", "app", "openai", "maseval", "serve", "source", "massgen"}
_BLOCK = re.compile(
    r"^<!-- test: (?P<marker>[^>]*?) -->\n```(?P<lang>python|bash)\n(?P<code>.*?)^```$", re.M | re.S
)
_FENCE = re.compile(r"^```(python|bash)$", re.M)


@dataclass(frozen=True)
class Block:
    """One fenced block of the README and how it is tested."""

    index: int
    lang: str
    code: str
    kind: str
    needs: frozenset[str]
    options: dict[str, str]
    line: int

    @property
    def id(self) -> str:
        return f"{self.index:02d}-{self.lang}-line{self.line}"


def parse(text: str) -> list[Block]:
    """The README's python and bash blocks with their markers."""
    blocks = []
    for i, m in enumerate(_BLOCK.finditer(text), 1):
        marker = m["marker"].strip()
        kind, _, rest = marker.partition(" ")
        options = dict(
            item.split("=", 1) for item in rest.split() if "=" in item and not rest.startswith("(")
        )
        needs = frozenset(filter(None, options.pop("needs", "").split(",")))
        if kind == "skip":
            options = {"reason": rest.strip().strip("()")}
        line = text.count("\n", 0, m.start()) + 2
        blocks.append(Block(i, m["lang"], m["code"], kind, needs, options, line))
    return blocks


BLOCKS = parse(README.read_text(encoding="utf-8"))


def test_every_python_and_bash_block_is_marked() -> None:
    """No block escapes: each python or bash fence has a known marker, each skip a known reason."""
    fences = len(_FENCE.findall(README.read_text(encoding="utf-8")))
    assert len(BLOCKS) == fences, "a ```python or ```bash block lacks its <!-- test: ... --> marker"
    for block in BLOCKS:
        assert block.kind in ("run", "server", "pytest", "install", "mcp-client", "skip"), block
        assert block.needs <= NEEDS, block
        if block.kind == "skip":
            assert block.options["reason"] in SKIP_REASONS, block


# --- fixtures: what blocks need -------------------------------------------------------------------
def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MASTRACE_", "OTEL_", "LOGFIRE_", "OPENAI_", "PYTEST_")) and k != "TRACEPARENT"
    }
    env.update(HOME=str(home), PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", **extra)
    return env


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of two demo runs (a different model the second time)."""
    store = tmp_path_factory.mktemp("readme-demo") / ".mastrace"
    home = store.parent / "home"
    home.mkdir()
    for model in ("sim-large", "sim-small"):
        demo = [sys.executable, str(ROOT / "examples" / "coordination_demo.py"), "--store", str(store)]
        subprocess.run(
            [*demo, "--model", model], check=True, capture_output=True, env=_env(home), timeout=300
        )
    return store


YOUR_AGENTS = """\
import mastrace

mastrace.configure(service_name="my-agents")
with mastrace.get_tracer().span("coordination.session", attributes={"massgen.task": "readme"}):
    with mastrace.get_tracer().span("agent.agent_a.round_0"):
        pass
"""
ANY_OTEL_APP = """\
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)
with trace.get_tracer("any.app").start_as_current_span("any.work"):
    pass
provider.shutdown()
"""
MY_BENCHMARK = """\
# A small real MASEval benchmark (no network): the one the MASEval integration's tests run.
from integrations.test_maseval import EchoBenchmark as MyBenchmark, _task

tasks = [_task("t0", "mars"), _task("t1", "tea")]
config = {"temperature": 0.0}
"""
WORKER = """
import sys
import mastrace
mastrace.configure(local=sys.argv[1], service_name=sys.argv[2])
with mastrace.get_tracer().span(sys.argv[3]):
    env = mastrace.inject_env()
print(env.get("TRACEPARENT", ""))
"""


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as `mastrace serve` binds
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.fixture
def standard_ports() -> Iterator[None]:
    """Ports 4317/4318 for this test alone: a test of another suite on this machine (a second copy, another
    Python) that needs them waits for this one rather than skipping; another program holding them for
    10 minutes skips the test, saying so."""
    import fcntl

    with (Path(tempfile.gettempdir()) / "mastrace-tests-ports-4317-4318.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed
        deadline = time.monotonic() + 600
        while not (_port_free(4318) and _port_free(4317)):
            if time.monotonic() > deadline:
                pytest.skip(
                    "ports 4317/4318 stayed in use for 10 minutes: the README's serve blocks need them"
                )
            time.sleep(0.5)
        yield


@pytest.fixture
def collector(tmp_path: Path, standard_ports: None) -> Iterator[Path]:
    """mastrace's OTLP intake on the standard ports; yields the store it writes to."""
    from mastrace.serve import start_intake

    if not (_port_free(4318) and _port_free(4317)):
        pytest.skip("ports 4317/4318 are in use on this machine: the collector blocks need them")
    server = start_intake(tmp_path / "collector-store", http_port=4318, grpc_port=4317)
    try:
        yield tmp_path / "collector-store"
    finally:
        server.stop()


def _prepare(block: Block, work: Path, home: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    """Lay out what the block needs in `work`; returns the extra environment."""
    extra: dict[str, str] = {}
    if {"collector", "logfire", "source", "serve"} & block.needs:
        request.getfixturevalue("standard_ports")
    if "store" in block.needs:
        shutil.copytree(request.getfixturevalue("demo_store"), work / ".mastrace")
    if "stores" in block.needs:
        env = _env(home)
        parent = subprocess.run(
            [sys.executable, "-c", WORKER, str(work / "parent/.mastrace"), "parent", "coordination.session"],
            check=True, capture_output=True, text=True, env=env, timeout=600,
        ).stdout.strip()  # fmt: skip
        subprocess.run(
            [sys.executable, "-c", WORKER, str(work / "workers/w1/.mastrace"), "worker", "agent.w1.round_0"],
            check=True, capture_output=True, text=True, env={**env, "TRACEPARENT": parent}, timeout=600,
        )  # fmt: skip
    if "collector" in block.needs or "logfire" in block.needs:
        request.getfixturevalue("collector")
    if "source" in block.needs:
        request.getfixturevalue("source_server")
    if "logfire" in block.needs:
        extra.update(LOGFIRE_TOKEN="readme-test-token", LOGFIRE_BASE_URL="http://127.0.0.1:4318")
    if "app" in block.needs:
        (work / "your_agents.py").write_text(YOUR_AGENTS)
        (work / "any_otel_app.py").write_text(ANY_OTEL_APP)
    if "openai" in block.needs:
        extra.update(OPENAI_BASE_URL=request.getfixturevalue("openai_url"), OPENAI_API_KEY="sk-readme-test")
    if "maseval" in block.needs:
        (work / "my_benchmark.py").write_text(MY_BENCHMARK)
        extra["PYTHONPATH"] = str(Path(__file__).parent)  # where the benchmark of the MASEval tests lives
    return extra


@pytest.fixture(scope="module")
def openai_url() -> Iterator[str]:
    """An OpenAI-compatible server on loopback (the one the OpenAI integration's tests use)."""

    from integrations.test_openai import Handler

    with serving(Handler, "/v1") as url:
        yield url


@pytest.fixture
def source_server(tmp_path: Path, demo_store: Path, standard_ports: None) -> Iterator[Path]:
    """Another `mastrace serve` on 127.0.0.1:4318 over a copy of the demo store; yields that store."""
    from mastrace.serve import start_intake

    if not _port_free(4318):
        pytest.skip("port 4318 is in use on this machine: the --source blocks need it")
    store = tmp_path / "remote-store"
    shutil.copytree(demo_store, store)
    server = start_intake(store, http_port=4318, grpc_port=None)
    try:
        yield store
    finally:
        server.stop()


# --- running blocks -------------------------------------------------------------------------------
def _command(block: Block, work: Path) -> list[str]:
    if block.lang == "python":
        script = work / f"readme_block_{block.index:02d}.py"
        script.write_text(block.code)
        return [sys.executable, script.name]
    return ["bash", "-e", "-o", "pipefail", "-c", block.code]


def _start_server(block: Block, work: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """Start a `server` block in its own process group; return once it said where it listens."""
    if not (_port_free(4318) and _port_free(4317)):
        pytest.skip("ports 4317/4318 are in use on this machine: `mastrace serve` needs them")
    process = subprocess.Popen(
        _command(block, work), cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    assert process.stdout is not None
    deadline = time.monotonic() + 120
    for line in process.stdout:
        if "mastrace serve:" in line or time.monotonic() > deadline:
            break
    if process.poll() is not None:
        pytest.fail(f"the server block exited with {process.returncode}")
    return process


def _stop(process: subprocess.Popen[str]) -> None:
    # SIGTERM, not SIGINT: a suite started in the background ignores SIGINT, and so do its children.
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


RUNNABLE = [b for b in BLOCKS if b.kind in ("run", "pytest") and "massgen" not in b.needs]


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_block_runs_as_written(block: Block, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The block exits 0 in a fresh folder, given what its marker says it needs."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    env = _env(home, **_prepare(block, work, home, request))
    server = None
    if "serve" in block.needs:
        previous = [b for b in BLOCKS if b.kind == "server" and b.index < block.index][-1]
        server = _start_server(previous, work, env)
    try:
        if block.kind == "pytest":
            (work / "test_readme_example.py").write_text(block.code)
            command = [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "test_readme_example.py",
            ]
        else:
            command = _command(block, work)
        cwd = ROOT if block.options.get("cwd") == "repo" else work
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    finally:
        if server is not None:
            _stop(server)
    assert done.returncode == 0, f"README line {block.line}:\n{done.stdout}\n{done.stderr}"
    received = None
    if {"collector", "logfire"} & block.needs:
        received = _span_names(request.getfixturevalue("collector"), env)
    _check_outcome(block, done, received)


def _span_names(store: Path, env: dict[str, str]) -> set[str]:
    """The span names a store holds (empty when it has none)."""
    if not (store / "segments").is_dir():
        return set()
    done = subprocess.run(
        [str(BIN / "mastrace"), "query", "--store", str(store), "--format", "csv",
         "SELECT DISTINCT span_name FROM records"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    return set(done.stdout.splitlines()[1:])


def _check_outcome(block: Block, done: subprocess.CompletedProcess[str], received: set[str] | None) -> None:
    """What a few blocks say they do, beyond exiting 0 (`received`: what the collector got)."""
    if received is not None:  # every block that talks to the collector or "Logfire" reached it
        assert "coordination.session" in received, (block.line, received)
    if "DestinationStats(name='otlp'" in block.code:
        expected = re.search(r"# (DestinationStats\(.*\))", block.code)
        assert expected is not None and done.stdout.strip().splitlines()[-1] == expected.group(1)
    if "serve" in block.needs:
        assert "any.work" in done.stdout  # the span the app sent, listed from the server's store
    if "stores" in block.needs:
        assert "coordination.session" in done.stdout and "agent.w1.round_0" in done.stdout


INSTALLS = [b for b in BLOCKS if b.kind == "install"]


@pytest.mark.parametrize("block", INSTALLS, ids=[b.id for b in INSTALLS])
def test_install_lines_name_real_extras(block: Block) -> None:
    """Each `pip install '.[a,b]'` names extras that the package defines."""
    extras = set(metadata("mastrace").get_all("Provides-Extra") or [])
    named = {e.strip() for group in re.findall(r"\.\[([^\]]+)\]", block.code) for e in group.split(",")}
    assert named <= extras, named - extras
    for line in textwrap.dedent(block.code).splitlines():
        command = line.split("#")[0].strip()
        assert not command or command.startswith(("pip install ", "cd ")), line


MCP_CLIENTS = [b for b in BLOCKS if b.kind == "mcp-client"]


@pytest.mark.parametrize("block", MCP_CLIENTS, ids=[b.id for b in MCP_CLIENTS])
def test_mcp_client_lines_start_a_server_that_answers(block: Block, demo_store: Path) -> None:
    """Each `claude mcp add … -- COMMAND` starts an MCP server that lists mastrace's tools and answers one."""
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    lines = [shlex.split(line) for line in block.code.splitlines() if line.strip()]
    assert lines and all(words[:3] == ["claude", "mcp", "add"] and "--" in words for words in lines)
    for words in lines:
        command = words[words.index("--") + 1 :]
        assert command[0] == "mastrace", command
        args = [str(demo_store) if command[i - 1] == "--store" else w for i, w in enumerate(command)][1:]
        params = StdioServerParameters(command=str(BIN / "mastrace"), args=args, env=dict(os.environ))

        async def session(params: StdioServerParameters = params) -> tuple[set[str], str]:
            async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
                await client.initialize()
                tools = {tool.name for tool in (await client.list_tools()).tools}
                answer = await client.call_tool("list_runs", {})
                return tools, "".join(getattr(part, "text", "") for part in answer.content)

        tools, runs = anyio.run(session)
        assert {"arbitrary_query", "schema_reference", "list_runs", "trace_tree"} <= tools
        assert "coordination.session" in runs or "latest" in runs, runs
