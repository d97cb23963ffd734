"""`mastrace push`: send stored spans to an OTLP endpoint or to Logfire, once each.

The local store holds every span a process traced, including those a collector that was down
never got. `push` re-sends them exactly as they were first exported (same ids, resource, links,
events, scrubbed attributes) and remembers, per destination, what was acknowledged: pushing
again sends only what is new. Nothing in the store is changed but the small record in
`<store>/pushed/`.

A destination is its resolved endpoint (`localhost` and `127.0.0.1` are one); a batch counts as
sent only once the receiver gave an OTLP answer, after retries as it asks (see `_forward`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

from opentelemetry.sdk.trace import ReadableSpan

from ..exceptions import MastraceError, StoreError
from ..exporters.otlp import destination_key
from ..store._clickhouse import is_clickhouse_url
from ..store._replay import PushState, StoredSpan, live_acked, read_segment, segment_paths, state_path
from ..store._retention import parse_duration
from ._forward import Delivery, Sender, endpoint_identity, grpc_sender, http_sender
from ._output import progress
from ._terminal import escape_control

__all__ = ["cmd_push"]

BATCH = 512
DEFAULT_TIMEOUT = 10.0


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


def sender_for(
    to: str, protocol: str | None, header_pairs: Sequence[str], timeout: float = DEFAULT_TIMEOUT
) -> tuple[str, list[str], Sender]:
    """The destination's identity (what its acknowledgements are filed under), the names it had in
    earlier records (the URLs as given), and a function sending to it."""
    headers = _headers(header_pairs)
    if is_clickhouse_url(to):
        return _clickhouse_sender(to)
    if to == "logfire":
        url, auth = _logfire_url()
        return url, [url], http_sender(url, {**auth, **headers}, timeout)
    parts = urlsplit(to)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise MastraceError(
            f"unsupported destination {to!r}: give an http(s)://host:port OTLP endpoint, or 'logfire'"
        )
    protocol = protocol or "http/protobuf"
    identity = endpoint_identity(to, protocol)
    literal = destination_key(to, protocol)
    if protocol == "grpc":
        return (
            identity,
            [literal],
            grpc_sender(literal.removeprefix("grpc:"), parts.scheme == "https", headers, timeout),
        )
    return identity, [literal], http_sender(literal, headers, timeout)


def _clickhouse_sender(to: str) -> tuple[str, list[str], Sender]:
    """Insert into ClickHouse's `otel_traces` (created with the Collector's DDL when missing); the
    destination is filed under the URL without its password."""
    from ..store._clickhouse import ClickHouseWriter, parse_target

    try:
        writer = ClickHouseWriter(parse_target(to))
    except StoreError as exc:
        raise MastraceError(str(exc)) from exc

    def send(spans: Sequence[ReadableSpan]) -> Delivery:
        try:
            writer.send(spans)
        except StoreError as exc:
            raise MastraceError(str(exc)) from exc
        return Delivery()

    return writer.target.url, [writer.target.url], send


def _since(text: str | None) -> int | None:
    """`--since`: a duration back from now (`90s`, `15m`, `2h`, `1d`) or an ISO date-time, as epoch ns
    (to the microsecond, exactly)."""
    if not text:
        return None
    from datetime import datetime, timedelta, timezone

    try:
        return time.time_ns() - int(parse_duration(text) * 1e9)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise MastraceError(
            f"--since takes a duration (90s, 15m, 2h, 1d) or an ISO date-time, not {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1) * 1000


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
    timeout = args.timeout if args.timeout and args.timeout > 0 else DEFAULT_TIMEOUT
    key, names, send = sender_for(args.to, protocol, args.header or (), timeout)
    traces = _traces(stores, args.trace)
    since = _since(args.since)
    started = time.perf_counter()
    total = _Counts()
    try:
        with progress("pushing"):
            for store in stores:
                with _push_lock(store, key):  # one push of a store to a destination at a time
                    _push_store(store, key, names, send, traces, since, total)
    finally:
        if total.rejected:
            print(
                escape_control(
                    f"mastrace push: the receiver rejected {total.rejected} of the span(s) sent: "
                    f"{'; '.join(total.reasons) or 'no reason given'} (OTLP asks not to send them again)"
                ),
                file=sys.stderr,
            )
    elapsed = time.perf_counter() - started
    rate = f" ({total.sent / elapsed:,.0f} spans/s)" if total.sent and elapsed > 0 else ""
    out.write(f"sent {total.sent} span(s) to {args.to}{rate}; {total.already} already sent before")
    if total.rejected:
        out.write(f"; {total.rejected} rejected by the receiver")
    out.write(f"; {total.skipped} malformed line(s) skipped\n" if total.skipped else "\n")
    return 0


def _same_receiver(key: str) -> Callable[[str], bool]:
    """Whether an endpoint, as a traced process named it, is the destination `key` (resolved once)."""
    known: dict[str, bool] = {}

    def same(endpoint: str) -> bool:
        if endpoint not in known:
            grpc = endpoint.startswith("grpc:")
            url = "http://" + endpoint.removeprefix("grpc:") if grpc else endpoint
            try:
                known[endpoint] = endpoint_identity(url, "grpc" if grpc else "http/protobuf") == key
            except MastraceError:
                known[endpoint] = False
        return known[endpoint]

    return same


@dataclass
class _Counts:
    sent: int = 0
    already: int = 0
    skipped: int = 0
    rejected: int = 0
    reasons: list[str] = field(default_factory=list)


@contextlib.contextmanager
def _push_lock(store: Path, key: str) -> Iterator[None]:
    """Hold the lock of pushes of `store` to the destination `key` (waiting for another push's)."""
    path = state_path(store, key).with_suffix(".lock")
    if path.parent.is_symlink():
        raise MastraceError(f"{path.parent} is a symbolic link: the push record is not written through it")
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise MastraceError(f"cannot lock {path}: {exc.strerror or exc}") from exc
    try:
        if sys.platform != "win32":
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)  # released when closed, or when the process ends
        yield
    finally:
        os.close(fd)


