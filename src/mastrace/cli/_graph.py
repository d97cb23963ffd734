"""The `graph` subcommand: a run's coordination graph as Mermaid, DOT, SVG or JSON."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from ..analysis import build_graph
from ._commands import open_store
from ._output import json_default, progress, write_output

__all__ = ["cmd_graph"]


def cmd_graph(args: argparse.Namespace, out: TextIO) -> int:
    """Print (or write to `-o`) the coordination graph of a run: agents, votes, restarts, handoffs,
    tools and MCP servers."""
    with open_store(args) as store, progress("reading"):
        trace_id = store.resolve(args.trace)
        graph = build_graph(trace_id, store.spans(trace_id))
    if args.format == "json":
        text = json.dumps(graph.to_dict(), indent=2, ensure_ascii=False, default=json_default) + "\n"
    elif args.format == "dot":
        text = graph.to_dot()
    elif args.format == "svg":
        text = graph.to_svg()
    else:
        text = graph.to_mermaid()
    path = write_output(text, args.output, None, out)
    if path is not None:
        out.write(f"wrote the coordination graph of trace {trace_id} to {path}\n")
    return 0
