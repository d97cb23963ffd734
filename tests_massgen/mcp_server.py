"""A stdio MCP server with one tool, for MassGen's MCP path in the integration tests."""

from __future__ import annotations

import os

from mcp.server.fastmcp import FastMCP

server = FastMCP("calc")


@server.tool()
def multiply(a: int, b: int) -> int:
    """Multiply two non-negative integers (a 0 makes the server crash mid-call)."""
    if b == 0:
        os._exit(3)
    if a < 0 or b < 0:
        raise ValueError(f"negative numbers are not supported: {a} x {b}")
    return a * b


if __name__ == "__main__":
    server.run()
