"""The argument parser of the `mastrace` command."""

from __future__ import annotations

import argparse

from ..store._limits import DEFAULT_QUERY_LIMITS
from ._commands import cmd_query, cmd_runs, cmd_tree
from ._prune import cmd_prune
from ._push import cmd_push
from ._report_commands import DEFAULT_REPORT, DEFAULT_VIEW, cmd_analyze, cmd_diff, cmd_export, cmd_view
from ._run import cmd_run
from ._serve import cmd_serve

__all__ = ["build_parser"]

_DESCRIPTION = """\
Inspect the local trace store that mastrace writes (default: $MASTRACE_DIR or ./.mastrace).

TRACE is a trace id, a unique prefix of one (4+ hex characters), 'latest' or 'previous'
(coordination sessions count first). The SQL table is `records`, with Logfire's columns."""

_EPILOG = """\
examples:
  mastrace runs
  mastrace tree latest
  mastrace query "SELECT span_name, duration FROM records ORDER BY duration DESC LIMIT 5"
  mastrace analyze latest -o ANALYSIS_REPORT.md
  mastrace view latest -o trace.html
  mastrace diff previous latest
  mastrace export latest --format jaeger-json -o trace.json
  mastrace push --to http://localhost:4318
  mastrace prune --older-than 7d --max-size 5GB
  mastrace run -- massgen --config cfg.yaml 'question'"""


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store",
        metavar="DIR",
        action="append",
        default=None,
        help="store folder (default: $MASTRACE_DIR or ./.mastrace); repeat it, or give a glob such as "
        "'runs/*/.mastrace', to read several stores as one",
    )
    return common


def _trace_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "trace",
        nargs="?",
        default="latest",
        metavar="TRACE",
        help="trace id, unique prefix, 'latest' (default) or 'previous'",
    )


def build_parser() -> argparse.ArgumentParser:
    """The `mastrace` parser with its subcommands; each sets `handler` in the parsed namespace."""
    common = _common()
    parser = argparse.ArgumentParser(
        prog="mastrace",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    runs = sub.add_parser("runs", parents=[common], help="list runs (traces), newest first")
    runs.add_argument("--limit", type=int, default=20, help="show at most N runs (0: all; default 20)")
    runs.add_argument("--format", choices=("table", "json"), default="table")
    runs.set_defaults(handler=cmd_runs)

    tree = sub.add_parser("tree", parents=[common], help="print a trace's span hierarchy")
    _trace_arg(tree)
    tree.add_argument(
        "--max-spans", type=int, default=2000, help="print at most N spans (0: all; default 2000)"
    )
    tree.set_defaults(handler=cmd_tree)

    query = sub.add_parser("query", parents=[common], help="run SQL against the `records` table")
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
    query.set_defaults(handler=cmd_query)

    analyze = sub.add_parser("analyze", parents=[common], help=f"write {DEFAULT_REPORT} for a trace")
    _trace_arg(analyze)
    analyze.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help=f"output file, '-' for stdout (default: ./{DEFAULT_REPORT}; stdout for json)",
    )
    analyze.add_argument("--format", choices=("markdown", "json"), default="markdown")
    analyze.set_defaults(handler=cmd_analyze)

    view = sub.add_parser("view", parents=[common], help="write a self-contained HTML waterfall of a trace")
    _trace_arg(view)
    view.add_argument("-o", "--output", metavar="FILE", help=f"output file (default: ./{DEFAULT_VIEW})")
    view.add_argument(
        "--max-spans",
        type=int,
        default=None,
        help="draw at most N spans (default 20,000)",
    )
    view.set_defaults(handler=cmd_view)

    diff = sub.add_parser(
        "diff", parents=[common], help="compare two runs' configs, durations, tokens and cost"
    )
    diff.add_argument("run_a", metavar="RUN_A", help="trace id, prefix, 'latest' or 'previous'")
    diff.add_argument("run_b", metavar="RUN_B", help="trace id, prefix, 'latest' or 'previous'")
    diff.add_argument("--format", choices=("text", "json"), default="text")
    diff.set_defaults(handler=cmd_diff)

    export = sub.add_parser("export", parents=[common], help="export a trace as OTLP/JSON or Jaeger JSON")
    _trace_arg(export)
    export.add_argument("--format", choices=("otlp-json", "jaeger-json"), required=True)
    export.add_argument("-o", "--output", metavar="FILE", help="output file (default: stdout)")
    export.set_defaults(handler=cmd_export)
    push = sub.add_parser(
        "push",
        parents=[common],
        help="send stored spans to an OTLP endpoint or Logfire; what it already took is not sent again",
    )
    push.add_argument(
        "trace", nargs="*", metavar="TRACE", help="only these traces (ids, prefixes, 'latest'); default: all"
    )
    push.add_argument(
        "--to", required=True, metavar="URL", help="http(s)://host:port of an OTLP endpoint, or 'logfire'"
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
    push.set_defaults(handler=cmd_push)

    prune = sub.add_parser(
        "prune",
        parents=[common],
        help="remove the store's oldest segments: older than an age, or while over a size",
        description="Remove whole segments of the store (with their roots and skeleton files), oldest "
        "first: those last written more than --older-than ago, then the oldest while the store is over "
        "--max-size. A segment written in the last minute is never removed. configure(retention=...) "
        "does the same automatically each time a writer starts a new segment.",
    )
    prune.add_argument("--older-than", metavar="AGE", help="remove segments older than AGE: 90m, 12h, 7d, 2w")
    prune.add_argument(
        "--max-size", metavar="SIZE", help="then remove the oldest while the store is over SIZE: 500MB, 5GB"
    )
    prune.add_argument("--dry-run", action="store_true", help="say what would be removed; remove nothing")
    prune.set_defaults(handler=cmd_prune)

    serve = sub.add_parser(
        "serve",
        parents=[common],
        help="receive OTLP (HTTP and gRPC) from any OpenTelemetry SDK into the local store",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--http-port", type=int, default=4318, help="OTLP/HTTP port (default 4318; -1: off)")
    serve.add_argument("--grpc-port", type=int, default=4317, help="OTLP/gRPC port (default 4317; -1: off)")
    serve.add_argument(
        "--token",
        metavar="TOKEN",
        default=None,
        help="require Authorization: Bearer TOKEN on every request (intake, UI and API; a page opened "
        "once with ?token=TOKEN keeps a cookie); default $MASTRACE_SERVE_TOKEN; required off loopback",
    )
    serve.add_argument(
        "--allow-host",
        metavar="NAME",
        action="append",
        help="a name (besides localhost and IP addresses) that requests may use to reach the server, "
        "e.g. the machine's name when serving on the network (repeatable; '*': any)",
    )
    serve.add_argument(
        "--no-scrubbing",
        action="store_true",
        help="store spans as received (default: scrub them like in-process)",
    )
    serve.set_defaults(handler=cmd_serve)

    run = sub.add_parser(
        "run",
        parents=[common],
        help="run a Python program (console script, .py file or python -m MODULE) traced into the store",
        description="Run PROGRAM in this process with mastrace configured and its integrations on "
        "(massgen for the massgen command; openai and anthropic when installed). "
        "Put -- before the program: mastrace run -- massgen --config cfg.yaml 'question'",
    )
    run.add_argument(
        "--instrument",
        metavar="NAMES",
        default=None,
        help="integrations to turn on, comma-separated (massgen, openai, anthropic, litellm; 'none'); "
        "default: auto",
    )
    run.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS...]")
    run.set_defaults(handler=cmd_run)

    return parser
