"""`mastrace push`: send stored spans to an OTLP endpoint or to Logfire, once each.

The local store holds every span a process traced, including those a collector that was down
never got. `push` re-sends them exactly as they were first exported (same ids, resource, links,
events, scrubbed attributes) and remembers, per destination, what was acknowledged: pushing
again sends only what is new. Nothing in the store is changed but the small record in
`<store>/pushed/`.
"""

from __future__ import annotations

import argparse
import gzip
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

from opentelemetry.sdk.trace import ReadableSpan

from ..exceptions import MastraceError
from ..exporters.otlp import destination_key
from ..store._replay import PushState, StoredSpan, live_acked, read_segment, segment_paths
from ._output import progress

__all__ = ["cmd_push"]

BATCH = 512
_TIMEOUT = 10.0
Sender = Callable[[Sequence[ReadableSpan]], None]


def _http_sender(url: str, headers: dict[str, str]) -> Sender:
    """POST OTLP/protobuf batches to `url`; raise `MastraceError` on anything but a 2xx."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    def send(spans: Sequence[ReadableSpan]) -> None:
        body = gzip.compress(encode_spans(spans).SerializeToString())
        request = urllib.request.Request(
            url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip", **headers},
        )
        try:
            with urllib.request.urlopen(request, timeout=_TIMEOUT) as response:
                reply = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:200].decode("utf-8", "replace").strip()
            raise MastraceError(
                f"{url} answered {exc.code} {exc.reason}" + (f": {detail}" if detail else "")
            ) from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise MastraceError(f"cannot reach {url}: {reason}") from exc
        if reply:
            try:
                partial = ExportTraceServiceResponse.FromString(reply).partial_success
            except Exception:  # not an OTLP reply: a 2xx is taken as accepted
                return
            if partial.rejected_spans:
                raise MastraceError(
                    f"{url} rejected {partial.rejected_spans} of {len(spans)} spans: {partial.error_message}"
                )

    return send


def _grpc_sender(endpoint: str, insecure: bool, headers: dict[str, str]) -> Sender:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    exporter = OTLPSpanExporter(
        endpoint=endpoint, insecure=insecure, headers=headers or None, timeout=_TIMEOUT
    )

    def send(spans: Sequence[ReadableSpan]) -> None:
        if exporter.export(spans) is not SpanExportResult.SUCCESS:
            raise MastraceError(f"the OTLP/gRPC endpoint {endpoint} did not accept the spans")

    return send


def _logfire_url() -> tuple[str, dict[str, str]]:
    token = os.environ.get("LOGFIRE_TOKEN")
    if not token:
        raise MastraceError("pushing to Logfire needs a write token in LOGFIRE_TOKEN")
    base = os.environ.get("LOGFIRE_BASE_URL")
    if not base:
        region = token.split("_")[2] if token.startswith("pylf_v") and token.count("_") >= 3 else "us"
        base = f"https://logfire-{region}.pydantic.dev"
    return base.rstrip("/") + "/v1/traces", {"Authorization": token}


def _headers(pairs: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise MastraceError(f"--header takes KEY=VALUE, not {pair!r}")
        out[key.strip()] = value.strip()
    return out


def sender_for(to: str, protocol: str | None, header_pairs: Sequence[str]) -> tuple[str, Sender]:
    """The destination's key (what its acknowledgements are filed under) and a function sending to it."""
    headers = _headers(header_pairs)
    if to == "logfire":
        url, auth = _logfire_url()
        return url, _http_sender(url, {**auth, **headers})
    parts = urlsplit(to)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise MastraceError(
            f"unsupported destination {to!r}: give an http(s)://host:port OTLP endpoint, or 'logfire'"
        )
    protocol = protocol or "http/protobuf"
    key = destination_key(to, protocol)
    if protocol == "grpc":
        endpoint = key.removeprefix("grpc:")
        return key, _grpc_sender(endpoint, parts.scheme == "http", headers)
    return key, _http_sender(key, headers)


def _since(text: str | None) -> int | None:
    """`--since`: a duration back from now (`90s`, `15m`, `2h`, `1d`) or an ISO date-time, as epoch ns."""
    if not text:
        return None
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if text[-1:] in units and text[:-1].replace(".", "", 1).isdigit():
        return int((time.time() - float(text[:-1]) * units[text[-1]]) * 1e9)
    from datetime import datetime, timezone

    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise MastraceError(
            f"--since takes a duration (90s, 15m, 2h, 1d) or an ISO date-time, not {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1e9)


def _traces(stores: list[Path], refs: Sequence[str]) -> set[str] | None:
    if not refs:
        return None
    from ..analysis import TraceStore

    with TraceStore(stores) as traces:
        return {traces.resolve(ref) for ref in refs}


def cmd_push(args: argparse.Namespace, out: TextIO) -> int:
    """Send stored spans to `--to`, skipping what that destination already acknowledged."""
    from ..store.reader import store_paths

    stores = store_paths(args.store)
    for store in stores:
        if not (store / "segments").is_dir():
            raise MastraceError(f"no local store at {store} (pass --store DIR or set MASTRACE_DIR)")
    protocol = args.protocol or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    key, send = sender_for(args.to, protocol, args.header or ())
    traces = _traces(stores, args.trace)
    since = _since(args.since)
    started = time.perf_counter()
    sent = already = skipped = 0
    with progress("pushing"):
        for store in stores:
            counts = _push_store(store, key, send, traces, since)
            sent, already, skipped = sent + counts[0], already + counts[1], skipped + counts[2]
    elapsed = time.perf_counter() - started
    rate = f" ({sent / elapsed:,.0f} spans/s)" if sent and elapsed > 0 else ""
    out.write(f"sent {sent} span(s) to {key}{rate}; {already} already sent before")
    out.write(f"; {skipped} malformed line(s) skipped\n" if skipped else "\n")
    return 0


def _push_store(
    store: Path, key: str, send: Sender, traces: set[str] | None, since: int | None
) -> tuple[int, int, int]:
    """Push one store; returns (sent, already sent before, malformed lines skipped)."""
    try:
        state = PushState.load(store, key)
    except ValueError as exc:
        raise MastraceError(str(exc)) from exc
    live = live_acked(store, key)  # what the endpoint took while the traced processes ran
    filtered = traces is not None or since is not None
    sent = already = skipped = 0

    def flush(batch: list[StoredSpan], segment: str, offset: int | None) -> None:
        nonlocal sent
        if batch:
            send([s.span for s in batch])
            sent += len(batch)
        if filtered:
            state.span_ids.update(s.span_id for s in batch)
        elif offset is not None:
            state.offsets[segment] = offset
        if batch or offset is not None:
            state.save(store)

    for path in segment_paths(store):
        recorded = state.offsets.get(path.name, 0)
        start = 0 if filtered else recorded
        batch: list[StoredSpan] = []
        offset: int | None = None
        for item in read_segment(path, start):
            if isinstance(item, int):
                skipped += 1
                offset = item
                continue
            offset = item.end_offset
            if item.end_offset <= recorded or item.span_id in state.span_ids or item.span_id in live:
                already += 1  # acknowledged by an earlier push, or live
                continue
            if (traces is not None and item.trace_id not in traces) or (
                since is not None and item.start_ns < since
            ):
                continue
            batch.append(item)
            if len(batch) >= BATCH:
                flush(batch, path.name, offset)
                batch = []
        flush(batch, path.name, offset if offset is not None and offset > start else None)
    return sent, already, skipped