def _push_store(
    store: Path,
    key: str,
    names: list[str],
    send: Sender,
    traces: set[str] | None,
    since: int | None,
    counts: _Counts,
) -> None:
    """Push one store, adding to `counts`; each batch is marked as sent once the receiver took it.

    Called under `_push_lock`: a second push of the store to the destination waits, then reads what
    the first recorded, and so sends no span twice.
    """
    try:
        state = PushState.load(store, key, aliases=names)
    except ValueError as exc:
        raise MastraceError(str(exc)) from exc
    # What the endpoint took while the traced processes ran, under whatever name they gave it.
    live = live_acked(store, key, aliases=names, same=_same_receiver(key))
    filtered = traces is not None or since is not None

    def flush(batch: list[StoredSpan], segment: str, offset: int | None, spans: int) -> None:
        _send(send, batch, counts)
        if filtered:
            state.span_ids.update(s.span_id for s in batch)
        elif offset is not None:
            state.offsets[segment] = offset
            state.lines[segment] = spans
        if batch or offset is not None:
            state.save(store)

    for path in segment_paths(store):
        recorded = state.offsets.get(path.name, 0)
        start = 0 if filtered else recorded
        spans = 0  # spans of the segment up to `offset`
        if start:  # what earlier pushes sent is not read again: the record counts it (an older record
            # has no count: its lines are counted once, here)
            known = state.lines.get(path.name)
            spans = known if known is not None else _lines_before(path, start)
            counts.already += spans
            if known is None:
                state.lines[path.name] = spans
                state.save(store)
        batch: list[StoredSpan] = []
        offset: int | None = None
        for item in read_segment(path, start):
            if isinstance(item, int):
                counts.skipped += 1
                offset = item
                continue
            spans += 1
            offset = item.end_offset
            if item.end_offset <= recorded or item.span_id in state.span_ids or item.span_id in live:
                counts.already += 1  # acknowledged by an earlier push, or live
                continue
            if not _wanted(item, traces, since):
                continue
            batch.append(item)
            if len(batch) >= BATCH:
                flush(batch, path.name, offset, spans)
                batch = []
        flush(batch, path.name, offset if offset is not None and offset > start else None, spans)
    _push_compacted(store, state, send, live, traces, since, counts)


def _push_compacted(
    store: Path,
    state: PushState,
    send: Sender,
    live: set[str],
    traces: set[str] | None,
    since: int | None,
    counts: _Counts,
) -> None:
    """Push the spans compacted files hold that the destination has not taken: those of segments it
    never took whole as NDJSON (it was first pushed to after the compaction, or the compaction ran
    while it pushed), after the rows of each origin an earlier push sent from a compacted file."""
    from ..store._replay_compacted import compacted_origins, read_compacted

    filtered = traces is not None or since is not None
    try:
        parts = compacted_origins(store)
    except Exception as exc:  # a file replaced or unreadable: the next push sends what is left
        raise StoreError(f"cannot read the compacted files of {store}: {exc}") from exc
    for part in parts:
        if all(_took_whole(state, name, part.rows) for name in part.segments):
            counts.already += part.rows
            continue
        skip = 0 if filtered else min(state.compacted.get(part.key, 0), part.rows)
        counts.already += skip
        read = skip
        batch: list[StoredSpan] = []

        def flush(batch: list[StoredSpan], read: int, key: str = part.key) -> None:
            _send(send, batch, counts)
            if filtered:
                state.span_ids.update(s.span_id for s in batch)
            else:
                state.compacted[key] = read
            state.save(store)

        for item in read_compacted(part, skip):
            read += 1
            if isinstance(item, int):
                counts.skipped += 1
                continue
            if item.span_id in state.span_ids or item.span_id in live:
                counts.already += 1
                continue
            if not _wanted(item, traces, since):
                continue
            batch.append(item)
            if len(batch) >= BATCH:
                flush(batch, read)
                batch = []
        if batch or read > skip:
            flush(batch, read)


def _wanted(item: StoredSpan, traces: set[str] | None, since: int | None) -> bool:
    """Whether a push limited to `traces` and to spans started from `since` sends `item`."""
    return (traces is None or item.trace_id in traces) and (since is None or item.start_ns >= since)


def _took_whole(state: PushState, segment: str, rows: int) -> bool:
    """Whether the destination took `segment` whole as NDJSON (compaction replaces only segments every
    destination then known had taken whole; a record without a count is from before counts were kept)."""
    if segment not in state.offsets:
        return False
    lines = state.lines.get(segment)
    return lines is None or lines >= rows


def _send(send: Sender, batch: list[StoredSpan], counts: _Counts) -> None:
    if not batch:
        return
    delivery = send([s.span for s in batch])
    counts.sent += len(batch)
    if delivery.rejected:
        counts.rejected += delivery.rejected
        if delivery.message and delivery.message not in counts.reasons:
            counts.reasons.append(delivery.message)


def _lines_before(path: Path, offset: int) -> int:
    """The complete lines in the first `offset` bytes of a segment (one span each)."""
    lines = 0
    with path.open("rb") as file:
        left = offset
        while left > 0 and (chunk := file.read(min(left, 1 << 20))):
            lines += chunk.count(b"\n")
            left -= len(chunk)
    return lines
