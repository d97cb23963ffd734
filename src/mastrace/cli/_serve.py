"""`mastrace serve`: receive OTLP into the local store until interrupted."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import TextIO
from urllib.parse import quote

from ..exceptions import MastraceError

__all__ = ["cmd_serve", "ui_url"]


def ui_url(host: str, port: int, token: str | None = None) -> str:
    """The address to open the UI at: a wildcard listen address is reached through loopback. With a
    token, the sign-in page with the token in the fragment (`#token=`), which a browser never sends:
    the page's script trades it for a cookie."""
    shown = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    base = f"http://[{shown}]:{port}/" if ":" in shown else f"http://{shown}:{port}/"
    return base + (f"signin#token={quote(token, safe='')}" if token else "")


def _token_from_file(path: str) -> str:
    """The token in the first line of the file at `path`."""
    try:
        with open(path, encoding="utf-8") as file:
            token = file.readline().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise MastraceError(
            f"cannot read the token file {path}: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    if not token:
        raise MastraceError(f"the token file {path} is empty")
    return token


def cmd_serve(args: argparse.Namespace, out: TextIO) -> int:
    """Listen for OTLP/HTTP and OTLP/gRPC and write what arrives into the store."""
    from ..exceptions import MastraceError
    from ..serve import resolve_token, start_intake
    from ..store._retention import parse_duration
    from ..store.reader import store_paths

    (store,) = store_paths(args.store)
    try:
        compact_every = parse_duration(args.compact_every) if args.compact_every.strip() != "0" else 0.0
    except ValueError as exc:
        raise MastraceError(f"--compact-every: {exc}") from None
    token = args.token
    if args.token_file is not None:
        if token is not None:
            raise MastraceError("give --token or --token-file, not both")
        token = _token_from_file(args.token_file)
    elif token is not None:
        print(
            "mastrace serve: warning: a token on the command line is visible to every user of this machine "
            "(ps); use --token-file or MASTRACE_SERVE_TOKEN",
            file=sys.stderr,
        )
    server = start_intake(
        store,
        host=args.host,
        http_port=None if args.http_port < 0 else args.http_port,
        grpc_port=None if args.grpc_port < 0 else args.grpc_port,
        scrub=not args.no_scrubbing,
        token=resolve_token(token),
        allow_hosts=tuple(args.allow_host or ()),
        to=args.to,
        source=args.source,
    )
    where = []
    if server.http_port is not None:
        where.append(f"OTLP/HTTP on http://{args.host}:{server.http_port}/v1/traces")
    if server.grpc_port is not None:
        where.append(f"OTLP/gRPC on {args.host}:{server.grpc_port}")
    guarded = "; every request needs the token" if server.options.token else ""
    out.write(
        f"mastrace serve: {' and '.join(where)}, writing to {args.to or store}{guarded} (Ctrl-C to stop)\n"
    )
    if server.http_port is not None:
        # With a token, the address carries it in its fragment (never sent to a server): the sign-in
        # page trades it for a cookie, which the pages' own requests then carry.
        shown = f" (showing {args.source})" if args.source else ""
        out.write(
            f"mastrace serve: web UI{shown} on {ui_url(args.host, server.http_port, server.options.token)}\n"
        )
    out.flush()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    compactor = None
    if compact_every > 0:
        from ..store._compact import PeriodicCompaction

        compactor = PeriodicCompaction(store, compact_every).start()
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        if compactor is not None:
            compactor.stop(timeout=30)
        server.stop()
    out.write(f"mastrace serve: stored {server.intake.stored} span(s)\n")
    return 0
