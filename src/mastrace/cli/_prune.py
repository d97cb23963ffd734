"""`mastrace prune`: remove a store's oldest segments, by age or to bring it under a size."""

from __future__ import annotations

import argparse
from typing import TextIO

from ..exceptions import MastraceError
from ..store._retention import ACTIVE_SECONDS, Retention, parse_duration, parse_size, prune

__all__ = ["cmd_prune"]


def _megabytes(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def cmd_prune(args: argparse.Namespace, out: TextIO) -> int:
    """Remove the segments older than `--older-than`, then the oldest while over `--max-size`."""
    from ..store.reader import store_paths

    if args.older_than is None and args.max_size is None:
        raise MastraceError("say what to keep: --older-than 7d, --max-size 5GB, or both")
    try:
        retention = Retention(
            parse_duration(args.older_than) if args.older_than is not None else None,
            parse_size(args.max_size) if args.max_size is not None else None,
        )
    except ValueError as exc:
        raise MastraceError(str(exc)) from None
    for store in store_paths(args.store):
        if not (store / "segments").is_dir() and not (store / "segments").is_symlink():
            raise MastraceError(f"no local store at {store} (pass --store DIR or set MASTRACE_DIR)")
        result = prune(store, retention, dry_run=args.dry_run)
        verb = "would remove" if args.dry_run else "removed"
        active = (
            f", {result.active} of them written in the last {ACTIVE_SECONDS:g} s or held by a running writer "
            "(never removed)"
            if result.active
            else ""
        )
        links = (
            f"; skipped {result.links} symbolic link(s) inside the store (never followed)"
            if result.links
            else ""
        )
        pending = (
            f"; {verb} {result.pending_removed} start-record file(s) of writers gone"
            if result.pending_removed
            else ""
        )
        out.write(
            f"{verb} {len(result.removed)} segment(s) ({_megabytes(result.freed)}) from {store}; "
            f"kept {result.kept} ({_megabytes(result.kept_bytes)}){active}{links}{pending}\n"
        )
        if args.compact and not args.dry_run:
            from ._compact import compact_report

            out.write(compact_report(store, ACTIVE_SECONDS))
    return 0
