"""A compact console exporter: one line per finished span on stderr."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


class ConsoleExporter(SpanExporter):
    """Print `duration  name  trace/span ids` for every span, for quick local debugging."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        stream = self._stream or sys.stderr
        lines = []
        for span in spans:
            ms = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
            ctx = span.context
            ids = f"{ctx.trace_id:032x}/{ctx.span_id:016x}" if ctx else "-"
            status = " ERROR" if not span.status.is_ok else ""
            lines.append(f"[mastrace] {ms:9.1f} ms  {span.name}{status}  {ids}\n")
        try:
            stream.write("".join(lines))
            stream.flush()
        except (OSError, ValueError):
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS
