"""The argument parser of the `mastrace` command.

It imports nothing but the standard library: `mastrace --help` and every argument error answer
without loading DuckDB or the OpenTelemetry SDK. Each subcommand names its handler as
`"module:function"` (`handler` in the parsed namespace); `main()` imports it only when it runs.
A new subcommand is one `sub.add_parser(...)` here and a handler in a module of its own.
"""

from __future__ import annotations

import argparse

from ..store._limits import DEFAULT_QUERY_LIMITS
from ._terminal import escape_control

TYPE_CHECKING = False  # not `typing`'s: `mastrace --help` does not import it
if TYPE_CHECKING:
    from typing import Any, NoReturn

__all__ = ["DEFAULT_REPORT", "DEFAULT_VIEW", "build_parser"]

DEFAULT_REPORT = "ANALYSIS_REPORT.md"
DEFAULT_VIEW = "trace.html"

_DESCRIPTION = """\
Inspect the local trace store that mastrace writes (default: $MASTRACE_DIR or ./.mastrace).

TRACE is a trace id, a unique prefix of one (4+ hex characters), 'latest' or 'previous'.
'latest' is the newest run (the trace whose root span started last, a run whose root span
is still open included), 'previous' the one before it; `mastrace runs` marks the rows they pick.
The SQL table is `records`, with Logfire's columns."""

_EPILOG = """\
examples:
  mastrace runs
  mastrace tree latest
  mastrace query "SELECT span_name, duration FROM records ORDER BY duration DESC LIMIT 5"
  mastrace analyze latest -o ANALYSIS_REPORT.md
  mastrace view latest -o trace.html
  mastrace diff previous latest
  mastrace graph latest --format mermaid
  mastrace export latest --format jaeger-json -o trace.json
  mastrace push --to http://localhost:4318
  mastrace serve
  mastrace analyze latest --source http://127.0.0.1:4318
  mastrace mcp --store .mastrace
  mastrace prune --older-than 7d --max-size 5GB
  mastrace compact
  mastrace run --store runs/today -- massgen --config cfg.yaml 'question'"""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr and exit status 2."""

    def error(self, message: str) -> NoReturn:
        if message.endswith("required: COMMAND") and self._subparsers is not None:
            names = [a for action in self._subparsers._group_actions for a in getattr(action, "choices", {})]
            message = f"give a command: {', '.join(names)}"
        self.exit(2, escape_control(f"{self.prog}: error: {message} (see '{self.prog} --help')") + "\n")


class _Once(argparse.Action):
    """An option that takes one value: giving it twice is an error, never a silent choice."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        if getattr(namespace, self.dest, None) is not None:
            parser.error(
                f"{option} takes one value, given twice ({getattr(namespace, self.dest)!r}, {values!r})"
            )
        setattr(namespace, self.dest, values)


def _reading_store() -> _Parser:
    common = _Parser(add_help=False)
    common.add_argument(
        "--store",
        metavar="DIR",
        action="append",
        default=None,
        help="store folder (default: $MASTRACE_DIR or ./.mastrace); repeat it, or give a glob such as "
        "'runs/*/.mastrace', to read several stores as one",
    )
    return common


def _source_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--source",
        metavar="URL",
        default=None,
        help="read through a Logfire-compatible Query API instead of a store: another `mastrace serve` "
        "(http://host:4318) or Logfire ('logfire', or its API URL); the read token comes from "
        "$LOGFIRE_READ_TOKEN, else $MASTRACE_SERVE_TOKEN (needs the query extra). Or ClickHouse's "
        "otel_traces, as the OpenTelemetry Collector writes it: clickhouse://user@host:8123/db?table="
        "otel_traces (password: $CLICKHOUSE_PASSWORD) or chdb:///folder (needs the clickhouse extra)",
    )
    parser.add_argument(
        "--max-spans-read",
        type=int,
        default=None,
        metavar="N",
        help="with a clickhouse:// source: copy at most N spans out of ClickHouse, the newest runs "
        "first (default 2,000,000); a read that was cut says so",
    )
    parser.add_argument(
        "--source-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="with --source: give up after this many seconds in all, waits for a rate limit included "
        "(default 300; 0: no deadline)",
    )
    parser.add_argument(
        "--source-max-bytes",
        default="150MB",
        metavar="SIZE",
        help="with --source: refuse an answer larger than this (default 150MB)",
    )


