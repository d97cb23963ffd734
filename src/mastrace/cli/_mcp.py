"""`mastrace mcp`: serve the store(s) to an MCP client over stdio."""

from __future__ import annotations

import argparse
from typing import TextIO

from ..exceptions import MastraceError

__all__ = ["cmd_mcp"]


def cmd_mcp(args: argparse.Namespace, out: TextIO) -> int:
    """Run the MCP server on standard input and output until the client closes it."""
    try:
        from ..mcp_server import build_server

        server = build_server(args.store, serve_url=args.serve_url, source=args.source)
    except ImportError as exc:
        raise MastraceError("mastrace mcp needs the mcp extra: pip install 'mastrace[mcp]'") from exc
    server.run("stdio")  # the protocol owns standard output: nothing else is written there
    return 0
