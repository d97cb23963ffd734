"""`mastrace serve`: OTLP intake into the local store (extra `mastrace[serve]`).

Any OpenTelemetry SDK, a Collector, or `logfire` with its base URL pointed here can send spans to
the local store: OTLP/HTTP (protobuf or JSON, gzip or not) on port 4318 and OTLP/gRPC on 4317,
on 127.0.0.1 by default. What arrives is scrubbed and written exactly like in-process export.

Every route (intake, UI, API) is behind one `Guard`: requests must name the server by a loopback
name or an IP address (or a name given with `--allow-host`), may not come from another site's web
page, and carry the token when one is set (`--token` or `MASTRACE_SERVE_TOKEN`, see
`resolve_token`; required when listening off loopback). Only OTLP content types are read; bodies
are bounded while they are inflated and while they are in flight (503 with `Retry-After` beyond).

Example:
    ```console
    $ mastrace serve --store .mastrace
    $ OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 python my_agents.py
    ```
"""

from __future__ import annotations

from ._guard import Guard, resolve_token
from ._server import IntakeServer, start_intake

__all__ = ["Guard", "IntakeServer", "resolve_token", "start_intake"]
