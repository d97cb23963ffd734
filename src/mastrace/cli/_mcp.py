"""`mastrace mcp`: serve the store(s) to an MCP client over stdio."""

from __future__ import annotations

import argparse
from typing import TextIO

from ..exceptions import MastraceError

__all__ = ["cmd_mcp"]


def cmd_mcp(args: argparse.Namespace, out: TextIO) -> int:
    """Run the MCP server on standard input and output until the client closes it."""
    from ..store._limits import cap_process_memory
    from ._commands import size_arg

    memory = size_arg(args.memory)
    try:
        from ..mcp_server import build_server

        server = build_server(
            args.store,
            serve_url=args.serve_url,
            source=args.source,
            memory=memory,
            max_seconds=args.timeout or None,
        )
    except ImportError as exc:
        raise MastraceError("mastrace mcp needs the mcp extra: pip install 'mastrace[mcp]'") from exc
    if memory is not None:
        # DuckDB's memory limit does not cover every allocation (one repeat() or list built in one
        # expression): the kernel holds this process to it as well.
        cap_process_memory(memory)
    server.run("stdio")  # the protocol owns standard output: nothing else is written there
    return 0
