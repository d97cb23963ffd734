"""`mastrace mcp`: the local store(s) as a Model Context Protocol server, for coding agents.

The tools are Logfire's MCP server's (`arbitrary_query(query, age)`, `schema_reference()`,
`find_exceptions_in_file(filepath, age)`, `logfire_link(trace_id)`) over the same `records` table,
offline, plus `list_runs`, `trace_tree`, `analyze` and `diff`. Every tool reads; SQL runs in the
sandbox of `mastrace query`. Needs the `mcp` extra.

Example:
    ```console
    $ claude mcp add mastrace -- mastrace mcp --store /path/to/.mastrace
    ```
"""

from __future__ import annotations

from ._server import build_server

__all__ = ["build_server"]
