"""A stdio MCP server with one tool, for MassGen's MCP path in the integration tests."""

from __future__ import annotations

from mcp.server.fastmcp import FastMCP

server = FastMCP("calc")


@server.tool()
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


if __name__ == "__main__":
    server.run()