def _one_store(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--store",
        metavar="DIR",
        action=_Once,
        default=None,
        help=f"the store folder {what} (default: $MASTRACE_DIR or ./.mastrace); one folder",
    )


def _trace_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "trace",
        nargs="?",
        default="latest",
        metavar="TRACE",
        help="trace id, unique prefix, 'latest' (default) or 'previous'",
    )


def _handler(parser: argparse.ArgumentParser, target: str) -> None:
    parser.set_defaults(handler=f"mastrace.cli.{target}")


def build_parser() -> argparse.ArgumentParser:
    """The `mastrace` parser with its subcommands; each sets `handler` (`"module:function"`)."""
    reading = _reading_store()
    parser = _Parser(
        prog="mastrace",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    runs = sub.add_parser(
        "runs",
        parents=[reading],
        help="list runs (traces), newest first; 'latest' and 'previous' marked",
        description="List runs (one per trace), newest first. The 'ref' column marks the runs that "
        "'latest' and 'previous' pick.",
    )
    runs.add_argument("--limit", type=int, default=20, help="show at most N runs (0: all; default 20)")
    runs.add_argument("--format", choices=("table", "json"), default="table")
    _source_arg(runs)
    _handler(runs, "_commands:cmd_runs")

    tree = sub.add_parser("tree", parents=[reading], help="print a trace's span hierarchy")
    _trace_arg(tree)
    tree.add_argument(
        "--max-spans", type=int, default=2000, help="print at most N spans (0: all; default 2000)"
    )
    _source_arg(tree)
    _handler(tree, "_commands:cmd_tree")

    query = sub.add_parser("query", parents=[reading], help="run SQL against the `records` table")
    query.add_argument("sql", metavar="SQL", help="a DuckDB SQL statement over `records`")
    query.add_argument("--format", choices=("table", "json", "csv"), default="table")
    query.add_argument(
        "--allow-external-access",
        action="store_true",
        help="let the SQL read and write other files and databases (read_csv, COPY … TO, ATTACH); "
        "off by default: the query sees the store and nothing else",
    )
    limits = DEFAULT_QUERY_LIMITS
    query.add_argument(
        "--timeout",
        type=float,
        default=limits.timeout,
        metavar="SECONDS",
        help=f"stop the query after this many seconds (default {limits.timeout:g}; 0: no limit)",
    )
    query.add_argument(
        "--memory",
        default=f"{(limits.memory or 0) // 1000**3}GB",
        metavar="SIZE",
        help=f"memory the query may use, e.g. 512MB or 8GB (default {(limits.memory or 0) // 1000**3}GB; "
        "0: DuckDB's default, 80%% of the machine's); nothing is spilled to disk",
    )
    query.add_argument(
        "--max-rows",
        type=int,
        default=limits.max_rows,
        metavar="N",
        help=f"print at most N rows (default {limits.max_rows:,}; 0: all)",
    )
    _source_arg(query)
    _handler(query, "_commands:cmd_query")

    analyze = sub.add_parser("analyze", parents=[reading], help=f"write {DEFAULT_REPORT} for a trace")
    _trace_arg(analyze)
    analyze.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help=f"output file, '-' for stdout (default: ./{DEFAULT_REPORT}; stdout for json)",
    )
    analyze.add_argument("--format", choices=("markdown", "json"), default="markdown")
    _source_arg(analyze)
    _handler(analyze, "_report_commands:cmd_analyze")

    view = sub.add_parser("view", parents=[reading], help="write a self-contained HTML waterfall of a trace")
    _trace_arg(view)
    view.add_argument("-o", "--output", metavar="FILE", help=f"output file (default: ./{DEFAULT_VIEW})")
    view.add_argument("--max-spans", type=int, default=None, help="draw at most N spans (default 20,000)")
    _source_arg(view)
    _handler(view, "_report_commands:cmd_view")

    graph = sub.add_parser(
        "graph", parents=[reading], help="print a run's coordination graph (Mermaid, DOT, SVG or JSON)"
    )
    _trace_arg(graph)
    graph.add_argument("--format", choices=("mermaid", "dot", "svg", "json"), default="mermaid")
    graph.add_argument("-o", "--output", metavar="FILE", help="output file (default: stdout)")
    _source_arg(graph)
    _handler(graph, "_graph:cmd_graph")

    diff = sub.add_parser(
        "diff", parents=[reading], help="compare two runs' configs, durations, tokens and cost"
    )
    diff.add_argument("run_a", metavar="RUN_A", help="trace id, prefix, 'latest' or 'previous'")
    diff.add_argument("run_b", metavar="RUN_B", help="trace id, prefix, 'latest' or 'previous'")
    diff.add_argument("--format", choices=("text", "json"), default="text")
    _source_arg(diff)
    _handler(diff, "_report_commands:cmd_diff")

    compare = sub.add_parser(
        "compare",
        parents=[reading],
        help="compare an experiment's configurations: scores with 95%% intervals, failures, tokens, cost",
        description="Compare the configurations of an experiment (see mastrace.experiment_run; scores "
        "from GenAI evaluation events). Intervals are a cluster bootstrap over tasks.",
    )
    compare.add_argument("--experiment", metavar="NAME", help="only this experiment's runs (default: all)")
    compare.add_argument(
        "--by",
        metavar="KEY",
        help="group by a configuration key (agents.a.model) or a run attribute instead of the config hash",
    )
    compare.add_argument(
        "--baseline", metavar="CONFIG", help="compare every configuration with this one (a key or prefix)"
    )
    compare.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default 0)")
    compare.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    compare.add_argument("--tasks", action="store_true", help="also print each task's scores by repetition")
    compare.add_argument("--format", choices=("table", "json", "csv", "markdown"), default="table")
    compare.add_argument("-o", "--output", metavar="FILE", help="output file (default: stdout)")
    _source_arg(compare)
    _handler(compare, "_compare:cmd_compare")

    experiments = sub.add_parser(
        "experiments", parents=[reading], help="list experiments: runs, configurations, tasks, failures"
    )
    experiments.add_argument("--format", choices=("table", "json"), default="table")
    _source_arg(experiments)
    _handler(experiments, "_compare:cmd_experiments")

    export = sub.add_parser("export", parents=[reading], help="export a trace as OTLP/JSON or Jaeger JSON")
    _trace_arg(export)
    export.add_argument("--format", choices=("otlp-json", "jaeger-json"), required=True)
    export.add_argument("-o", "--output", metavar="FILE", help="output file (default: stdout)")
    _source_arg(export)
    _handler(export, "_report_commands:cmd_export")

    push = sub.add_parser(
        "push",
        parents=[reading],
        help="send stored spans to an OTLP endpoint or Logfire; what it already took is not sent again",
    )
    push.add_argument(
        "trace", nargs="*", metavar="TRACE", help="only these traces (ids, prefixes, 'latest'); default: all"
    )
    push.add_argument(
        "--to",
        required=True,
        metavar="URL",
        help="http(s)://host:port of an OTLP endpoint, 'logfire', or ClickHouse's otel_traces "
        "(clickhouse://user@host:8123/db?table=otel_traces or chdb:///folder; the table is created "
        "with the OpenTelemetry Collector's schema when missing)",
    )
    push.add_argument(
        "--protocol",
        choices=("http/protobuf", "grpc"),
        default=None,
        help="OTLP protocol (default http/protobuf; $OTEL_EXPORTER_OTLP_PROTOCOL)",
    )
    push.add_argument(
        "--since", metavar="WHEN", help="only spans started since: 90s, 15m, 2h, 1d or an ISO time"
    )
    push.add_argument(
        "--header", action="append", metavar="KEY=VALUE", help="an HTTP/gRPC header (repeatable)"
    )
    push.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long to wait for the receiver's answer to each batch (default 10); a batch not "
        "answered in time is not marked as sent",
    )
    _handler(push, "_push:cmd_push")

    prune = sub.add_parser(
        "prune",
        parents=[reading],
        help="remove the store's oldest segments: older than an age, or while over a size",
        description="Remove whole segments of the store (with their roots and skeleton files), oldest "
        "first: those last written more than --older-than ago, then the oldest while the store is over "
        "--max-size. A segment written in the last minute, or held open by a running writer, is never "
        "removed. configure(retention=...) "
        "does the same automatically each time a writer starts a new segment.",
    )
    prune.add_argument("--older-than", metavar="AGE", help="remove segments older than AGE: 90m, 12h, 7d, 2w")
    prune.add_argument(
        "--max-size", metavar="SIZE", help="then remove the oldest while the store is over SIZE: 500MB, 5GB"
    )
    prune.add_argument("--dry-run", action="store_true", help="say what would be removed; remove nothing")
    prune.add_argument(
        "--compact",
        action="store_true",
        help="then compact the closed segments kept into one Parquet file (see `mastrace compact`)",
    )
    _handler(prune, "_prune:cmd_prune")

    compact = sub.add_parser(
        "compact",
        parents=[reading],
        help="rewrite the store's closed segments as one compressed Parquet file (every reader reads it)",
        description="Rewrite the closed NDJSON segments of the store (none written in the last --min-age, "
        "none held open by a running writer, none a `mastrace push` destination has not taken whole) as "
        "one Parquet file sorted by trace, and merge small compacted files. Readers see the old files or "
        "the new, never both; a compaction stopped at any point loses nothing. `mastrace serve` compacts "
        "periodically, and `mastrace prune --compact` after pruning.",
    )
    compact.add_argument(
        "--min-age",
        metavar="AGE",
        default="60s",
        help="leave segments written more recently than AGE (default 60s): a writer may still append",
    )
    _handler(compact, "_compact:cmd_compact")

    serve = sub.add_parser(
        "serve",
        help="receive OTLP (HTTP and gRPC) into the local store, with a live web UI on the HTTP port",
    )
    _one_store(serve, "written to and shown")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--http-port", type=int, default=4318, help="OTLP/HTTP port (default 4318; -1: off)")
    serve.add_argument("--grpc-port", type=int, default=4317, help="OTLP/gRPC port (default 4317; -1: off)")
    serve.add_argument(
        "--token",
        metavar="TOKEN",
        default=None,
        help="require Authorization: Bearer TOKEN on every request (intake, UI and API; the printed "
        "address /signin#token=TOKEN gives a browser a cookie, the token never in a request line); "
        "default $MASTRACE_SERVE_TOKEN; required off loopback. "
        "On the command line the token is visible to every user of the machine (ps): prefer "
        "--token-file or the environment",
    )
    serve.add_argument(
        "--token-file",
        metavar="PATH",
        default=None,
        help="read the token from this file (its first line), instead of --token",
    )
    serve.add_argument(
        "--allow-host",
        metavar="NAME",
        action="append",
        help="a name (besides localhost and IP addresses) that requests may use to reach the server, "
        "e.g. the machine's name when serving on the network (repeatable; '*': any)",
    )
    serve.add_argument(
        "--compact-every",
        metavar="AGE",
        default="5m",
        help="compact the store's closed segments this often, off the intake path (default 5m; 0: never)",
    )
    serve.add_argument(
        "--no-scrubbing",
        action="store_true",
        help="store spans as received (default: scrub them like in-process)",
    )
    serve.add_argument(
        "--to",
        metavar="URL",
        default=None,
        help="write received spans into ClickHouse's otel_traces instead of the store, in the "
        "OpenTelemetry Collector's schema: clickhouse://user@host:8123/db?table=otel_traces "
        "(password: $CLICKHOUSE_PASSWORD) or chdb:///folder; the table is created when missing",
    )
    serve.add_argument(
        "--source",
        metavar="URL",
        default=None,
        help="show ClickHouse's otel_traces in the web UI and the Query API instead of the store "
        "(e.g. the table the team's Collector writes): clickhouse://user@host:8123/db?table=otel_traces "
        "or chdb:///folder",
    )
    _handler(serve, "_serve:cmd_serve")

    mcp = sub.add_parser(
        "mcp",
        parents=[reading],
        help="serve the store(s) to a coding agent as an MCP server (stdio; Logfire's tool names)",
        description="Run a Model Context Protocol server on standard input/output whose tools read the "
        "store(s): arbitrary_query, schema_reference, find_exceptions_in_file, logfire_link (Logfire's "
        "names and arguments), list_runs, trace_tree, analyze, diff. Add it to a client with: "
        "claude mcp add mastrace -- mastrace mcp --store /path/to/.mastrace",
    )
    mcp.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="stop a tool's SQL statement after this many seconds (default 120; 0: no limit)",
    )
    mcp.add_argument(
        "--memory",
        default=f"{(limits.memory or 0) // 1000**3}GB",
        metavar="SIZE",
        help=f"memory a tool's SQL may use, held by DuckDB and by the operating system (default "
        f"{(limits.memory or 0) // 1000**3}GB; 0: no limit); nothing is spilled to disk",
    )
    mcp.add_argument(
        "--serve-url",
        default="http://127.0.0.1:4318",
        metavar="URL",
        help="where `mastrace serve` runs, for trace links (default http://127.0.0.1:4318)",
    )
    mcp.add_argument(
        "--source",
        metavar="URL",
        default=None,
        help="read ClickHouse's otel_traces instead of the store(s): clickhouse://user@host:8123/db"
        "?table=otel_traces or chdb:///folder (the newest spans, at most 2,000,000, per tool call)",
    )
    _handler(mcp, "_mcp:cmd_mcp")

    _run_parser(sub)
    return parser


