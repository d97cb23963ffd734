"""The MCP server of `mastrace mcp`, on the official `mcp` SDK (2.x, `MCPServer`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from .. import semconv
from ..exceptions import MastraceError
from ..store.reader import StorePaths
from ._tools import (
    DEFAULT_SERVE_URL,
    MAX_CHARS,
    MAX_TREE_SPANS,
    MCP_LIMITS,
    QUERY_SECONDS,
    Tools,
    bounded_text,
    framed,
)

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = ["INSTRUCTIONS", "build_server"]

INSTRUCTIONS = f"""\
Traces of multi-agent runs recorded by mastrace, in a table `records` with Logfire's columns (one row
per span). Start with list_runs (or arbitrary_query on {semconv.SPAN_COORDINATION_SESSION} spans),
then trace_tree and analyze for a run, schema_reference for the columns and attribute keys,
arbitrary_query for anything else (DuckDB SQL, read-only), find_exceptions_in_file for errors,
logfire_link for a link to a run in `mastrace serve`, diff to compare two runs, compare_experiments
to compare an experiment's configurations. Trace ids may be given as 'latest', 'previous' or a prefix."""

# The tools' argument types, with what a client sees of them (read when the tools are declared).
Age = Annotated[
    int | None, Field(description="minutes to look back from now (e.g. 60); omit it for every span", ge=0)
]
TraceRef = Annotated[
    str, Field(description="a trace id, a unique prefix of one (4+ hex digits), 'latest' or 'previous'")
]
Query = Annotated[str, Field(description="one read-only SQL statement (DuckDB) over `records`")]
FilePath = Annotated[str, Field(description="a file path, or the end of one, as it appears in tracebacks")]
RunCount = Annotated[int, Field(description="how many runs, newest first", ge=1, le=500)]
SpanCount = Annotated[int, Field(description="show at most this many spans", ge=1, le=5000)]
Experiment = Annotated[str | None, Field(description="an experiment's name (omit it for every experiment)")]
GroupKey = Annotated[
    str | None,
    Field(
        description="group by this configuration key (agents.a.model) or run attribute, not the config hash"
    ),
]
Baseline = Annotated[
    str | None, Field(description="the configuration to compare the others with (key or prefix)")
]
Seed = Annotated[int, Field(description="the bootstrap's seed")]


def _safe(text: str) -> str:
    """`text` capped at the answer size, control characters escaped, framed as untrusted data."""
    from ..tracing._escape import escape_control

    inner = bounded_text(escape_control(text), MAX_CHARS - 400)
    return framed(inner)


def build_server(
    stores: StorePaths = None,
    *,
    serve_url: str = DEFAULT_SERVE_URL,
    memory: int | None = MCP_LIMITS.memory,
    max_seconds: float | None = QUERY_SECONDS,
    source: str | None = None,
) -> MCPServer:
    """An MCP server whose tools read the store(s) at `stores`.

    Tool names and arguments follow Logfire's MCP server (`arbitrary_query`, `schema_reference`,
    `find_exceptions_in_file`, `logfire_link`); `list_runs`, `trace_tree`, `analyze`, `diff` and
    `compare_experiments` are mastrace's. Every tool only reads.

    Args:
        stores: The store folder(s); default `$MASTRACE_DIR` or `./.mastrace`.
        serve_url: The address of `mastrace serve`, for the links `logfire_link` returns.
        memory: Bytes DuckDB may use for one SQL statement (None: DuckDB's default).
        max_seconds: Stop a SQL statement running longer than this (None: never).
        source: A `clickhouse://` or `chdb://` URL whose `otel_traces` the tools read instead.

    Raises:
        ImportError: The `mcp` package (extra `mastrace[mcp]`) is not installed.
    """
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    from .. import __version__

    tools = Tools(stores, serve_url, max_seconds=max_seconds, memory=memory, source=source)
    memory_text = f"{memory:,} bytes" if memory is not None else "the machine's memory"
    server: MCPServer = MCPServer(
        "mastrace", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    read_only = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

    # Made now: at the memory limit, building this answer could itself fail.
    out_of_memory = _safe(f"query failed: Out of Memory Error: over the limit of {memory_text}")

    def answer(call: Callable[..., str], *args: Any) -> str:
        # Every answer, errors included, is capped, has its control characters shown as escapes and
        # is framed as data: span text (and errors echoing SQL or values) is no instruction.
        try:
            return _safe(call(*args))
        except MastraceError as exc:  # a bad argument or SQL: the model reads the message
            try:
                text = _safe(str(exc))
            except MemoryError:  # the statement left no room to spell its error out
                text = out_of_memory
            raise ToolError(text) from None
        except MemoryError:
            raise ToolError(out_of_memory) from None

    @server.tool(annotations=read_only)
    def arbitrary_query(query: Query, age: Age = None) -> str:
        """Run a SQL query on the traces (table `records`, Logfire's columns) and get rows as JSON.

        See schema_reference for the columns and the attribute keys in the store.
        """
        return answer(tools.arbitrary_query, query, age)

    @server.tool(annotations=read_only)
    def schema_reference() -> str:
        """The `records` table: its columns and types, and the attribute keys found in the store."""
        return answer(tools.schema_reference)

    @server.tool(annotations=read_only)
    def find_exceptions_in_file(filepath: FilePath, age: Age = None) -> str:
        """The 10 most recent exceptions whose stack trace goes through the file."""
        return answer(tools.find_exceptions_in_file, filepath, age)

    @server.tool(annotations=read_only)
    def logfire_link(trace_id: TraceRef) -> str:
        """A link to the trace's page in `mastrace serve` (the waterfall of the run)."""
        return answer(tools.logfire_link, trace_id)

    @server.tool(annotations=read_only)
    def list_runs(limit: RunCount = 20) -> str:
        """The newest runs (traces): root span, start, duration, span and error counts, tokens, cost; `ref`
        marks the runs `latest` and `previous` pick."""
        return answer(tools.list_runs, limit)

    @server.tool(annotations=read_only)
    def trace_tree(trace_id: TraceRef = "latest", max_spans: SpanCount = MAX_TREE_SPANS) -> str:
        """A trace's span hierarchy with durations, errors and key attributes."""
        return answer(tools.trace_tree, trace_id, max_spans)

    @server.tool(annotations=read_only)
    def analyze(trace_id: TraceRef = "latest") -> str:
        """A run's analysis report (markdown): overview, phases, per-round timing, tools, errors, cost."""
        return answer(tools.analyze, trace_id)

    @server.tool(annotations=read_only)
    def diff(a: TraceRef, b: TraceRef) -> str:
        """Compare two runs: configuration changes, duration, token, cost and score differences, and what
        happened differently (winner, votes, answers, per-round outcomes, added/removed/slower spans)."""
        return answer(tools.diff, a, b)

    @server.tool(annotations=read_only)
    def compare_experiments(
        experiment: Experiment = None, by: GroupKey = None, baseline: Baseline = None, seed: Seed = 0
    ) -> str:
        """Compare an experiment's configurations: each score's mean with a 95% interval over tasks,
        pass@k, flip rates, failures, tokens, cost, duration; against a baseline, paired differences,
        whether they are real (the interval excludes 0) and which configuration keys changed."""
        return answer(tools.compare_experiments, experiment, by, baseline, seed)

    return server
