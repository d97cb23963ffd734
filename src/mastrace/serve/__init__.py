"""`mastrace serve`: OTLP intake into the local store (extra `mastrace[serve]`).

Any OpenTelemetry SDK, a Collector, or `logfire` with its base URL pointed here can send spans to
the local store: OTLP/HTTP (protobuf or JSON, gzip or not) on port 4318 and OTLP/gRPC on 4317,
on 127.0.0.1 by default. What arrives is scrubbed and written exactly like in-process export.

Example:
    ```console
    $ mastrace serve --store .mastrace
    $ OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 python my_agents.py
    ```
"""

from __future__ import annotations

from ._server import IntakeServer, start_intake

__all__ = ["IntakeServer", "start_intake"]