def _run_parser(sub: Any) -> None:
    run = sub.add_parser(
        "run",
        help="run a Python program (console script, .py file or python -m MODULE) traced into the store",
        description="Run PROGRAM in this process with mastrace configured and its integrations on "
        "(massgen for the massgen command; openai and anthropic when installed). The options given "
        "here win over the program's own configure() arguments, in the program and in the "
        "processes it starts. Put -- before the program: mastrace run -- massgen --config cfg.yaml 'q'",
    )
    _one_store(run, "the spans go to")
    run.add_argument(
        "--service-name", metavar="NAME", action=_Once, default=None, help="service.name of the spans"
    )
    run.add_argument(
        "--otlp", metavar="URL", action=_Once, default=None, help="also send the spans to this OTLP endpoint"
    )
    run.add_argument("--console", action="store_true", default=None, help="print a line per span to stderr")
    run.add_argument(
        "--experiment",
        metavar="NAME",
        help="the experiment the program's runs belong to (named on every root span)",
    )
    run.add_argument(
        "--repetition",
        metavar="N",
        type=int,
        help="the repetition the program runs (0, 1, ...), for an experiment run one process per "
        "repetition: on every root span, and MassGen turns count from it",
    )
    run.add_argument(
        "--instrument",
        metavar="NAMES",
        action="append",
        default=None,
        help="integrations to turn on, comma-separated or repeated (massgen, openai, anthropic, litellm; "
        "'none'); default: auto",
    )
    run.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS...]")
    _handler(run, "_run:cmd_run")
