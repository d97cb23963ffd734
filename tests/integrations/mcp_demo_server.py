"""A small stdio MCP server for the integration tests, traced with mastrace.

Run as `python mcp_demo_server.py`; spans go to the local store named by `MASTRACE_TEST_STORE`.
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import Context, MCPServer

import mastrace
from mastrace.integrations.mcp import traced_tool

mastrace.configure(local=os.environ["MASTRACE_TEST_STORE"], service_name="mcp-demo-server", synchronous=True)
server = MCPServer("demo")
tracer = mastrace.get_tracer("demo.server")


@server.tool()
@traced_tool
async def add(a: int, b: int, ctx: Context) -> int:
    """Add two numbers."""
    with tracer.span("demo.compute", {"demo.operands": [a, b]}):
        return a + b


@server.tool()
@traced_tool
def explode(reason: str) -> str:
    """Always fail."""
    raise ValueError(reason)


if __name__ == "__main__":
    server.run("stdio")
